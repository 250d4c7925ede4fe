"""Table states for the drains (docs/benchmarks.md, "The ledger"): done todos with one closed
attempt each as history, then per drain N pending todos; the endpoints and tokens."""

from __future__ import annotations

from contextlib import contextmanager, suppress

from bench.db import one as scalar

HISTORY_TODOS = """
INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt, failures,
                   round, last_attempt_seq, attempts_pruned, owner, dead_letter_reason, result,
                   created_at, updated_at, ended_at)
SELECT %(ep)s, 'history ' || g, '', 0, 'done', 5, 1, 0, 1, 1, 0, '', '', '{"ok": true}',
       ts, ts + interval '2 s', ts + interval '2 s'
  FROM generate_series(1, %(n)s) g,
       LATERAL (SELECT now() - interval '7 days' + g * interval '1 ms') x(ts)
"""
HISTORY_ATTEMPTS = """
INSERT INTO todo_attempts (
    todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id, mcp_session_id,
    mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated,
    claimant_bytes, claimed_at, last_heartbeat_at, lease_expires_at, ended_at, outcome,
    disposition, ended_by_id, summary, summary_truncated, summary_bytes, summary_document,
    artifact, artifact_truncated, artifact_bytes, result, lease_token_hash)
SELECT t.id, 1, 1, 1, 'endpoint', %(ep)s, NULL, '', false, 0, 'agent:bench-agent',
       'bench/history', false, 13, t.created_at + interval '1 s',
       t.created_at + interval '1500 ms', t.created_at + interval '301 s', t.ended_at,
       'completed', 'done', NULL, 'rebuilt the docs; 3 warnings, no errors (history row)',
       false, 52, to_tsvector('simple', 'rebuilt the docs; 3 warnings, no errors (history row)'),
       NULL, false, 0, '{"ok": true}', NULL
  FROM todos t WHERE t.id > %(first)s
"""
PENDING = """
INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt, failures,
                   round, last_attempt_seq, attempts_pruned, owner, dead_letter_reason, key)
SELECT %(ep)s, 'bench todo ' || g, '', 0, 'pending', 5, 0, 0, 1, 0, 0, '', '',
       CASE WHEN %(keys)s > 0 THEN 'repo-' || (g %% %(keys)s) ELSE '' END
  FROM generate_series(1, %(n)s) g
"""


def make_endpoint() -> int:
    """The user "bench", whose team every section uses, and an endpoint's id on it."""
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user(username="bench", password="bench-only")
    return vend("bench-agent")[0]


def vend(agent_id: str) -> tuple[int, str]:
    """Another endpoint on the user "bench"'s team: its id and token."""
    from django.contrib.auth import get_user_model

    from switchboard.queues import endpoints

    team = get_user_model().objects.get(username="bench").teams.get()
    endpoint, token = endpoints.vend(team, agent_id, verbs="all")
    return endpoint.pk, token


def session_cookie(username: str) -> str:
    """A signed-in session's cookie for that user, as "name=value"."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def checkpoint() -> None:
    """Each drain from a fresh checkpoint (full-page writes alike in every drain)."""
    with suppress(Exception):  # needs superuser or pg_checkpoint; without, carry on
        scalar("CHECKPOINT")


def analyze(vacuum: bool = False) -> None:
    for table in ("todos", "todo_attempts"):
        scalar(f"{'VACUUM (ANALYZE)' if vacuum else 'ANALYZE'} {table}")


@contextmanager
def _no_autovacuum(table: str):
    """One transaction holding ``table`` in SHARE UPDATE EXCLUSIVE mode: inserts go on,
    autovacuum's ANALYZE does not (docs/benchmarks.md, "The same stall, by another road")."""
    scalar("BEGIN")
    try:
        scalar(f"LOCK TABLE {table} IN SHARE UPDATE EXCLUSIVE MODE")
        yield
    except BaseException:
        scalar("ROLLBACK")
        raise
    scalar("COMMIT")


def attempts_after(after_id: int) -> int:
    """The attempt rows of the todos after ``after_id`` (a drain's)."""
    return scalar("SELECT count(*) FROM todo_attempts WHERE todo_id > %s", (after_id,))


def unfinished(after_id: int) -> int:
    return scalar("SELECT count(*) FROM todos WHERE id > %s AND state <> 'done'", (after_id,))


class Scenario:
    """``history`` done todos of ``endpoint_id`` as a baseline (``build``), and the state
    each drain starts from (``reset``)."""

    def __init__(self, endpoint_id: int, history: int):
        self.endpoint_id, self.history, self.baseline = endpoint_id, history, 0

    def build(self) -> None:
        """Empty tables, then the history, ANALYZE between the inserts (docs/benchmarks.md,
        "Why make bench stalled, again")."""
        # todos cascades to todo_attempts and todo_events (the vend event goes too; harmless).
        scalar("TRUNCATE todos, todo_attempts RESTART IDENTITY CASCADE")
        analyze()
        with _no_autovacuum("todos"):
            scalar(HISTORY_TODOS, {"ep": self.endpoint_id, "n": self.history})
        analyze()
        scalar(HISTORY_ATTEMPTS, {"ep": self.endpoint_id, "first": 0})
        analyze(vacuum=True)
        self.baseline = scalar("SELECT coalesce(max(id), 0) FROM todos")

    def reset(self, pending: int) -> int:
        """The baseline again with ``pending`` todos to drain; returns the id after which the
        drain's todos start."""
        scalar("DELETE FROM todos WHERE id > %s", (self.baseline,))  # attempts go with them
        analyze(vacuum=True)
        scalar(PENDING, {"ep": self.endpoint_id, "n": pending, "keys": 0})
        analyze()
        checkpoint()
        return self.baseline
