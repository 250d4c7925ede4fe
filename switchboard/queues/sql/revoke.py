"""Revoking an endpoint: it can no longer authenticate, and its live todos die.

Why raw SQL: guarded updates returning what they changed, for the audit rows written with them
(the claimed todos are closed by close.CLOSE_ALL_OF_ENDPOINT).

Triggers they rely on (queues/schema/functions.sql): ``todos_outbox_dead_letter`` writes each
dead-letter outbox row (``final_attempt`` null for a todo that had no open attempt).
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.fragments import OPEN, UNCLAIMED

REVOKE_ENDPOINT = Statement(
    "revoke_endpoint",
    "UPDATE endpoints SET revoked_at = statement_timestamp()"
    " WHERE id = %(endpoint_id)s AND revoked_at IS NULL RETURNING id",
    why="a guarded update: revoking twice is a conflict",
)

DEAD_LETTER_UNCLAIMED_OF_ENDPOINT = Statement(
    "dead_letter_unclaimed_of_endpoint",
    f"""
WITH live AS (
    SELECT t.id FROM todos t
     WHERE t.endpoint_id = %(endpoint_id)s AND t.state IN {UNCLAIMED}
       FOR UPDATE
)
UPDATE todos t
   SET state = 'dead', dead_letter_reason = 'revoked', next_retry_at = NULL,
       ended_at = statement_timestamp(), updated_at = statement_timestamp()
  FROM live
 WHERE t.id = live.id
RETURNING t.id
""",
    why="lock and kill in one statement, returning the ids for their audit rows",
)

REVOKED_ENDPOINTS_WITH_LIVE_TODOS = Statement(
    "revoked_endpoints_with_live_todos",
    f"""
SELECT DISTINCT e.id, e.team_id
  FROM endpoints e JOIN todos t ON t.endpoint_id = e.id
 WHERE e.revoked_at IS NOT NULL AND t.state IN {OPEN}
""",
    why="the sweeper's safety net (a claim that committed after a revocation)",
)
