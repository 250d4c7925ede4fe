"""The Board's live stream (board/live.py): the watch list its triggers read (migration
0027), and what the stream reads once per watched team after a change, for every viewer of
that team at once.

Why raw SQL: the upsert of a watch, and per-endpoint LATERAL reads each bounded by its own
index, which the ORM cannot say.

- ``TEAM_NOW``: each endpoint of the team, its todos by state (each count a walk of
  ``todos_endpoint_state`` that stops past ``cap``, as the queue's tabs count) and its live
  todos' numbers (queues/sql/health.py ``queue_now``, the endpoint page's): the queue's
  tab counts and the overview's rows in one statement.
- ``TEAM_LAST_HOUR``: the tries each endpoint's agents ended in the last hour, per minute
  (``todo_attempts_endpoint_ended``, index-only where vacuumed), and the agents seen in the
  last five minutes: the claimants of tries ended then and of the tries open now.
"""

from __future__ import annotations

from queues.db.plans import Statement
from queues.models import DIED_OUTCOMES
from queues.sql.activity import ACTIVITY, ACTIVITY_WIDTH
from queues.sql.health import queue_now

__all__ = [
    "BOARD_CHANNEL",
    "BOARD_UNWATCH",
    "BOARD_WATCH",
    "LISTEN_BOARD",
    "TEAM_LAST_HOUR",
    "TEAM_NOW",
    "TEAM_NOW_AND_FEED",
]

BOARD_CHANNEL = "switchboard_board"
LISTEN_BOARD = Statement(
    "listen_board",
    f"LISTEN {BOARD_CHANNEL}",
    why="LISTEN, on the doorbell's own connection (agents/doorbell.py)",
)

# A web process's watches: its teams, renewed before they expire. A process that dies leaves
# rows that expire; one that stops watching a team deletes its row.
BOARD_WATCH = Statement(
    "board_watch",
    """
INSERT INTO board_watches (team_id, holder, expires_at)
SELECT team_id, %(holder)s, statement_timestamp() + make_interval(secs => %(seconds)s)
  FROM unnest(%(team_ids)s::bigint[]) AS team_id
    ON CONFLICT (team_id, holder) DO UPDATE SET expires_at = EXCLUDED.expires_at
""",
    why="an upsert of many rows (ON CONFLICT DO UPDATE)",
)
BOARD_UNWATCH = Statement(
    "board_unwatch",
    """
DELETE FROM board_watches
 WHERE (holder = %(holder)s AND team_id <> ALL(%(team_ids)s::bigint[]))
    OR expires_at < statement_timestamp() - interval '1 minute'
""",
    why="a delete by an array's complement, and of rows left by processes gone",
)

TEAM_NOW = Statement(
    "team_now",
    f"""
SELECT e.id, e.agent_id, e.name, e.paused_at, e.revoked_at, c.counts, n.*
  FROM endpoints e
 CROSS JOIN LATERAL (
       SELECT array_agg((SELECT count(*) FROM (
                              SELECT 1 FROM todos t
                               WHERE t.endpoint_id = e.id AND t.state = s.state
                               LIMIT %(cap)s + 1) AS upto)
                        ORDER BY s.n) AS counts
         FROM unnest(%(states)s::text[]) WITH ORDINALITY AS s(state, n)) c
 CROSS JOIN LATERAL ({queue_now("e.id")}) n
 WHERE e.team_id = %(team_id)s
 ORDER BY e.id
""",
    why="per endpoint, counts that stop at a cap and the live todos' FILTERed numbers",
)

# TEAM_NOW's columns (e.id ... c.counts, then queue_now's seven): a wrong width is a UNION of
# unequal rows, which tests/queues/test_sql.py's PREPARE of every statement refuses.
TEAM_NOW_WIDTH = 13

# TEAM_NOW and the feed's newest lines (ACTIVITY over the one team) side by side, for the
# Board's stream when a change both moves counts and ends a try: one statement a change
# instead of two. A row is ``part`` (1 an endpoint's, 2 a feed line's), then TEAM_NOW's
# columns or ACTIVITY's, the other's NULL (each NULL takes its type from the other part).
TEAM_NOW_AND_FEED = Statement(
    "team_now_and_feed",
    f"""
SELECT 1 AS part, now.*, {", ".join(["NULL"] * ACTIVITY_WIDTH)}
  FROM ({TEAM_NOW.text}) AS now
UNION ALL
SELECT 2, {", ".join(["NULL"] * TEAM_NOW_WIDTH)}, feed.*
  FROM ({ACTIVITY.text}) AS feed
""",
    why="two reads of different shapes side by side in one round trip (a UNION ALL)",
)

_DIED = ", ".join(f"'{outcome.value}'" for outcome in DIED_OUTCOMES)
TEAM_LAST_HOUR = Statement(
    "team_last_hour",
    f"""
WITH recent AS MATERIALIZED (
    SELECT a.endpoint_id, GREATEST(0, date_part('epoch', statement_timestamp() - a.ended_at))
               AS ago, a.outcome
      FROM endpoints e
     CROSS JOIN LATERAL (
           -- OFFSET 0: each endpoint's own range of todo_attempts_endpoint_ended, never
           -- pulled up into a join (see the agents seen, below).
           SELECT a.endpoint_id, a.ended_at, a.outcome FROM todo_attempts a
            WHERE a.ended_at IS NOT NULL
              AND (a.endpoint_id, a.ended_at)
                  > (e.id, statement_timestamp() - interval '1 hour')
              AND a.endpoint_id <= e.id
           OFFSET 0) a
     WHERE e.team_id = %(team_id)s
)
SELECT 1 AS part, r.endpoint_id, floor(r.ago / 60)::int AS minutes_ago,
       count(*) FILTER (WHERE r.outcome = 'completed'),
       count(*) FILTER (WHERE r.outcome = 'failed'),
       count(*) FILTER (WHERE r.outcome IN ({_DIED})),
       NULL::text, NULL::timestamptz
  FROM recent r
 GROUP BY 2, 3
UNION ALL
SELECT 2, seen.endpoint_id, NULL, NULL, NULL, NULL, seen.who, max(seen.at)
  FROM (SELECT e.id AS endpoint_id, COALESCE(NULLIF(a.claimant, ''), e.agent_id) AS who,
               a.ended_at AS at
          FROM endpoints e
         CROSS JOIN LATERAL (
               -- OFFSET 0 keeps this a scan of each endpoint's range: pulled up into a join,
               -- the planner (which cannot estimate the row comparison: 11 %% of the table)
               -- read all of todo_attempts once and filtered it against the endpoints,
               -- 766 ms over 1,000,000 attempts in make bench's Board section, 11 ms fenced.
               SELECT a.claimant, a.ended_at FROM todo_attempts a
                WHERE a.ended_at IS NOT NULL
                  AND (a.endpoint_id, a.ended_at)
                      > (e.id, statement_timestamp() - interval '5 minutes')
                  AND a.endpoint_id <= e.id
               OFFSET 0) a
         WHERE e.team_id = %(team_id)s
        UNION ALL
        SELECT e.id, COALESCE(NULLIF(a.claimant, ''), e.agent_id),
               COALESCE(t.last_heartbeat_at, t.claimed_at)
          FROM endpoints e
          JOIN todos t ON t.endpoint_id = e.id AND t.state = 'claimed'
          JOIN todo_attempts a ON a.todo_id = t.id AND a.seq = t.last_attempt_seq
         WHERE e.team_id = %(team_id)s AND a.endpoint_id IS NOT NULL) seen
 GROUP BY 2, 7
""",
    why="per-minute counts over one read of the hour, and the agents seen, in one statement",
)
