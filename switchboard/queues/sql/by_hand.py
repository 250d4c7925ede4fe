"""A person's retry now and rerun, the cancel of a todo nobody holds (a dead letter too), and
the lock behind a bulk rerun or cancel from the Board.

Why raw SQL: each is a guarded update (``WHERE state = expected``; no row back means the todo
moved on) inside a plan that the async executor may run too, where the ORM cannot.

Triggers they rely on (queues/schema/functions.sql): ``todos_outbox_doorbell_pending`` rings
the endpoint's notify URL when a todo becomes pending again.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.models import TodoState
from switchboard.queues.sql.fragments import SCOPE_USER, has_state

RETRY_NOW = Statement(
    "retry_now",
    f"""
UPDATE todos t SET state = 'pending', next_retry_at = NULL, updated_at = statement_timestamp()
  FROM unnest(%(todo_ids)s::bigint[], %(from_states)s::text[]) AS seen(id, state)
 WHERE t.id = seen.id AND t.state = seen.state AND {has_state("t", TodoState.RETRY_WAIT)}
RETURNING t.id, t.endpoint_id
""",
    why="a guarded state change (one todo, written as RERUN is)",
)

# A new round: counters reset, the result of record cleared (each attempt keeps its own), a
# rerun runs now (not_before cleared). For many todos at once (a bulk rerun from the Board)
# as for one: each todo is guarded by the state its caller saw under the row lock
# (``from_states``, one per id); a todo that is in another state is not returned.
RERUN = Statement(
    "rerun",
    """
UPDATE todos t
   SET state = 'pending', round = t.round + 1, attempt = 0, failures = 0, result = NULL,
       dead_letter_reason = '', ended_at = NULL, not_before = NULL,
       updated_at = statement_timestamp()
  FROM unnest(%(todo_ids)s::bigint[], %(from_states)s::text[]) AS seen(id, state)
 WHERE t.id = seen.id AND t.state = seen.state
RETURNING t.id, t.endpoint_id
""",
    why="a guarded state change, of one todo or many in one statement",
)

CANCEL_UNCLAIMED = Statement(
    "cancel_unclaimed",
    """
UPDATE todos
   SET state = 'canceled', next_retry_at = NULL, ended_at = statement_timestamp(),
       updated_at = statement_timestamp()
 WHERE id = %(todo_id)s AND state = %(from_state)s
RETURNING id
""",
    why="a guarded state change on the async path too",
)

# A dead letter set aside by a person (the Board's Cancel on a dead letter): canceled, so it
# leaves the dead-letter pile without running again. Its ``ended_at`` (retention counts from
# it) is kept; the reason moves to the audit row (a canceled todo has no dead-letter reason).
# One todo or many (a bulk cancel), as RERUN.
CANCEL_DEAD_LETTER = Statement(
    "cancel_dead_letter",
    """
UPDATE todos t
   SET state = 'canceled', dead_letter_reason = '', updated_at = statement_timestamp()
  FROM unnest(%(todo_ids)s::bigint[], %(from_states)s::text[]) AS seen(id, state)
 WHERE t.id = seen.id AND t.state = seen.state AND t.state = 'dead'
RETURNING t.id, t.endpoint_id
""",
    why="a guarded state change, of one todo or many in one statement",
)

# A bulk rerun or cancel (board/triage.py) works a chunk of todos in one transaction: this
# locks the chunk first, in id order (two bulk actions over the same todos queue up rather
# than deadlock), and says what each one is now, so a todo that moved on since the person
# confirmed is skipped under the lock, never forced. Ids outside the person's teams are not
# returned: unknown and foreign alike.
LOCK_TODOS_FOR_BULK = Statement(
    "lock_todos_for_bulk",
    f"""
SELECT t.id, t.state, t.last_attempt_seq, t.round, t.dead_letter_reason
  FROM todos t
 WHERE t.id = ANY(%(todo_ids)s::bigint[]) AND ({SCOPE_USER})
 ORDER BY t.id
   FOR UPDATE OF t
""",
    why="FOR UPDATE of many rows in a fixed order, scoped by the person's teams",
)

# Take over (queues/transitions/by_hand.py ``take_over``): in one statement the agent's open
# attempt ends (outcome released, ended by the person, as if they had released it) and the
# person's owner attempt opens, so the todo stays claimed throughout: never pending, never
# claimable, no doorbell. Guarded by the attempt the person saw (``from_seq``, an endpoint's
# and still open) under the row lock the caller holds (LOCK_TODO.user). History over the cap
# is left to the next claim to prune, as a lease taken over by a claim is.
TAKE_OVER = Statement(
    "take_over",
    f"""
WITH ended AS (
    UPDATE todo_attempts a
       SET ended_at = statement_timestamp(), outcome = %(outcome)s, disposition = %(disposition)s,
           last_heartbeat_at = t.last_heartbeat_at, lease_expires_at = t.lease_expires_at,
           ended_by_id = %(user_id)s
      FROM todos t
     WHERE t.id = %(todo_id)s AND {has_state("t", TodoState.CLAIMED)}
       AND t.last_attempt_seq = %(from_seq)s
       AND a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
       AND a.claimer_kind = 'endpoint'
 RETURNING a.todo_id, a.seq
),
moved AS (
    UPDATE todos t
       SET attempt = t.attempt + 1,
           last_attempt_seq = t.last_attempt_seq + 1,
           owner = %(owner)s,
           claimed_at = statement_timestamp(),
           last_heartbeat_at = NULL,
           lease_expires_at = statement_timestamp() + make_interval(secs => %(lease_seconds)s),
           updated_at = statement_timestamp()
      FROM ended
     WHERE t.id = ended.todo_id
 RETURNING t.*
),
opened AS (
    INSERT INTO todo_attempts (
        todo_id, seq, round, attempt, claimer_kind, user_id, owner, claimed_at,
        lease_expires_at, trace_id)
    SELECT m.id, m.last_attempt_seq, m.round, m.attempt, 'owner', %(user_id)s, m.owner,
           m.claimed_at, m.lease_expires_at, %(trace_id)s
      FROM moved m
 RETURNING seq
)
SELECT (SELECT seq FROM ended), (SELECT seq FROM opened)
""",
    why="close one attempt and open the next with the todo held throughout, in one statement",
)
