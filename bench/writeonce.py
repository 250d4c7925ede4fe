"""An experiment for ADR-0039's bar: the attempt row written once, at close.

The bar (ours >= 0.90 x nohist, bench/nohist.py) was not met by three passes of cuts to the
product's statements (docs/benchmarks.md). The design those passes named as the one left
keeps the open attempt's facts on the todo row, beside the live lease it already carries,
and writes the attempt row once, when the attempt ends. This module measures that design
without building it: ``statements()`` makes twins of the bench loop's three statements
(claim_next, the agent's heartbeat and its complete) from the nohist twins, by edits that
must each apply exactly once (else ``nohist.Drifted``):

- **claim_next**: nohist's claim (the todo moves exactly as in the product), and the open
  attempt's claimer, claimant, session and fence hash set on the todo (``lease_*``).
- **heartbeat**: nohist's heartbeat, with the product's holder checks (an endpoint's own,
  unfenced attempt, of the seq named) made on the todo's ``lease_*`` columns.
- **complete**: nohist's close with the same checks, the ``lease_*`` columns cleared, and the
  closed attempt inserted (every column the product's close leaves on the row) and returned
  as the product returns it.

The columns exist only in the bench database (``add_lease_columns``: nullable, added by
``python -m bench.instructions --systems ...,once``); the twins cover the loop's fast path
only (no lapsed lease, no prune). ``strip_attempts`` is the experiment's floor: it leaves
``todo_attempts`` its primary key and (todo, seq) index alone, without its foreign keys, its
row rules, the one-open index and the Board's indexes, to show what a bare row per attempt
costs whatever is built around it. tests/queues/test_sql_variants.py holds the twins to
write the row the product writes.
"""

from __future__ import annotations

import re

from bench.nohist import Drifted
from queues.db import Statement
from queues.sql import attempt_columns
from queues.sql import close as close_sql

# column, type, the claim's parameter for it: the open attempt's facts on the todo row (the
# product keeps them on the attempt, from the same parameters).
LEASE_COLUMNS = [
    ("lease_claimer_kind", "varchar(16)", "claimer_kind"),
    ("lease_endpoint_id", "bigint", "claimer_endpoint"),
    ("lease_user_id", "integer", "claimer_user"),
    ("lease_mcp_session_id", "varchar(200)", "mcp_session_id"),
    ("lease_mcp_session_id_truncated", "boolean", "mcp_session_id_truncated"),
    ("lease_mcp_session_id_bytes", "integer", "mcp_session_id_bytes"),
    ("lease_claimant", "varchar(200)", "claimant"),
    ("lease_claimant_truncated", "boolean", "claimant_truncated"),
    ("lease_claimant_bytes", "integer", "claimant_bytes"),
    ("lease_token_hash", "varchar(64)", "token_hash"),
]

_UPDATED = "updated_at = statement_timestamp()"
_SET_LEASE = "".join(f"{c} = %({p})s,\n           " for c, _, p in LEASE_COLUMNS) + _UPDATED
_CLEAR_LEASE = "".join(f"{c} = NULL,\n           " for c, _, _ in LEASE_COLUMNS) + _UPDATED
# _HELD_BY_AGENT (queues/sql/close.py), on the todo's lease columns.
_HELD = """
   AND t.lease_claimer_kind = 'endpoint' AND t.lease_endpoint_id = %(scope_endpoint)s
   AND t.lease_token_hash IS NULL
   AND (%(attempt_seq)s::int IS NULL OR t.last_attempt_seq = %(attempt_seq)s::int)"""
_CUR_LEASE = (
    "SELECT t.id, t.last_attempt_seq AS seq, t.round, t.attempt, t.owner, t.claimed_at, "
    + ", ".join(f"t.{c}" for c, _, _ in LEASE_COLUMNS)
    + ", t.last_heartbeat_at"
)
# The product's closed row (queues/sql/claim.py _CLAIM_OPENED, then close.py _CLOSE_CLOSED
# for the agent's own close), inserted in one go.
_CLOSED = """,
closed AS (
    INSERT INTO todo_attempts (
        todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id, mcp_session_id,
        mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated,
        claimant_bytes, claimed_at, last_heartbeat_at, lease_expires_at, ended_at, outcome,
        disposition, ended_by_id, ended_by_endpoint_id, summary, summary_document,
        summary_truncated, summary_bytes, artifact, artifact_truncated, artifact_bytes,
        result, lease_token_hash)
    SELECT cur.id, cur.seq, cur.round, cur.attempt, cur.lease_claimer_kind,
           cur.lease_endpoint_id, cur.lease_user_id, cur.lease_mcp_session_id,
           cur.lease_mcp_session_id_truncated, cur.lease_mcp_session_id_bytes, cur.owner,
           cur.lease_claimant, cur.lease_claimant_truncated, cur.lease_claimant_bytes,
           cur.claimed_at, cur.last_heartbeat_at, cur.lease_expires_at, statement_timestamp(),
           %(outcome)s, {disposition}, NULL, NULL, %(summary)s,
           CASE WHEN %(summary)s::text > '' THEN to_tsvector('simple', %(summary)s::text) END,
           %(summary_truncated)s, %(summary_bytes)s, %(artifact)s, %(artifact_truncated)s,
           %(artifact_bytes)s, CASE WHEN %(sets_result)s THEN %(result)s::jsonb END,
           cur.lease_token_hash
      FROM cur
 RETURNING *
)"""


