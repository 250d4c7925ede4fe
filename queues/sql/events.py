"""The audit trail's one writer (queues/audit.py) and the doorbell's ring.

Why raw SQL: both run inside the transitions' plans, which the async executor runs too, where
the ORM cannot go; the event's team comes from its todo in the same statement.
"""

from __future__ import annotations

from queues.db import Statement

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

RECORD_EVENTS_FOR_TODOS = Statement(
    "record_events_for_todos",
    """
INSERT INTO todo_events (team_id, todo_id, actor_user_id, actor_endpoint_id, kind, detail,
                         created_at)
SELECT %(team_id)s, t, %(user_id)s, NULL, %(kind)s, %(detail)s::jsonb, statement_timestamp()
  FROM unnest(%(todo_ids)s::bigint[]) AS t
""",
    why="one audit row for each of many todos, in one statement",
)

# Wakes claim_next long-polls of this endpoint: PostgreSQL delivers it at commit.
DOORBELL_CHANNEL = "switchboard_todo_ready"
RING_DOORBELL = Statement(
    "ring_doorbell",
    f"SELECT pg_notify('{DOORBELL_CHANNEL}', %(endpoint_id)s::text)",
    why="pg_notify, in the transaction that made a todo claimable",
    prepare=True,
)
LISTEN_DOORBELL = Statement(
    "listen_doorbell",
    f"LISTEN {DOORBELL_CHANNEL}",
    why="LISTEN, on the doorbell's own connection (agents/doorbell.py)",
)

# Is the database there? (/healthz, the breaker's probe.)
PING = Statement("ping", "SELECT 1", why="the smallest round trip there is")
