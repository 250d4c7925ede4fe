"""The Board's live stream (board/live.py): the watch list its triggers read
(queues/schema/functions.sql, ``switchboard_board_todos`` and ``switchboard_board_changed``),
and what the stream reads once per watched team after a change, for every viewer of that team
at once.

Why raw SQL: the upsert of a watch, and per-endpoint LATERAL reads each bounded by its own
index, which the ORM cannot say.

- ``TEAM_NOW``: each endpoint of the team, its todos by state (each count a walk of
  ``todos_endpoint_state`` that stops past ``cap``, as the queue's tabs count) and its live
  todos' numbers (queues/sql/health.py ``queue_now``, the endpoint page's): the queue's
  tab counts and the overview's rows in one statement.
- ``TEAM_LAST_HOUR``: the tries each endpoint's agents ended in the last hour, per minute
  (``todo_attempts_endpoint_ended``, index-only where vacuumed), and the agents seen in the
  last five minutes: the claimants of tries ended then and of the tries open now.

The open streams themselves (``board_streams``, migration 0031; no Django model, like
``board_watches``): a stream is let in under its person's cap (``BOARD_STREAM_LOCK`` then
``BOARD_STREAM_OPEN``, one transaction), each web process asks every couple of seconds which of
its streams may no longer show what they show (``BOARD_STREAMS_CHECK``: one statement for all
of them), a stream that ends deletes its row (``BOARD_STREAMS_CLOSE``), and a team switch ends
its session's streams that show a team it dropped (``BOARD_STREAMS_NARROW``).
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.models import DIED_OUTCOMES
from switchboard.queues.sql.activity import ACTIVITY, ACTIVITY_WIDTH
from switchboard.queues.sql.health import queue_now

__all__ = [
    "BOARD_CHANNEL",
    "BOARD_STREAMS_CHECK",
    "BOARD_STREAMS_CLOSE",
    "BOARD_STREAMS_NARROW",
    "BOARD_STREAM_LOCK",
    "BOARD_STREAM_OPEN",
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
    why="LISTEN, on the process's LISTEN connection (queues/notify/listener.py)",
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

# The open streams. Their person's streams are counted under a lock of that person (an
# advisory lock, class ``lock_class``, keyed by the user id) held to the end of the transaction
# that inserts: the count is then a statement after the lock, so it sees every insert committed
# before (a count in the locking statement would read the snapshot taken before the wait, and
# two processes would both let in the 24th).
BOARD_STREAM_LOCK = Statement(
    "board_stream_lock",
    "SELECT pg_advisory_xact_lock(%(lock_class)s::int, %(user_id)s::int)",
    why="a transaction-scoped advisory lock (the ORM has none): one person's streams are "
    "counted one opening at a time, across every web process",
)
BOARD_STREAM_OPEN = Statement(
    "board_stream_open",
    """
INSERT INTO board_streams (holder, user_id, session_key, password_digest, team_ids, expires_at)
SELECT %(holder)s, %(user_id)s, %(session_key)s, %(password_digest)s, %(team_ids)s::bigint[],
       statement_timestamp() + make_interval(secs => %(seconds)s)
 WHERE (SELECT count(*) FROM board_streams s
         WHERE s.user_id = %(user_id)s AND s.expires_at > statement_timestamp()) < %(cap)s
RETURNING id
""",
    why="an insert only while a count stays under the cap, in one statement; the table has no "
    "model (UNLOGGED, made in raw SQL like board_watches)",
)

# Which of a process's streams may no longer show what they show, each with why:
# ``signedout`` (the session is gone or expired, the user gone or inactive), ``password`` (the
# password hash is not the one the stream was opened under: Django's session auth hash is an
# HMAC of it, so every session opened before the change no longer signs in), ``teams`` (a team
# the stream shows is no longer among the user's). Those rows are deleted, the others renewed
# when due, and rows that expired (their process died) swept; a stream whose row is missing
# (a team switch deleted it, or it lapsed) is not returned. One statement a process per check,
# whatever its number of streams: each row is three probes by primary key and one of
# ``team_members_unique`` per team shown.
BOARD_STREAMS_CHECK = Statement(
    "board_streams_check",
    """
