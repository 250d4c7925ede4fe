"""The metrics counters (queues/counters.py): the fold of attempt and question endings, its
horizon, and the increment-on-conflict upserts.

Why raw SQL: ``INSERT … SELECT … ON CONFLICT DO UPDATE`` adding to the stored value is beyond
the ORM, and the fold's horizon reads pg_stat_activity.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement

# The fold's range on ended_at walks the todo_attempts_ended_recent index. The window is
# half-open, [since, until): a row is counted by the fold whose mark has passed its ended_at.
FOLD_ATTEMPT_ENDINGS = Statement(
    "fold_attempt_endings",
    """
WITH counted AS (
    SELECT a.outcome, count(*) AS n
      FROM todo_attempts a
     WHERE a.ended_at >= COALESCE(%(since)s::timestamptz, '-infinity'::timestamptz)
       AND a.ended_at < %(until)s
     GROUP BY a.outcome
), carried AS (
    -- Attempts the per-todo history cap deleted, their counts left here by the claim that
    -- pruned them (queues/sql/claim.py, its `carried` arm), with when they ended. This fold
    -- takes every delta that ended before its horizon: it counts those in its window, and
    -- drops those before it, whose rows an earlier fold saw (a delta that was visible to that
    -- fold was taken by it) and counted. Those ending later stay for a later fold.
    DELETE FROM metric_deltas d
     WHERE d.name = %(name)s AND d.ended_at < %(until)s
 RETURNING d.label AS outcome, d.ended_at, d.value
), together AS (
    SELECT outcome, n::float8 AS n FROM counted
    UNION ALL
    SELECT outcome, value FROM carried
     WHERE ended_at >= COALESCE(%(since)s::timestamptz, '-infinity'::timestamptz)
), summed AS (
    SELECT outcome, sum(n) AS n FROM together GROUP BY outcome
), added AS (
    INSERT INTO metric_counters (name, label, value)
    SELECT %(name)s, outcome, n FROM summed ORDER BY outcome
        ON CONFLICT (name, label) DO UPDATE SET value = metric_counters.value + EXCLUDED.value
)
SELECT outcome, n::bigint FROM summed
""",
    why="count, take the carried deltas and add both to the counters, in one statement",
)

# Questions that ended in the fold's window (the same half-open [since, until) as the attempts',
# under the same lock), by the todo_questions_ended index: how many ended each way, and the
# time to answer of the answered ones, as cumulative histogram buckets (upper bounds and their
# labels decided in queues/counters.py) with their sum and count. Only counts above zero are
# written, so an idle pass writes nothing. No carried deltas: questions are never pruned, and a
# terminal todo (whose questions all ended by its ended_at, in its own statement or earlier) is
# deleted by retention only once the mark has passed its ended_at (queues/sql/sweep.py).
FOLD_QUESTION_ENDINGS = Statement(
    "fold_question_endings",
    """
WITH ended AS MATERIALIZED (
    SELECT q.ending, date_part('epoch', q.ended_at - q.asked_at) AS waited
      FROM todo_questions q
     WHERE q.ended_at >= COALESCE(%(since)s::timestamptz, '-infinity'::timestamptz)
       AND q.ended_at < %(until)s
), answered AS (
    SELECT GREATEST(0, e.waited) AS waited FROM ended e WHERE e.ending = 'answered'
), counted AS (
    SELECT %(ended_name)s::text AS name, e.ending AS label, count(*)::float8 AS value
      FROM ended e GROUP BY e.ending
    UNION ALL
    SELECT %(bucket_name)s::text, b.label, (SELECT count(*) FROM answered a WHERE a.waited <= b.upper)
      FROM unnest(%(uppers)s::float8[], %(labels)s::text[]) AS b(upper, label)
    UNION ALL
    SELECT %(sum_name)s::text, '', COALESCE(sum(a.waited), 0) FROM answered a
    UNION ALL
    SELECT %(count_name)s::text, '', count(*) FROM answered a
), added AS (
    INSERT INTO metric_counters (name, label, value)
    SELECT c.name, c.label, c.value FROM counted c WHERE c.value > 0 ORDER BY c.name, c.label
        ON CONFLICT (name, label) DO UPDATE SET value = metric_counters.value + EXCLUDED.value
)
SELECT c.label, c.value::bigint FROM counted c WHERE c.name = %(ended_name)s::text
""",
    why="count by ending and into histogram buckets, and add them to the counters, in one"
    " statement",
)

# How far the fold may count: ``lag`` behind the database clock, and never past the start of
# a transaction still open in another session of this database. A closing statement stamps
# ended_at when it starts and commits later, possibly much later in a long transaction (a
# revocation of thousands of todos); a row it stamped is invisible to the fold until then, and
# would be passed over for good if the mark moved past it first. Read in a statement before
# the count, so a transaction that commits in between is in the count's snapshot, and one that
# starts after this has a start beyond the horizon.
FOLD_HORIZON = Statement(
    "fold_horizon",
    """
