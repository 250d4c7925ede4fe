"""ADR-0039's reference: the product's drain statements without attempt history (the bench's
twins, never the product's).

ADR-0039 asks that claim throughput with attempt history be within 10 % of the same system
without it. The product has no switch for that (issue 28: no switch in the product's SQL), so
the bench makes the reference here, from the product's own statements: each twin is the
product's text with its attempt parts cut out and nothing else changed. The todo moves
exactly as in the product (the same pick, the same updates, the same triggers, the same
answer's shape); no attempt is read, opened or closed.

- ``claim_next`` (the fast claim): ``opened``, the INSERT of the new attempt, becomes a
  SELECT that nothing reads (PostgreSQL does not run it).
- ``close_held_by_agent`` and ``close_then_claim_next`` (the agent's complete, alone and with
  ``then``): ``cur`` reads the todo alone (the attempt's seq is the todo's
  ``last_attempt_seq``), and ``closed``, the UPDATE of the open attempt, becomes the closed
  attempt's columns computed from the todo's row; with ``then``, ``opened`` as above.

Every cut is of a block found exactly once in the product's text: a product statement that
changed shape stops the bench (``Drifted``) rather than measure something else. A drain on
the twins writes no attempt row, and the peers section checks that it wrote none (and that
ours wrote one a todo), so a statement that did not go through the twins cannot pass unseen.

``use(True)`` swaps the twins into ``queues.sql`` in this process (the transitions read
their statements from there at each call); ``python -m bench.nohist --host H --port P`` is
``switchboard serve`` with the twins swapped in before gunicorn forks its workers.
"""

from __future__ import annotations

import os
import sys
from functools import cache

from queues.db.plans import Statement

NAMES = ("CLAIM_NEXT", "CLOSE_HELD_BY_AGENT", "CLOSE_THEN_CLAIM_NEXT")


class Drifted(RuntimeError):
    """A product statement no longer has the block a twin cuts: the twin would not be the
    same statement without history."""


_CUR = """
    SELECT t.id, a.id AS attempt_id, t.last_heartbeat_at, t.lease_expires_at
      FROM todos t
      JOIN todo_attempts a
        ON a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
"""
_CUR_TWIN = """
    SELECT t.id, t.last_heartbeat_at, t.lease_expires_at, t.claimed_at, t.owner
      FROM todos t
"""
_HELD = """
       AND a.claimer_kind = 'endpoint' AND a.endpoint_id = %(scope_endpoint)s
       AND a.lease_token_hash IS NULL
       AND (%(attempt_seq)s::int IS NULL OR a.seq = %(attempt_seq)s::int)"""
_HELD_TWIN = """
       AND (%(attempt_seq)s::int IS NULL OR t.last_attempt_seq = %(attempt_seq)s::int)"""
_WAKE = (
    "COALESCE(%(wake_at)s::timestamptz,"
    " statement_timestamp() + make_interval(secs => %(wake_in)s::float8))"
)
# The closed attempt as the product's ``closed`` returns it (the columns its row reads),
# computed from the todo: what the UPDATE of todo_attempts would have written.
_CLOSED_TWIN = f"""closed AS (
    SELECT m.id AS todo_id, m.last_attempt_seq AS seq, m.round, m.attempt,
           'endpoint'::text AS claimer_kind, cur.owner, ''::text AS claimant,
           false AS claimant_truncated, 0 AS claimant_bytes, ''::text AS mcp_session_id,
           false AS mcp_session_id_truncated, 0 AS mcp_session_id_bytes,
           NULL::text AS lease_token_hash, cur.claimed_at,
           cur.last_heartbeat_at, cur.lease_expires_at, statement_timestamp() AS ended_at,
           %(outcome)s::text AS outcome, %(disposition)s::text AS disposition,
           {_WAKE} AS not_before,
           %(summary)s::text AS summary, %(summary_truncated)s::bool AS summary_truncated,
           %(summary_bytes)s::int AS summary_bytes, %(artifact)s::text AS artifact,
           %(artifact_truncated)s::bool AS artifact_truncated,
           %(artifact_bytes)s::int AS artifact_bytes,
           CASE WHEN %(sets_result)s THEN %(result)s::jsonb END AS result
      FROM ended m JOIN cur ON cur.id = m.id
)"""
_OPENED_TWIN = """opened AS (
    SELECT m.last_attempt_seq AS seq FROM moved m WHERE m.state = 'claimed'
)"""


def _block(text: str, start: str, end: str) -> str:
    """The one block of ``text`` from ``start`` to the first ``end`` after it."""
    if text.count(start) != 1:
        raise Drifted(f"{start!r} is in the statement {text.count(start)} times, not once")
    i = text.index(start)
    j = text.find(end, i)
    if j < 0:
        raise Drifted(f"no {end!r} after {start!r}")
    return text[i : j + len(end)]


def _cut(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise Drifted(f"{old.strip()[:60]!r} is in the statement {text.count(old)} times")
    return text.replace(old, new)


def twin(statement: Statement) -> Statement:
    """``statement`` without its attempt parts (the module docstring's cuts)."""
    text = statement.text
    if "opened AS (" in text:
        text = _cut(text, _block(text, "opened AS (", "\n RETURNING seq\n)"), _OPENED_TWIN)
    if "closed AS (" in text:
        closed = _block(text, "closed AS (", "\n RETURNING a.*\n)")
        if "UPDATE todo_attempts a" not in closed:
            raise Drifted("closed no longer updates todo_attempts")
        text = _cut(_cut(_cut(text, closed, _CLOSED_TWIN), _CUR, _CUR_TWIN), _HELD, _HELD_TWIN)
    if "todo_attempts" in text:
        raise Drifted(f"{statement.name}: the twin still names todo_attempts")
    return Statement(
        f"nohist_{statement.name}",
        text,
        why=f"the bench's twin of {statement.name} without attempt history",
        prepare=statement.prepare,
    )


@cache
def _statements() -> dict[str, tuple[Statement, Statement]]:
    """Each swapped name: (the product's statement, its twin)."""
    from queues import sql

    return {name: (getattr(sql, name), twin(getattr(sql, name))) for name in NAMES}


def use(on: bool) -> None:
    """The twins (``on``) or the product's statements in ``queues.sql``, in this process."""
    from queues import sql

    for name, (product, nohist) in _statements().items():
        setattr(sql, name, nohist if on else product)


def twins() -> list[Statement]:
    return [nohist for _, nohist in _statements().values()]


def main(argv: list[str]) -> None:
    """``switchboard serve`` (its arguments) with the twins in place in the master, which
    gunicorn's workers inherit when it forks them."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings")
    import django

    django.setup()
    use(True)
    from switchboard.cli import main as switchboard

    switchboard(["serve", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
