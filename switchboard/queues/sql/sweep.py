"""The sweeper's batches (queues/sweeper.py): due retries, retention by age and by cap, stale
statistics, its one status row, and the outbox's pruning. Each batch is its own short
transaction that takes its rows with ``FOR UPDATE SKIP LOCKED``, so several sweepers split
the work. (Reaping lapsed leases is close.LAPSED_LEASES and close.CLOSE_MANY.)

Triggers they rely on (queues/schema/functions.sql): ``todos_outbox_doorbell_pending`` rings
the endpoint's notify URL for each requeued retry.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.fragments import TERMINAL, claimable_at

REQUEUE_DUE_RETRIES = Statement(
    "requeue_due_retries",
    f"""
WITH due AS (
    SELECT t.id FROM todos t
     WHERE t.state = 'retry_wait' AND {claimable_at("t")} <= statement_timestamp()
     ORDER BY {claimable_at("t")}
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
UPDATE todos t
   SET state = 'pending', next_retry_at = NULL, updated_at = statement_timestamp()
  FROM due
 WHERE t.id = due.id
RETURNING t.id, t.endpoint_id
""",
    why="a SKIP LOCKED batch moved in one statement",
)

# Retention deletes a todo (its attempts cascade) only once the metrics fold has counted its
# attempts: a terminal todo's attempts all ended by its ended_at, and the fold has counted
# every attempt that ended before its mark (queues/counters.py).
_FOLDED = """t.ended_at < COALESCE(
           (SELECT s.metrics_folded_until FROM sweeper_status s WHERE s.id = 1),
           '-infinity'::timestamptz)"""

RETENTION_BY_AGE = Statement(
    "retention_by_age",
    f"""
WITH old AS (
    SELECT t.id FROM todos t
     WHERE t.state IN {TERMINAL}
       AND t.ended_at < statement_timestamp() - make_interval(days => %(days)s)
       AND {_FOLDED}
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
DELETE FROM todos t USING old WHERE t.id = old.id
RETURNING t.id
""",
    why="a DELETE of a SKIP LOCKED batch (the ORM refuses a sliced delete)",
)

# Endpoints whose terminal todos exceed the cap, and then the oldest beyond it, per endpoint.
ENDPOINTS_OVER_TERMINAL_CAP = Statement(
    "endpoints_over_terminal_cap",
    f"""
SELECT t.endpoint_id
  FROM todos t
 WHERE t.state IN {TERMINAL}
 GROUP BY t.endpoint_id
HAVING count(*) > %(cap)s
""",
    why="a GROUP BY … HAVING over the terminal index",
)

RETENTION_BY_CAP = Statement(
    "retention_by_cap",
    f"""
WITH cutoff AS (
    -- The newest `cap` terminal todos stay. The cutoff is found without locks: with
    -- SKIP LOCKED in the same scan, a locked newer row would not count toward the OFFSET
    -- and one older todo too many would go.
    SELECT t.ended_at, t.id FROM todos t
     WHERE t.endpoint_id = %(endpoint_id)s AND t.state IN {TERMINAL}
     ORDER BY t.ended_at DESC, t.id DESC
    OFFSET %(cap)s - 1
     LIMIT 1
),
beyond AS (
    SELECT t.id FROM todos t, cutoff c
     WHERE t.endpoint_id = %(endpoint_id)s AND t.state IN {TERMINAL}
       AND (t.ended_at, t.id) < (c.ended_at, c.id)
       AND {_FOLDED}
     ORDER BY t.ended_at, t.id
     LIMIT %(batch)s
       FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM todos t USING beyond WHERE t.id = beyond.id
RETURNING t.id
""",
    why="OFFSET past the newest N, then a SKIP LOCKED batch deleted",
)

# Tables whose statistics lag far behind their contents (changed by more than their size
# since the last ANALYZE, e.g. a fresh install's first burst). A generic plan cached while a
# table looked empty would scan it whole on every claim; ANALYZE refreshes the statistics
# and invalidates such plans in every session.
STALE_STATISTICS = Statement(
    "stale_statistics",
    """
SELECT s.relname
  FROM pg_stat_user_tables s
  JOIN pg_class c ON c.oid = s.relid
 WHERE s.relname IN ('todos', 'todo_attempts')
   AND s.schemaname = current_schema()
   AND s.n_mod_since_analyze > GREATEST(500, c.reltuples)
""",
    why="PostgreSQL's statistics views",
)
ANALYZE = {
    "todos": Statement("analyze_todos", "ANALYZE todos", why="a maintenance command"),
    "todo_attempts": Statement(
        "analyze_todo_attempts", "ANALYZE todo_attempts", why="a maintenance command"
    ),
}

# ---------------------------------------------------------------------------------------
# The one sweeper_status row, shared by every sweeper (queue health and /metrics read it).
# Each is one short statement in its own transaction; concurrent sweepers queue for the row
# for that long.

SWEEPER_STARTED = Statement(
    "sweeper_started",
    """
INSERT INTO sweeper_status (id, last_started_at, passes, last_report, last_error)
VALUES (1, statement_timestamp(), 0, '{}', '')
    ON CONFLICT (id) DO UPDATE SET last_started_at = EXCLUDED.last_started_at
""",
    why="an upsert of the one row",
)
SWEEPER_FINISHED = Statement(
    "sweeper_finished",
    """
INSERT INTO sweeper_status (id, last_finished_at, passes, last_report, last_error)
VALUES (1, statement_timestamp(), 1, %(report)s::jsonb, '')
    ON CONFLICT (id) DO UPDATE SET last_finished_at = EXCLUDED.last_finished_at,
                                   passes = sweeper_status.passes + 1,
                                   last_report = EXCLUDED.last_report,
                                   last_error = ''
""",
    why="an upsert that also counts (passes + 1)",
)
SWEEPER_FAILED = Statement(
    "sweeper_failed",
    """
INSERT INTO sweeper_status (id, passes, last_report, last_error)
VALUES (1, 0, '{}', %(error)s)
    ON CONFLICT (id) DO UPDATE SET last_error = EXCLUDED.last_error
""",
    why="an upsert of the one row",
)

# Finished deliveries go as terminal todos do; only the oldest `batch` rows by id are looked
# at, so a pass reads the head of the primary key and no more (ids grow with created_at).
OUTBOX_PRUNE = Statement(
    "outbox_prune",
    """
WITH head AS (
    SELECT id, created_at, delivered_at, gave_up_at FROM outbox ORDER BY id LIMIT %(batch)s
)
DELETE FROM outbox o
 USING head h
 WHERE o.id = h.id
   AND (h.delivered_at IS NOT NULL OR h.gave_up_at IS NOT NULL)
   AND h.created_at < statement_timestamp() - make_interval(days => %(days)s)
RETURNING o.id
""",
    why="a DELETE of rows picked from an ordered, limited head of the table",
)

# The sweeper's own LISTEN (queues/sweeper.py, _SweepBell): a trigger that leaves work past its
# batch (todos_waits_follow) says so here, and the sweeper passes at once.
SWEEP_CHANNEL = "switchboard_sweep"
LISTEN_SWEEP = Statement(
    "listen_sweep",
    f"LISTEN {SWEEP_CHANNEL}",
    why="LISTEN, on the sweeper's own connection",
)
