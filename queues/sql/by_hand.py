"""A person's retry now and rerun, the cancel of a todo nobody holds (a dead letter too), and
the lock behind a bulk rerun or cancel from the Board.

Why raw SQL: each is a guarded update (``WHERE state = expected``; no row back means the todo
moved on) inside a plan that the async executor may run too, where the ORM cannot.

Triggers they rely on (migration 0007): ``todos_outbox_doorbell_pending`` rings the
endpoint's notify URL when a todo becomes pending again.
"""

from __future__ import annotations

from queues.db import Statement
from queues.sql import SCOPE_USER

RETRY_NOW = Statement(
    "retry_now",
    """
UPDATE todos SET state = 'pending', next_retry_at = NULL, updated_at = statement_timestamp()
 WHERE id = %(todo_id)s AND state = 'retry_wait'
RETURNING id
""",
    why="a guarded state change",
)

# A new round: counters reset, the result of record cleared (each attempt keeps its own), a
# rerun runs now (not_before cleared).
RERUN = Statement(
    "rerun",
    """
UPDATE todos
   SET state = 'pending', round = round + 1, attempt = 0, failures = 0, result = NULL,
       dead_letter_reason = '', ended_at = NULL, not_before = NULL,
       updated_at = statement_timestamp()
 WHERE id = %(todo_id)s AND state = %(from_state)s
RETURNING id
""",
    why="a guarded state change",
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
CANCEL_DEAD_LETTER = Statement(
    "cancel_dead_letter",
    """
UPDATE todos
   SET state = 'canceled', dead_letter_reason = '', updated_at = statement_timestamp()
 WHERE id = %(todo_id)s AND state = 'dead'
RETURNING id
""",
    why="a guarded state change",
)

# A bulk rerun or cancel (board/triage.py) works a chunk of todos in one transaction: this
# locks the chunk first, in id order (two bulk actions over the same todos queue up rather
# than deadlock), and says what each one is now, so a todo that moved on since the person
# confirmed is skipped under the lock, never forced. Ids outside the person's teams are not
# returned: unknown and foreign alike.
LOCK_TODOS_FOR_BULK = Statement(
    "lock_todos_for_bulk",
    f"""
SELECT t.id, t.state, t.last_attempt_seq, t.round
  FROM todos t
 WHERE t.id = ANY(%(todo_ids)s::bigint[]) AND ({SCOPE_USER})
 ORDER BY t.id
   FOR UPDATE OF t
""",
    why="FOR UPDATE of many rows in a fixed order, scoped by the person's teams",
)