SELECT LEAST(
    statement_timestamp() - make_interval(secs => %(lag)s),
    (SELECT min(s.xact_start) FROM pg_stat_activity s
      WHERE s.datname = current_database() AND s.pid <> pg_backend_pid()
        AND s.backend_type = 'client backend' AND s.xact_start IS NOT NULL))
""",
    why="pg_stat_activity",
)

# Many rows in one statement, in (name, label) order, so two processes flushing at once lock
# them in the same order.
ADD_COUNTERS = Statement(
    "add_counters",
    """
INSERT INTO metric_counters (name, label, value)
SELECT d.name, d.label, d.value
  FROM unnest(%(names)s::text[], %(labels)s::text[], %(values)s::float8[]) AS d(name, label, value)
 ORDER BY d.name, d.label
    ON CONFLICT (name, label) DO UPDATE SET value = metric_counters.value + EXCLUDED.value
""",
    why="increment-on-conflict for many rows",
)

# A scrape's five reads (queues/counters.py read_snapshot_plan): statements, so that the
# scrape runs on the async pool like the verbs.
METRIC_COUNTERS = Statement(
    "metric_counters",
    "SELECT c.name, c.label, c.value FROM metric_counters c",
    why="run on the async pool with the verbs (the ORM runs on Django's connection only)",
)
TODOS_BY_STATE = Statement(
    "todos_by_state",
    "SELECT t.state, count(*) FROM todos t GROUP BY t.state",
    why="run on the async pool with the verbs",
)
# Todos waiting on people, per endpoint not revoked (revocation ends every wait), each
# counted through todos_endpoint_state (endpoint, state, ...): an index range per endpoint,
# never the table.
ENDPOINTS_WAITING = Statement(
    "endpoints_waiting",
    """
SELECT tm.slug, e.agent_id,
       (SELECT count(*) FROM todos t
         WHERE t.endpoint_id = e.id AND t.state = 'waiting' AND t.waiting_for = 'people')
  FROM endpoints e
  JOIN teams tm ON tm.id = e.team_id
 WHERE e.revoked_at IS NULL
 ORDER BY tm.slug, e.agent_id
""",
    why="a count per endpoint through its index range (a GROUP BY would read every endpoint's)",
)
OUTBOX_PENDING = Statement(
    "outbox_pending",
    """
SELECT d.kind, count(*) FROM outbox d
 WHERE d.delivered_at IS NULL AND d.gave_up_at IS NULL
 GROUP BY d.kind
""",
    why="run on the async pool with the verbs (the outbox's partial index of due rows)",
)
SWEEPER_LAG = Statement(
    "sweeper_lag",
    """
SELECT s.passes, EXTRACT(EPOCH FROM statement_timestamp() - s.last_finished_at)::float8
  FROM sweeper_status s WHERE s.id = 1
""",
    why="run on the async pool with the verbs; the lag by the database clock",
)
