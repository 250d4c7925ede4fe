"""The endpoint page's health at a glance (queues/endpoint_health.py): its queue now, and what
its agents' tries did over the last hour and the last day.

Why raw SQL: FILTERed counts and percentiles (``percentile_cont``) three ways over one read
of the rows, which the ORM cannot say; and both statements read only the rows they need,
whatever the ledger's size:

- ``ENDPOINT_QUEUE_NOW`` reads the endpoint's live todos through ``todos_claimable`` (the
  partial index of live states, endpoint first), never its done or dead ones.
- ``ENDPOINT_ENDINGS`` reads the tries the endpoint's agents ended in the last day from
  ``todo_attempts_endpoint_ended`` (endpoint_id, ended_at, carrying outcome, claimed_at and
  last_heartbeat_at; closed rows only; migration 0016): an index-only scan of one endpoint's
  day where the table is vacuumed. Its cost grows with that day's endings, not with the
  attempts table (1,000,000 rows or more).

Times are the database's (``statement_timestamp()``), like every lease time. Attempts opened
by a person by hand have no endpoint, so they are not counted here (an endpoint's health is
its agents').
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.fragments import LIVE, claimable_at

__all__ = [
    "ENDPOINTS_OLDEST_CLAIMABLE",
    "ENDPOINT_ENDINGS",
    "ENDPOINT_QUEUE_NOW",
    "HEALTH_WRITE",
    "WRITABLE",
]


# Non-overlapping counts of the live todos: claimable now (pending whose time has come, a due
# retry, a lapsed lease), held (claimed, the lease live), waiting to retry, not before a
# later time. The oldest claimable counts from when it became claimable (a not_before long
# past counts from its creation, as queue health does).
def queue_now(endpoint: str) -> str:
    """The live todos' counts and maxima of one endpoint (``endpoint``: a parameter, or a
    column of an enclosing query, as queues/sql/live.py reads each of a team's)."""
    return f"""
SELECT count(*) FILTER (WHERE t.claimable_at <= statement_timestamp()) AS claimable,
       count(*) FILTER (WHERE t.state = 'claimed'
                          AND t.claimable_at > statement_timestamp()) AS held,
       count(*) FILTER (WHERE t.state = 'retry_wait'
                          AND t.claimable_at > statement_timestamp()) AS retry_wait,
       count(*) FILTER (WHERE t.state = 'pending'
                          AND t.claimable_at > statement_timestamp()) AS scheduled,
       max(statement_timestamp() - GREATEST(t.claimable_at, t.created_at))
           FILTER (WHERE t.claimable_at <= statement_timestamp()) AS oldest_claimable,
       max(t.claimed_at) FILTER (WHERE t.state = 'claimed'
                                   AND starts_with(t.owner, 'agent:')) AS open_claim,
       max(t.last_heartbeat_at) FILTER (WHERE t.state = 'claimed'
                                          AND starts_with(t.owner, 'agent:')) AS open_heartbeat
  FROM (SELECT t.state, t.created_at, t.claimed_at, t.last_heartbeat_at, t.owner,
               {claimable_at("t")} AS claimable_at
          FROM todos t
         WHERE t.endpoint_id = {endpoint}
           AND t.state IN {LIVE}) t
"""


ENDPOINT_QUEUE_NOW = Statement(
    "endpoint_queue_now",
    queue_now("%(endpoint_id)s"),
    why="FILTERed counts and maxima of the live todos, in one pass",
)

# /metrics: every endpoint not revoked, with its team's slug and its oldest claimable todo's
# wait (the overview's number: queue_now's, over each endpoint's live todos through
# todos_claimable). Paused endpoints are in it: their work waits all the same.
ENDPOINTS_OLDEST_CLAIMABLE = Statement(
    "endpoints_oldest_claimable",
    f"""
SELECT tm.slug, e.agent_id, n.oldest_claimable
  FROM endpoints e
  JOIN teams tm ON tm.id = e.team_id
 CROSS JOIN LATERAL ({queue_now("e.id")}) n
 WHERE e.revoked_at IS NULL
 ORDER BY tm.slug, e.agent_id
""",
    why="each endpoint's FILTERed maximum over its live todos (a LATERAL per endpoint)",
)