WITH mine AS MATERIALIZED (
    SELECT s.id, s.expires_at,
           CASE
               WHEN d.session_key IS NULL OR d.expire_date <= statement_timestamp()
                    OR u.id IS NULL OR NOT u.is_active THEN 'signedout'
               WHEN sha256(convert_to(u.password, 'UTF8')) <> s.password_digest THEN 'password'
               WHEN EXISTS (SELECT FROM unnest(s.team_ids) AS shown(team_id)
                             WHERE NOT EXISTS (SELECT FROM team_members m
                                                WHERE m.team_id = shown.team_id
                                                  AND m.user_id = s.user_id)) THEN 'teams'
           END AS ended
      FROM board_streams s
      LEFT JOIN django_session d ON d.session_key = s.session_key
      LEFT JOIN auth_user u ON u.id = s.user_id
     WHERE s.id = ANY(%(stream_ids)s::bigint[])
), renewed AS (
    UPDATE board_streams s
       SET expires_at = statement_timestamp() + make_interval(secs => %(seconds)s)
      FROM mine
     WHERE s.id = mine.id AND mine.ended IS NULL
       AND mine.expires_at < statement_timestamp() + make_interval(secs => %(renew_within)s)
), ended AS (
    DELETE FROM board_streams s USING mine WHERE s.id = mine.id AND mine.ended IS NOT NULL
), lapsed AS (
    -- SKIP LOCKED: two processes sweeping at once never wait on each other (nor deadlock).
    DELETE FROM board_streams s
     WHERE s.id IN (SELECT l.id FROM board_streams l
                     WHERE l.expires_at < statement_timestamp()
                       AND l.id <> ALL(%(stream_ids)s::bigint[])
                     LIMIT 1000 FOR UPDATE SKIP LOCKED)
)
SELECT id, ended FROM mine
""",
    why="joins to Django's sessions and users tables by key, a renewal, a delete and a sweep "
    "in one statement (data-modifying CTEs)",
    prepare=True,  # every couple of seconds on every web process that holds a stream
)
BOARD_STREAMS_CLOSE = Statement(
    "board_streams_close",
    "DELETE FROM board_streams WHERE id = ANY(%(stream_ids)s::bigint[])",
    why="the table has no model (UNLOGGED, made in raw SQL like board_watches)",
)
BOARD_STREAMS_NARROW = Statement(
    "board_streams_narrow",
    """
DELETE FROM board_streams
 WHERE session_key = %(session_key)s AND NOT (team_ids <@ %(team_ids)s::bigint[])
""",
    why="an array containment test (<@) on a table without a model",
)

TEAM_NOW = Statement(
    "team_now",
    f"""
SELECT e.id, e.agent_id, e.name, e.paused_at, e.revoked_at, c.counts, n.*
  FROM endpoints e
 CROSS JOIN LATERAL (
       SELECT array_agg((SELECT count(*) FROM (
                              SELECT 1 FROM todos t
                               WHERE t.endpoint_id = e.id
                                 AND t.state = split_part(s.state, ':', 1)
                                 AND (split_part(s.state, ':', 2) = ''
                                      OR t.waiting_for = split_part(s.state, ':', 2))
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


def _ended_within(interval: str) -> str:
    """The attempts endpoint ``e``'s agents ended within ``interval``, as ``a``: its own range
    of todo_attempts_endpoint_ended. OFFSET 0 keeps it a scan of each endpoint's range: pulled
    up into a join, the planner (which cannot estimate the row comparison) read all of
    todo_attempts once and filtered it against the endpoints (docs/benchmarks.md, "The
    overview's last hour, fenced")."""
    return f"""CROSS JOIN LATERAL (
           SELECT a.endpoint_id, a.ended_at, a.outcome, a.claimant FROM todo_attempts a
            WHERE a.ended_at IS NOT NULL
              AND (a.endpoint_id, a.ended_at)
                  > (e.id, statement_timestamp() - interval '{interval}')
              AND a.endpoint_id <= e.id
           OFFSET 0) a"""


TEAM_LAST_HOUR = Statement(
    "team_last_hour",
    f"""
WITH recent AS MATERIALIZED (
    SELECT a.endpoint_id, GREATEST(0, date_part('epoch', statement_timestamp() - a.ended_at))
               AS ago, a.outcome
      FROM endpoints e
     {_ended_within("1 hour")}
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
         {_ended_within("5 minutes")}
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
