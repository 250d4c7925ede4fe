"""The audit trail's one writer (queues/audit.py) and the doorbell's ring.

Why raw SQL: both run inside the transitions' plans, which the async executor runs too, where
the ORM cannot go; the event's team comes from its todo in the same statement.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement

RECORD_EVENT = Statement(
    "record_event",
    """
INSERT INTO todo_events (team_id, todo_id, actor_user_id, actor_endpoint_id, kind, detail,
                         created_at)
SELECT COALESCE(%(team_id)s::bigint,
                (SELECT e.team_id FROM todos t JOIN endpoints e ON e.id = t.endpoint_id
                  WHERE t.id = %(todo_id)s::bigint)),
       %(todo_id)s, %(user_id)s, %(endpoint_id)s, %(kind)s, %(detail)s::jsonb,
       statement_timestamp()
""",
    why="an audit row whose team is read from its todo in the same statement",
    prepare=True,
)

# An act on many todos at once (a person's bulk rerun or cancel, a revocation): one audit
# row each, with its own detail, its team read from its todo, in one statement.
RECORD_EVENTS = Statement(
    "record_events",
    """
INSERT INTO todo_events (team_id, todo_id, actor_user_id, actor_endpoint_id, kind, detail,
                         created_at)
SELECT e.team_id, acted.todo_id, %(user_id)s, NULL, %(kind)s, acted.detail::jsonb,
       statement_timestamp()
  FROM unnest(%(todo_ids)s::bigint[], %(details)s::text[]) WITH ORDINALITY
       AS acted(todo_id, detail, n)
  JOIN todos t ON t.id = acted.todo_id
  JOIN endpoints e ON e.id = t.endpoint_id
 ORDER BY acted.n
""",
    why="one audit row for each of many todos, each with its own detail, in one statement",
)

# Wakes claim_next long-polls of this endpoint: PostgreSQL delivers it at commit.
DOORBELL_CHANNEL = "switchboard_todo_ready"
RING_DOORBELL = Statement(
    "ring_doorbell",
    f"SELECT pg_notify('{DOORBELL_CHANNEL}', %(endpoint_id)s::text)",
    why="pg_notify, in the transaction that made a todo claimable",
    prepare=True,
)
# The same for several endpoints at once (a bulk rerun): one notification each.
RING_DOORBELLS = Statement(
    "ring_doorbells",
    f"""
SELECT pg_notify('{DOORBELL_CHANNEL}', endpoint_id::text)
  FROM unnest(%(endpoint_ids)s::bigint[]) AS endpoint_id
""",
    why="pg_notify for each of several endpoints, in the transaction that made todos claimable",
)
LISTEN_DOORBELL = Statement(
    "listen_doorbell",
    f"LISTEN {DOORBELL_CHANNEL}",
    why="LISTEN, on the process's LISTEN connection (queues/notify/listener.py)",
)
