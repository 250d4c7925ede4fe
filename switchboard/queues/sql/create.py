"""Putting a todo on a queue, and finding one by its sender's idempotency key.

Why raw SQL: the insert answers in the records' row layout (a CTE joins the endpoints) in
one round trip, and ``ON CONFLICT DO NOTHING`` lets a concurrent create with the same key lose
without an error; and both run on the async path, where the ORM cannot.

Triggers it relies on (queues/schema/functions.sql): ``todos_outbox_doorbell_created`` rings
the endpoint's notify URL for the new pending todo.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.fragments import NO_QUESTION, todo_columns, todo_joins

INSERT_TODO = Statement(
    "insert_todo",
    f"""
WITH made AS (
    INSERT INTO todos (endpoint_id, requester_id, created_by_id, title, body, priority,
                       idempotency_key, state, max_attempts, attempt, failures, round,
                       last_attempt_seq, attempts_pruned, not_before, owner,
                       dead_letter_reason, created_at, updated_at, waiting_for,
                       after_policy, after_total, after_left, parent_id, key, schedule_id, scheduled_for)
    VALUES (%(endpoint_id)s, %(requester_id)s, %(created_by_id)s, %(title)s, %(body)s,
            %(priority)s, %(idempotency_key)s, %(state)s, %(max_attempts)s, 0, 0, 1, 0, 0,
            %(not_before)s, '', '', statement_timestamp(), statement_timestamp(),
            %(waiting_for)s, %(after_policy)s, %(after_total)s, %(after_left)s, %(parent_id)s, %(key)s,
            %(schedule_id)s, %(scheduled_for)s)
    ON CONFLICT DO NOTHING
 RETURNING *
)
SELECT {todo_columns("t", **NO_QUESTION)}
  FROM made t
  {todo_joins("t")}
""",
    why="an insert answering in the records' layout, losing a key race without an error",
    prepare=True,
)

# The sender's own key space: the endpoint itself (or a person), or one requester. Two
# statements, so each is one probe of the (endpoint, requester, key) unique index.
TODO_BY_OWN_KEY = Statement(
    "todo_by_own_key",
    "SELECT id FROM todos WHERE endpoint_id = %(endpoint_id)s AND requester_id IS NULL"
    " AND idempotency_key = %(idempotency_key)s",
    why="an index probe on the async path too",
    prepare=True,
)
TODO_BY_SENT_KEY = Statement(
    "todo_by_sent_key",
    "SELECT id FROM todos WHERE endpoint_id = %(endpoint_id)s"
    " AND requester_id = %(requester_id)s AND idempotency_key = %(idempotency_key)s",
    why="an index probe on the async path too",
    prepare=True,
)
