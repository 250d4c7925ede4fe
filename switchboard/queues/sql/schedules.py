"""Schedules (queues/schedules.py, queues/transitions/schedules.py): the todos of a batch of due
slots, and the batch's schedules moved on to their next slots.

Why raw SQL: the sweeper makes a batch of slots' todos while it holds their schedules' locks,
so the batch is one statement each way, from arrays (``unnest``), not a round trip a slot: an
insert of every slot's todo that loses a slot already made without an error (``ON CONFLICT DO
NOTHING`` on the unique slot), and an update that sets each schedule its own next slot, last
slot and last todo (the ORM's ``bulk_update`` says that as a CASE per column, and spends longer
building it than the database does running it).
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.models import AfterPolicy, TodoState

# The columns and fixed values of a new pending todo as INSERT_TODO (queues/sql/create.py)
# writes them, for a todo made by nobody (no requester, no person) with no waits and no key
# (tests/queues/test_schedules.py holds the two column lists to each other).
INSERT_SLOT_TODOS = Statement(
    "insert_slot_todos",
    f"""
INSERT INTO todos (endpoint_id, requester_id, created_by_id, title, body, priority,
                   idempotency_key, state, max_attempts, attempt, failures, round,
                   last_attempt_seq, attempts_pruned, not_before, owner,
                   dead_letter_reason, created_at, updated_at, waiting_for,
                   after_policy, after_total, after_left, parent_id, key, schedule_id,
                   scheduled_for)
SELECT s.endpoint_id, NULL, NULL, u.title, u.body, u.priority,
       NULL, '{TodoState.PENDING.value}', u.max_attempts, 0, 0, 1,
       0, 0, NULL, '',
       '', statement_timestamp(), statement_timestamp(), '',
       '{AfterPolicy.ALL_DONE.value}', 0, 0, NULL, '', u.schedule_id, u.scheduled_for
  FROM unnest(%(schedule_ids)s::bigint[], %(scheduled_for)s::timestamptz[], %(titles)s::text[],
              %(bodies)s::text[], %(priorities)s::int[], %(max_attempts)s::int[])
       WITH ORDINALITY AS u(schedule_id, scheduled_for, title, body, priority, max_attempts, n)
  JOIN schedules s ON s.id = u.schedule_id
 ORDER BY u.n
    ON CONFLICT DO NOTHING
RETURNING id, schedule_id, endpoint_id
""",
    why="a batch of slots' todos in one insert, a slot already made lost without an error",
)

ADVANCE_SCHEDULES = Statement(
    "advance_schedules",
    """
UPDATE schedules s
   SET next_run_at = u.next_run_at,
       last_run_at = COALESCE(u.last_run_at, s.last_run_at),
       last_todo_id = COALESCE(u.last_todo_id, s.last_todo_id)
  FROM unnest(%(ids)s::bigint[], %(next_run_at)s::timestamptz[], %(last_run_at)s::timestamptz[],
              %(last_todo_id)s::bigint[]) AS u(id, next_run_at, last_run_at, last_todo_id)
 WHERE s.id = u.id
""",
    why="each row of a batch its own values, from arrays, in one statement",
)
