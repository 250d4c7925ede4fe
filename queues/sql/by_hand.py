"""A person's retry now and rerun, and the cancel of a todo nobody holds.

Why raw SQL: each is a guarded update (``WHERE state = expected``; no row back means the todo
moved on) inside a plan that the async executor may run too, where the ORM cannot.

Triggers they rely on (migration 0007): ``todos_outbox_doorbell_pending`` rings the
endpoint's notify URL when a todo becomes pending again.
"""

from __future__ import annotations

from queues.db import Statement

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
