"""Ending an attempt (complete, fail, release, cancel, reap, revoke), keeping it alive
(heartbeat), and the reads behind them: the locked read of every slow path, the failure
budget of the agent's fast path and of the sweeper's reap.

Why raw SQL: a close moves the todo and closes its open attempt in one statement, applying
what the transition decided in Python (queues/transitions/decide.py: the state, the
disposition, the retry's delay or the wake time, the dead-letter reason) as parameters; it
decides nothing. ``failures_seen``, when given, guards the decision: it was made on that
failure count, and a todo whose count moved since (it cannot, while its attempt is open,
but the read that found it took no lock) is not closed: no row comes back, and the caller
takes the locked path. The ORM would need a locked read and two updates: three round trips
on the hottest path.

Triggers they rely on (queues/schema/functions.sql): ``todos_outbox_dead_letter`` writes the
dead-letter outbox row (with the attempt this statement closed as ``final_attempt``) when
the todo becomes dead; ``todos_outbox_doorbell_pending`` rings the endpoint's notify URL when
it becomes pending again.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.models import TodoState
from switchboard.queues.records import (
    BUDGET_SOURCE,
    CHECK_ATTEMPT_SOURCE,
    LEASE_SOURCE,
    LOCKED_SOURCE,
    columns,
)
from switchboard.queues.sql.claim import claim_parts
from switchboard.queues.sql.fragments import (
    NO_QUESTION,
    SCOPE_ENDPOINT,
    SCOPE_ENDPOINT_OR_REQUESTER,
    attempt_columns,
    attempt_joins,
    has_state,
    scoped,
    todo_columns,
    todo_joins,
)

# When a todo is claimable again after a snoozed release: an instant, or seconds from now by
# the database's clock (NULL for a plain release: not_before stays as it was).
_WAKE = (
    "COALESCE(%(wake_at)s::timestamptz,"
    " statement_timestamp() + make_interval(secs => %(wake_in)s::float8))"
)

_CLOSE = f"""
WITH cur AS (
    SELECT t.id, a.id AS attempt_id, t.last_heartbeat_at, t.lease_expires_at
      FROM todos t
      JOIN todo_attempts a
        ON a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
     WHERE {{claimed}}
       AND (%(failures_seen)s::int IS NULL OR t.failures = %(failures_seen)s::int)
       AND {{cur_filter}}{{attempt_filter}}
     {{cur_tail}}
),
ended AS (
    UPDATE todos t
       SET state = %(state)s,
           failures = t.failures + %(spends)s::int,
           owner = '',
           claimed_at = NULL,
           last_heartbeat_at = NULL,
           lease_expires_at = NULL,
           next_retry_at = statement_timestamp() + make_interval(secs => %(retry_in)s::float8),
           not_before = COALESCE({_WAKE}, t.not_before),
           result = CASE WHEN %(sets_result)s THEN %(result)s::jsonb ELSE t.result END,
           dead_letter_reason = %(dead_letter_reason)s,
           waiting_for = %(waiting_for)s,
           ended_at = CASE WHEN %(ends)s THEN statement_timestamp() END,
           updated_at = statement_timestamp()
      FROM cur
     WHERE t.id = cur.id
 RETURNING t.*
),
closed AS (
    UPDATE todo_attempts a
       SET ended_at = statement_timestamp(),
           outcome = %(outcome)s,
           disposition = %(disposition)s,
           last_heartbeat_at = cur.last_heartbeat_at,
           lease_expires_at = cur.lease_expires_at,
           not_before = {_WAKE},
           ended_by_id = {{ended_by}},
           ended_by_endpoint_id = {{ended_by_endpoint}},
           summary = %(summary)s,
           -- the summary's words for the Board's search (the row's CHECK holds them to it)
           summary_document = CASE WHEN %(summary)s::text > ''
                                   THEN to_tsvector('simple', %(summary)s::text) END,
           summary_truncated = %(summary_truncated)s,
           summary_bytes = %(summary_bytes)s,
           artifact = %(artifact)s,
           artifact_truncated = %(artifact_truncated)s,
           artifact_bytes = %(artifact_bytes)s,
           result = CASE WHEN %(sets_result)s THEN %(result)s::jsonb END
      FROM cur
     WHERE a.id = cur.attempt_id
 RETURNING a.*
){{next_ctes}}
SELECT {{todo_cols}}, {{attempt_cols}}{{next_cols}}
  FROM ended m
  JOIN closed c ON c.todo_id = m.id
  {{todo_joins}}
  {{attempt_joins}}{{next_join}}
"""

# The agent's fast path: it holds the open, unfenced attempt, of the seq it names (or any).
# That attempt's names need no joins (``holder_names``): its endpoint is the todo's own (both
# filters name the caller's), an endpoint attempt names no user (the row rules,
# todo_attempts_valid), and the holder's own close records no one else as its closer.
_HOLDER_NAMES = {"endpoint": "e.agent_id", "user": "NULL", "ended_by": "NULL"}
_HELD_BY_AGENT = """
       AND a.claimer_kind = 'endpoint' AND a.endpoint_id = %(scope_endpoint)s
       AND a.lease_token_hash IS NULL
       AND (%(attempt_seq)s::int IS NULL OR a.seq = %(attempt_seq)s::int)"""


def _close(
    name: str,
    cur_filter: str,
    why: str,
    cur_tail: str = "FOR UPDATE OF t",
    *,
    attempt_filter: str = "",
    holder_names: bool = False,
    claims_next: bool = False,
    keyed: bool = False,
    by_id: bool = True,
) -> Statement:
    """The close statement for one way of finding the todo (``cur_filter`` on the todo,
    ``attempt_filter`` on its open attempt ``a``). ``holder_names``: the caller is the agent
    that holds the attempt and closes it itself (no one else is recorded as its closer), and
    the attempt's names come from the todo's endpoint row. ``claims_next``: claim_next's fast
    claim follows, in the same statement (CLOSE_THEN_CLAIM_NEXT below). ``by_id``: the
    filter names the todo's id (or ids), and the state is checked on the row it finds
    (fragments.has_state); otherwise the state range is the way in."""
    next_parts = {"next_ctes": "", "next_cols": "", "next_join": ""}
    if claims_next:
        ctes, row = claim_parts(
            _NEXT_PICK, keyed=keyed, freed=_FREED if keyed else "0", passing=True
        )
        next_parts = {
            "next_ctes": f",\n{ctes},\nnext_claim AS ({row})",
            "next_cols": ", n.*",
            "next_join": "\n  LEFT JOIN next_claim n ON true",
        }
    text = _CLOSE.format(
        **next_parts,
        claimed=has_state("t", TodoState.CLAIMED) if by_id else "t.state = 'claimed'",
        cur_filter=cur_filter,
        cur_tail=cur_tail,
        attempt_filter=attempt_filter,
        ended_by="NULL" if holder_names else "%(ended_by)s",
        ended_by_endpoint="NULL" if holder_names else "%(ended_by_endpoint)s",
        todo_cols=todo_columns("m", **NO_QUESTION),
        attempt_cols=attempt_columns("c", **NO_QUESTION, **(_HOLDER_NAMES if holder_names else {})),
        todo_joins=todo_joins("m"),
        attempt_joins="" if holder_names else attempt_joins("c"),
    )
    return Statement(name, text, why=why, prepare=True)


CLOSE_HELD_BY_AGENT = _close(
    "close_held_by_agent",
    "t.id = %(todo_id)s AND " + SCOPE_ENDPOINT,
    "the agent's fast path: it holds the open, unfenced attempt (and names its seq or none);"
    " no row back means the call takes the locked path",
    attempt_filter=_HELD_BY_AGENT,
    holder_names=True,
)
# A complete with ``then`` by the agent's fast path: the close, then claim_next's fast claim,
# one statement and one transaction (queues/transitions/close.py says when it is used). The
# claim picks only once the close has closed (``closed`` has its row), and never the todo
# being closed: its row is this statement's own, and the snapshot still shows it claimed.
# The row: CLOSE_HELD_BY_AGENT's columns, then the claim's (all NULL when nothing was
# claimable). A close that can release others (the todo has a parent or dependents) picks
# nothing: the trigger todos_waits_follow releases them at the end of this statement, after
# the pick, and a pick that cannot see them could take a todo they come before. The plan
# claims next in a statement of its own then (transitions/close.py, ``_complete_and_claim``,
# reads the same two columns).
_NEXT_PICK = (
    SCOPE_ENDPOINT
    + " AND t.id <> %(todo_id)s AND EXISTS (SELECT FROM closed)"
    + " AND NOT EXISTS (SELECT FROM ended e WHERE e.parent_id IS NOT NULL OR e.has_dependents)"
)
CLOSE_THEN_CLAIM_NEXT = _close(
    "close_then_claim_next",
    "t.id = %(todo_id)s AND " + SCOPE_ENDPOINT,
    "a close and the next claim in one round trip and one commit: two statements' worth of"
    " CTEs, which the ORM cannot join at all",
    attempt_filter=_HELD_BY_AGENT,
    holder_names=True,
    claims_next=True,
)
# The same for an endpoint with max_claimed_per_key: the pick passes over a key at its limit
# (claim_parts' ``keyed``), counting the key of the todo this statement closes one lower (its
# snapshot still counts it claimed). The trigger todos_waits_follow counts the claimed key
# again after the statement's changes, its close's end among them, and refuses a claim the
# snapshot missed (SQLSTATE SWK01). An end holds nothing a claim of its key waits for, so two
# such statements that each close the key the other picks never wait for each other. A
# refused statement fails whole: the close runs alone, then claim_next.
_FREED = "(t.key = (SELECT f.key FROM ended f))::int"
CLOSE_THEN_CLAIM_NEXT_KEYED = _close(
    "close_then_claim_next_keyed",
    "t.id = %(todo_id)s AND " + SCOPE_ENDPOINT,
    "CLOSE_THEN_CLAIM_NEXT with the keyed pick: one round trip and one commit",
    attempt_filter=_HELD_BY_AGENT,
    holder_names=True,
    claims_next=True,
    keyed=True,
)
CLOSE_CHECKED = _close(
    "close_checked",
    "t.id = %(todo_id)s",
    "after LOCK_TODO and the checks in Python (scope, holder, seq, fence): close that attempt",
    attempt_filter=" AND a.seq = %(attempt_seq)s",
)
CLOSE_MANY = _close(
    "close_many",
    "t.id = ANY(%(todo_ids)s::bigint[])",
    "the sweeper's reap of the lapsed leases LAPSED_LEASES locked, one statement for each"
    " decision (no caller scope: it reads nothing out and moves no row between tenants)",
)
CLOSE_ALL_OF_ENDPOINT = _close(
    "close_all_of_endpoint",
    "t.endpoint_id = %(endpoint_id)s",
    "revocation: every claimed todo of the endpoint",
    by_id=False,
)

# The failure budget of the attempt an agent holds (its fast path's read for a close that
# spends the budget: a fail). No lock: the close statement is guarded by the count read here.
BUDGET_HELD_BY_AGENT = Statement(
    "budget_held_by_agent",
    f"""
SELECT {columns(BUDGET_SOURCE, t="t")}
  FROM todos t
  JOIN todo_attempts a
    ON a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
 WHERE {has_state("t", TodoState.CLAIMED)}
   AND t.id = %(todo_id)s AND {SCOPE_ENDPOINT}{_HELD_BY_AGENT}
""",
    why="the same join as CLOSE_HELD_BY_AGENT's, read before deciding",
    prepare=True,
)

# The sweeper's batch of lapsed leases, locked for its transaction (SKIP LOCKED: several
# sweepers share the work), with each one's budget for the decision.
LAPSED_LEASES = Statement(
    "lapsed_leases",
    """
SELECT t.id, t.failures, t.max_attempts
  FROM todos t
 WHERE t.state = 'claimed' AND t.lease_expires_at <= statement_timestamp()
 ORDER BY t.lease_expires_at
 LIMIT %(batch)s
   FOR UPDATE OF t SKIP LOCKED
""",
    why="FOR UPDATE SKIP LOCKED in the database's clock, by the todos_sweep_due index",
)

# ---------------------------------------------------------------------------------------
# Heartbeat: extend the live lease on the todo row. The attempt row gets the last values
# when it closes, so a heartbeat writes one row (the record's write-amplification concern,
# docs/decisions/0039-attempt-history.md).

_HEARTBEAT = """
UPDATE todos t
   SET last_heartbeat_at = statement_timestamp(),
       lease_expires_at = GREATEST(t.lease_expires_at,
                                   statement_timestamp() + make_interval(secs => %(lease_seconds)s)),
       updated_at = statement_timestamp()
  FROM todo_attempts a
 WHERE {claimed}
   AND a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
   AND {filter}{attempt_filter}
RETURNING {lease}
"""


def _heartbeat(name: str, where: str, why: str, *, attempt_filter: str = "") -> Statement:
    text = _HEARTBEAT.format(
        claimed=has_state("t", TodoState.CLAIMED),
        filter=where,
        attempt_filter=attempt_filter,
        lease=columns(LEASE_SOURCE, t="t"),
    )
    return Statement(name, text, why=why, prepare=True)


HEARTBEAT_HELD_BY_AGENT = _heartbeat(
    "heartbeat_held_by_agent",
    "t.id = %(todo_id)s AND " + SCOPE_ENDPOINT,
    "an UPDATE … FROM joined to the open attempt, extending the lease by the database clock",
    attempt_filter=_HELD_BY_AGENT,
)
HEARTBEAT_CHECKED = _heartbeat(
    "heartbeat_checked",
    "t.id = %(todo_id)s",
    "after LOCK_TODO and the checks in Python: extend that attempt's lease",
    attempt_filter=" AND a.seq = %(attempt_seq)s",
)

# ---------------------------------------------------------------------------------------
# The locked read behind every slow path: the todo (in the caller's scope), its open
# attempt if any, and the attempt a call names (attempt_seq, else the newest closed one).

_LOCK_TODO = f"""
SELECT {columns(LOCKED_SOURCE, t="t")}
  FROM todos t
  JOIN endpoints le ON le.id = t.endpoint_id
 WHERE t.id = %(todo_id)s AND ({{scope}})
   FOR UPDATE OF t
"""
LOCK_TODO = scoped(
    "lock_todo",
    _LOCK_TODO,
    why="FOR UPDATE OF one table of a join, returning the team with the todo",
    agent=SCOPE_ENDPOINT_OR_REQUESTER,
    prepare=True,
)

ATTEMPT_FOR_CHECK = Statement(
    "attempt_for_check",
    f"""
SELECT {columns(CHECK_ATTEMPT_SOURCE, a="a")}
  FROM todo_attempts a
 WHERE a.todo_id = %(todo_id)s
   AND (a.ended_at IS NULL
        OR a.seq = %(attempt_seq)s
        OR (%(attempt_seq)s::int IS NULL AND a.seq = (
              SELECT max(b.seq) FROM todo_attempts b
               WHERE b.todo_id = %(todo_id)s AND b.ended_at IS NOT NULL)))
""",
    why="the open attempt and the one a call names, in one read (a correlated max)",
    prepare=True,
)