def _disposition() -> str:
    """The product close's disposition of the new state (close.py ``_CLOSE_CLOSED``), so the
    twin cannot record another."""
    found = re.search(
        r"disposition = (CASE cur\.new_state.*? END),\n", close_sql._CLOSE_CLOSED, re.S
    )
    if found is None:
        raise Drifted("bench/writeonce.py: close.py's _CLOSE_CLOSED no longer sets disposition")
    return found.group(1)


def _edit(name: str, text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise Drifted(f"bench/writeonce.py: {name} no longer has {old[:40]!r} exactly once")
    return text.replace(old, new)


def statements(nohist_twins: dict[str, Statement]) -> dict[str, Statement]:
    """Product statement name -> its write-once twin (``nohist.swapped`` runs them)."""
    claim = nohist_twins["claim_next"]
    beat = nohist_twins["heartbeat_held_by_agent"]
    close = nohist_twins["close_held_by_agent"]
    claim_text = _edit(
        claim.name,
        claim.text,
        _UPDATED + "\n      FROM fresh f",
        _SET_LEASE + "\n      FROM fresh f",
    )
    beat_text = _edit(beat.name, beat.text, "\nRETURNING", _HELD + "\nRETURNING")
    nulls = ", ".join("NULL" for _ in attempt_columns("c").split(", "))
    close_text = close.text
    for old, new in [
        ("SELECT t.id, t.last_heartbeat_at", _CUR_LEASE),
        ("\n     FOR UPDATE OF t", _HELD + "\n     FOR UPDATE OF t"),
        (_UPDATED + "\n      FROM cur", _CLEAR_LEASE + "\n      FROM cur"),
        (" RETURNING t.*\n)", " RETURNING t.*\n)" + _CLOSED.format(disposition=_disposition())),
        (nulls, attempt_columns("c", **close_sql._HOLDER_NAMES)),
        ("FROM moved m", "FROM moved m\n  JOIN closed c ON c.todo_id = m.id"),
    ]:
        close_text = _edit(close.name, close_text, old, new)
    made = {
        "claim_next": (claim_text, claim.why),
        "heartbeat_held_by_agent": (beat_text, beat.why),
        "close_held_by_agent": (close_text, close.why),
    }
    return {
        name: Statement(name + "_writeonce", text, why=why, prepare=True)
        for name, (text, why) in made.items()
    }


def add_lease_columns(cursor) -> None:
    """The ``lease_*`` columns on todos (the bench database only; nullable, so no rewrite)."""
    cursor.execute(
        "ALTER TABLE todos "
        + ", ".join(f"ADD COLUMN IF NOT EXISTS {c} {t}" for c, t, _ in LEASE_COLUMNS)
    )


def strip_attempts(cursor) -> list[str]:
    """Drop from todo_attempts everything but its primary key and (todo, seq) index: the
    floor of a row per attempt (the bench database only). Returns what it dropped."""
    cursor.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = 'todo_attempts'::regclass"
        " AND contype IN ('f', 'c')"
    )
    dropped = [name for (name,) in cursor.fetchall()]
    for name in dropped:
        cursor.execute(f'ALTER TABLE todo_attempts DROP CONSTRAINT "{name}"')
    cursor.execute(
        "SELECT indexrelid::regclass::text FROM pg_index"
        " WHERE indrelid = 'todo_attempts'::regclass AND NOT indisprimary"
    )
    indexes = [name for (name,) in cursor.fetchall() if name != "todo_attempts_todo_seq"]
    for name in indexes:
        cursor.execute(f'DROP INDEX "{name}"')
    return dropped + indexes