# The day's endings, read once (a MATERIALIZED CTE) and counted three ways: per hour ago
# (0..23), per minute ago (0..59, the last hour's rows) and over the whole day, the last with
# the claim-to-complete percentiles and the newest claim, heartbeat and end. Rows say which
# they are in ``grouped``: 1 an hour, 2 a minute, 3 the day. Counted by hash aggregates; the
# one sort is the percentiles' over the day's completions. Seconds are float8 (date_part):
# extract() answers numeric, whose arithmetic was most of the time over a busy day. Nothing
# older than a day is read ("the newest ending ever" would be a LIMIT 1 that the planner may
# walk the global todo_attempts_ended_recent for, through every other endpoint's endings).
_COUNTS = """count(*) FILTER (WHERE r.outcome = 'completed'),
       count(*) FILTER (WHERE r.outcome = 'failed'),
       count(*) FILTER (WHERE r.outcome IN ('lease_expired', 'reaped'))"""
_TOOK = "date_part('epoch', r.ended_at - r.claimed_at)"
ENDPOINT_ENDINGS = Statement(
    "endpoint_endings",
    f"""
WITH recent AS MATERIALIZED (
    SELECT GREATEST(0, date_part('epoch', statement_timestamp() - a.ended_at)) AS ago,
           a.outcome, a.claimed_at, a.last_heartbeat_at, a.ended_at
      FROM todo_attempts a
     WHERE a.ended_at IS NOT NULL
       -- "this endpoint, ended in the last day" as the two bounds of one range of
       -- todo_attempts_endpoint_ended: from (endpoint, a day ago) to the endpoint's last
       -- entry. Only that index can serve it: a plain ended_at range let the planner walk the
       -- global todo_attempts_ended_recent (every endpoint's day, heap and all), and an
       -- equality on endpoint_id beside the row comparison made the scan start at the
       -- endpoint's first entry ever.
       AND (a.endpoint_id, a.ended_at)
           > (%(endpoint_id)s::bigint, statement_timestamp() - interval '1 day')
       AND a.endpoint_id <= %(endpoint_id)s
)
SELECT 1 AS grouped, floor(r.ago / 3600)::int AS hours_ago, NULL::int AS minutes_ago,
       {_COUNTS},
       NULL::float8, NULL::float8, NULL::timestamptz, NULL::timestamptz, NULL::timestamptz
  FROM recent r
 GROUP BY 2
UNION ALL
SELECT 2, NULL, floor(r.ago / 60)::int, {_COUNTS}, NULL, NULL, NULL, NULL, NULL
  FROM recent r
 WHERE r.ago < 3600
 GROUP BY 3
UNION ALL
SELECT 3, NULL, NULL, {_COUNTS},
       percentile_cont(0.5) WITHIN GROUP (ORDER BY {_TOOK})
           FILTER (WHERE r.outcome = 'completed'),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY {_TOOK})
           FILTER (WHERE r.outcome = 'completed'),
       max(r.claimed_at), max(r.last_heartbeat_at), max(r.ended_at)
  FROM recent r
""",
    why="per-hour and per-minute counts and the day's percentiles over one read of the day",
)

# /healthz: can this session write? Not on a standby in recovery, nor in a read-only session
# (default_transaction_read_only, or a server that was made read-only).
WRITABLE = Statement(
    "writable",
    "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'",
    why="two server functions, one round trip",
)
# /healthz's write: a transactional message in the WAL (no table written, no privilege
# needed), so its commit waits for a synchronous standby as every agent's write does.
HEALTH_WRITE = Statement(
    "health_write",
    "SELECT pg_logical_emit_message(true, 'switchboard', 'healthz')",
    why="a write to the WAL alone, which no ORM call makes",
)
