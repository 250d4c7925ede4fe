"""The named SQL statements of the lease state machine.

Why raw SQL here: a claim must, in one statement, pick the best claimable todo with
``FOR UPDATE SKIP LOCKED``, close a lapsed attempt, prune history over the cap, move the todo,
open the new attempt and read back the five newest closed attempts. The ORM would need five
round trips and five Python-side objects for that, and ADR-0039's budget (claim throughput
within 10% of a bare loop without history) leaves no room for them. Likewise a close
(complete, fail, release, cancel, reap, revoke) moves the todo and closes the attempt in one
statement. Each statement is parameterised (never formatted with input); the fragments
formatted in below are fixed strings chosen here. Each statement has tests in
tests/queues/test_sql.py and via the transitions that use it.

All lease arithmetic uses the database clock: ``statement_timestamp()``, the same clock as
Django's ``Now()`` (used for the models' ``db_default``), so a row written by the ORM and a
lease computed here compare on one timeline even inside a long test transaction.
"""

from __future__ import annotations

import psycopg
from django.conf import settings
from django.db import connection


class _PreparedCursor(psycopg.Cursor):
    """Server-side binding, prepared on first use: each connection plans a statement once.

    Planning the claim and close statements costs more than running them (measured in
    bench/: about 2.7 ms of a 4 ms claim), so the hot statements are prepared. A generic plan
    made while the tables are small is dropped when ANALYZE (or autovacuum's auto-analyze)
    updates the tables' statistics, which invalidates cached plans; tests/queues/test_sql.py
    checks that the plans use the indexes."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)


def fetch(statement: str, params: dict) -> list:
    """Run one of the statements below and return its rows (inside Django's connection,
    transaction, error wrapping and query logging)."""
    if not settings.SWITCHBOARD_PREPARED_STATEMENTS:
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchall()
    with connection.wrap_database_errors:
        connection.ensure_connection()
        cursor = connection._prepare_cursor(_PreparedCursor(connection.connection))
    with cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


# ---------------------------------------------------------------------------------------
# Column lists shared by every read, so one row layout maps to one record type.

TODO_COLUMNS = """
    {t}.id, e.agent_id, {t}.title, {t}.body, {t}.priority, {t}.state, {t}.attempt,
    {t}.failures, {t}.max_attempts, {t}.round, {t}.owner, {t}.claimed_at,
    {t}.last_heartbeat_at, {t}.lease_expires_at, {t}.not_before, {t}.next_retry_at,
    {t}.dead_letter_reason, {t}.result, {t}.created_at, {t}.updated_at, {t}.ended_at,
    {t}.last_attempt_seq, {t}.attempts_pruned, rq.agent_id, {t}.endpoint_id, {t}.idempotency_key
"""
TODO_JOINS = """
    JOIN endpoints e ON e.id = {t}.endpoint_id
    LEFT JOIN endpoints rq ON rq.id = {t}.requester_id
"""
TODO_WIDTH = 26

ATTEMPT_COLUMNS = """
    {a}.seq, {a}.round, {a}.attempt, {a}.claimer_kind, ae.agent_id, au.username, {a}.owner,
    {a}.claimant, {a}.claimant_truncated, {a}.claimant_bytes, {a}.mcp_session_id,
    {a}.mcp_session_id_truncated, {a}.mcp_session_id_bytes,
    {a}.lease_token_hash IS NOT NULL, {a}.claimed_at, {a}.last_heartbeat_at,
    {a}.lease_expires_at, {a}.ended_at, {a}.outcome, {a}.disposition, {a}.summary,
    {a}.summary_truncated, {a}.summary_bytes, {a}.artifact, {a}.artifact_truncated,
    {a}.artifact_bytes, {a}.result, eb.username
"""
ATTEMPT_JOINS = """
    LEFT JOIN endpoints ae ON ae.id = {a}.endpoint_id
    LEFT JOIN auth_user au ON au.id = {a}.user_id
    LEFT JOIN auth_user eb ON eb.id = {a}.ended_by_id
"""
ATTEMPT_WIDTH = 28


def _todo_cols(alias: str) -> str:
    return TODO_COLUMNS.format(t=alias)


def _attempt_cols(alias: str) -> str:
    return ATTEMPT_COLUMNS.format(a=alias)


# ---------------------------------------------------------------------------------------
# Scopes: which todos a caller may touch. An agent reads its own endpoint's queue; a human
# reads the queues of endpoints in the teams they belong to.

SCOPE_ENDPOINT = "t.endpoint_id = %(scope_endpoint)s"
SCOPE_USER = """t.endpoint_id IN (
    SELECT se.id FROM endpoints se JOIN team_members sm ON sm.team_id = se.team_id
    WHERE sm.user_id = %(scope_user)s)"""

# ---------------------------------------------------------------------------------------
# Claim. One statement: pick, close a lapsed attempt (lease_expired), prune, move, open,
# and return the todo with up to five prior (closed) attempts, one row per prior attempt.
#
# A lapsed lease at the cap is dead-lettered instead (state 'dead' in the returned row, no
# attempt opened); the caller then tries again (claim_next) or answers conflict (claim).
#
# Snapshot freshness: under READ COMMITTED, `FOR UPDATE` locks the newest version of the todo
# row, but the other reads in this statement (the todo's attempts) see the snapshot taken when
# the statement began. If a claim or close of this todo committed in between, the snapshot's
# newest attempt disagrees with the locked row; then nothing is written, the first column
# (`ok`) is false, and the caller runs the statement again: a new statement has a new
# snapshot, and the row lock is already ours. Every write to a todo's attempts happens under
# the todo's row lock, so agreement here means the snapshot holds exactly the attempts there
# are. (Found by tests/queues/test_concurrency.py: the one-open-attempt constraint caught it.)

_CLAIM = """
WITH pick AS (
    SELECT t.id, t.state AS prior_state, t.last_attempt_seq, t.attempts_pruned,
           t.last_heartbeat_at, t.lease_expires_at,
           (t.state = 'claimed' AND t.failures + 1 >= t.max_attempts) AS dies
      FROM todos t
     WHERE {pick_filter}
       AND t.state IN ('pending', 'retry_wait', 'claimed')
       AND t.claimable_at <= statement_timestamp()
     ORDER BY t.priority DESC, t.claimable_at, t.id
     LIMIT 1
       FOR UPDATE OF t {lock_mode}
),
newest AS (
    SELECT x.seq, x.ended_at
      FROM todo_attempts x, pick
     WHERE x.todo_id = pick.id
     ORDER BY x.seq DESC
     LIMIT 1
),
fresh AS (
    SELECT pick.*,
           CASE WHEN pick.last_attempt_seq = 0 THEN newest.seq IS NULL
                ELSE newest.seq IS NOT DISTINCT FROM pick.last_attempt_seq
                     AND (newest.ended_at IS NULL) = (pick.prior_state = 'claimed')
           END AS ok
      FROM pick LEFT JOIN newest ON true
),
lapsed AS (
    UPDATE todo_attempts a
       SET ended_at = statement_timestamp(),
           outcome = 'lease_expired',
           disposition = CASE WHEN f.dies THEN 'dead_lettered' ELSE 'requeued' END,
           last_heartbeat_at = f.last_heartbeat_at,
           lease_expires_at = f.lease_expires_at
      FROM fresh f
     WHERE f.ok AND f.prior_state = 'claimed'
       AND a.todo_id = f.id AND a.seq = f.last_attempt_seq AND a.ended_at IS NULL
 RETURNING a.*
),
pruned AS (
    -- Kept rows are exactly seq in (attempts_pruned, last_attempt_seq]: the range bounds the
    -- index scan. A row closed by `lapsed` above is not deleted in the same statement (it
    -- is still open in this statement's snapshot); the next claim prunes it.
    DELETE FROM todo_attempts a
     USING fresh f
     WHERE f.ok AND NOT f.dies
       AND a.todo_id = f.id
       AND a.seq > f.attempts_pruned
       AND a.seq <= f.last_attempt_seq + 1 - %(history_cap)s
       AND a.ended_at IS NOT NULL
 RETURNING a.seq, a.outcome, a.ended_at
),
carried AS (
    -- A pruned row the metrics fold has not counted yet (it ended at or after the fold's
    -- mark) leaves its count behind for the fold (queues/metrics.py), so no close goes
    -- uncounted. Evaluated only when rows were pruned (the sub-select runs on first use); the
    -- KEY SHARE lock waits out a fold in progress, whose FOR UPDATE holds the mark, and then
    -- reads the moved mark: a row that fold counted is not carried too.
    INSERT INTO metric_deltas (name, label, value)
    SELECT 'attempts_closed_total', p.outcome, count(*)
      FROM pruned p
     WHERE p.ended_at >= COALESCE(
               (SELECT s.metrics_folded_until FROM sweeper_status s WHERE s.id = 1
                   FOR KEY SHARE),
               '-infinity'::timestamptz)
     GROUP BY p.outcome
),
moved AS (
    UPDATE todos t
       SET state = CASE WHEN f.dies THEN 'dead' ELSE 'claimed' END,
           failures = t.failures + (f.prior_state = 'claimed')::int,
           attempt = t.attempt + (NOT f.dies)::int,
           last_attempt_seq = t.last_attempt_seq + (NOT f.dies)::int,
           attempts_pruned = t.attempts_pruned + (SELECT count(*) FROM pruned),
           owner = CASE WHEN f.dies THEN '' ELSE %(owner)s END,
           claimed_at = CASE WHEN f.dies THEN NULL ELSE statement_timestamp() END,
           last_heartbeat_at = NULL,
           lease_expires_at = CASE WHEN f.dies THEN NULL ELSE
               statement_timestamp() + make_interval(secs => %(lease_seconds)s) END,
           next_retry_at = NULL,
           dead_letter_reason = CASE WHEN f.dies THEN 'lease_expired' ELSE '' END,
           ended_at = CASE WHEN f.dies THEN statement_timestamp() END,
           updated_at = statement_timestamp()
      FROM fresh f
     WHERE f.ok AND t.id = f.id
 RETURNING t.*
),
opened AS (
    INSERT INTO todo_attempts (
        todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id, mcp_session_id,
        mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated, claimant_bytes, claimed_at, last_heartbeat_at,
        lease_expires_at, ended_at, outcome, disposition, ended_by_id, summary,
        summary_truncated, summary_bytes, artifact, artifact_truncated, artifact_bytes,
        result, lease_token_hash)
    SELECT m.id, m.last_attempt_seq, m.round, m.attempt, %(claimer_kind)s,
           %(claimer_endpoint)s, %(claimer_user)s, %(mcp_session_id)s,
           %(mcp_session_id_truncated)s, %(mcp_session_id_bytes)s, m.owner,
           %(claimant)s, %(claimant_truncated)s, %(claimant_bytes)s, m.claimed_at, NULL,
           m.lease_expires_at, NULL, '', '', NULL, NULL, false, 0, NULL, false, 0, NULL,
           %(token_hash)s
      FROM moved m
     WHERE m.state = 'claimed'
 RETURNING seq
)
SELECT f.ok, {todo_cols}, {attempt_cols}
  FROM fresh f
  LEFT JOIN moved m ON true
  LEFT JOIN endpoints e ON e.id = m.endpoint_id
  LEFT JOIN endpoints rq ON rq.id = m.requester_id
  LEFT JOIN LATERAL (
      SELECT p.* FROM (
          SELECT * FROM lapsed
          UNION ALL
          (SELECT x.* FROM todo_attempts x
            WHERE x.todo_id = m.id AND x.ended_at IS NOT NULL
              AND x.seq > m.last_attempt_seq - %(history_cap)s
            ORDER BY x.seq DESC
            LIMIT 5)
      ) p
      WHERE m.state = 'claimed'
      ORDER BY p.seq DESC
      LIMIT 5
  ) pa ON true
  {attempt_joins}
 ORDER BY pa.seq DESC NULLS LAST
"""


def _claim(pick_filter: str, lock_mode: str) -> str:
    return _CLAIM.format(
        pick_filter=pick_filter,
        lock_mode=lock_mode,
        todo_cols=_todo_cols("m"),
        attempt_cols=_attempt_cols("pa"),
        attempt_joins=ATTEMPT_JOINS.format(a="pa"),
    )


# claim_next: the endpoint's best claimable todo; rows locked by other claimers are skipped.
CLAIM_NEXT = _claim(SCOPE_ENDPOINT, "SKIP LOCKED")
# claim of one todo: wait for a concurrent claimer, then re-check claimability.
CLAIM_ONE_AGENT = _claim("t.id = %(todo_id)s AND " + SCOPE_ENDPOINT, "")
CLAIM_ONE_USER = _claim("t.id = %(todo_id)s AND " + SCOPE_USER, "")

# ---------------------------------------------------------------------------------------
# Close: move the todo and close its open attempt, in one statement. The new state is
# decided here, under the row lock: ok_state, unless the outcome spends the last of the
# failure budget (or force_dead), then dead. Disposition follows from the new state.

_CLOSE = """
WITH cur AS (
    SELECT t.id, a.id AS attempt_id, t.last_heartbeat_at, t.lease_expires_at,
           t.failures,
           CASE WHEN %(force_dead)s OR (%(counts_failure)s AND t.failures + 1 >= t.max_attempts)
                THEN 'dead' ELSE %(ok_state)s END AS new_state
      FROM todos t
      JOIN todo_attempts a
        ON a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
     WHERE t.state = 'claimed'
       AND {cur_filter}
     {cur_tail}
),
moved AS (
    UPDATE todos t
       SET state = cur.new_state,
           failures = t.failures + %(counts_failure)s::int,
           owner = '',
           claimed_at = NULL,
           last_heartbeat_at = NULL,
           lease_expires_at = NULL,
           next_retry_at = CASE WHEN cur.new_state = 'retry_wait' THEN
               statement_timestamp() + make_interval(secs => random() * LEAST(
                   %(retry_max)s::float8, %(retry_base)s::float8 * power(2, LEAST(cur.failures, 40))))
               END,
           result = CASE WHEN %(sets_result)s THEN %(result)s::jsonb ELSE t.result END,
           dead_letter_reason = CASE WHEN cur.new_state = 'dead' THEN %(outcome)s ELSE '' END,
           ended_at = CASE WHEN cur.new_state IN ('done', 'dead', 'canceled') THEN statement_timestamp() END,
           updated_at = statement_timestamp()
      FROM cur
     WHERE t.id = cur.id
 RETURNING t.*
),
closed AS (
    UPDATE todo_attempts a
       SET ended_at = statement_timestamp(),
           outcome = %(outcome)s,
           disposition = CASE cur.new_state
               WHEN 'done' THEN 'done'
               WHEN 'retry_wait' THEN 'retry_scheduled'
               WHEN 'pending' THEN 'requeued'
               WHEN 'dead' THEN 'dead_lettered'
               WHEN 'canceled' THEN 'canceled' END,
           last_heartbeat_at = cur.last_heartbeat_at,
           lease_expires_at = cur.lease_expires_at,
           ended_by_id = %(ended_by)s,
           ended_by_endpoint_id = %(ended_by_endpoint)s,
           summary = %(summary)s,
           summary_truncated = %(summary_truncated)s,
           summary_bytes = %(summary_bytes)s,
           artifact = %(artifact)s,
           artifact_truncated = %(artifact_truncated)s,
           artifact_bytes = %(artifact_bytes)s,
           result = CASE WHEN %(sets_result)s THEN %(result)s::jsonb END
      FROM cur
     WHERE a.id = cur.attempt_id
 RETURNING a.*
)
SELECT {todo_cols}, {attempt_cols}
  FROM moved m
  JOIN closed c ON c.todo_id = m.id
  {todo_joins}
  {attempt_joins}
"""


def _close(cur_filter: str, cur_tail: str = "FOR UPDATE OF t") -> str:
    return _CLOSE.format(
        cur_filter=cur_filter,
        cur_tail=cur_tail,
        todo_cols=_todo_cols("m"),
        todo_joins=TODO_JOINS.format(t="m"),
        attempt_cols=_attempt_cols("c"),
        attempt_joins=ATTEMPT_JOINS.format(a="c"),
    )


# The agent's fast path: it holds the open attempt, which is not fenced, and the seq (if
# given) matches. No row back means "not that simple": the caller takes the locked path.
CLOSE_HELD_BY_AGENT = _close(
    "t.id = %(todo_id)s AND "
    + SCOPE_ENDPOINT
    + """
       AND a.claimer_kind = 'endpoint' AND a.endpoint_id = %(scope_endpoint)s
       AND a.lease_token_hash IS NULL
       AND (%(attempt_seq)s::int IS NULL OR a.seq = %(attempt_seq)s::int)"""
)
# After LOCK_TODO and the checks in Python (scope, holder, seq, fence): close that attempt.
CLOSE_CHECKED = _close("t.id = %(todo_id)s AND a.seq = %(attempt_seq)s")
# The sweeper: a batch of lapsed leases across all endpoints (no caller scope: it reads
# nothing out and moves no row between tenants).
CLOSE_LAPSED = _close(
    "t.lease_expires_at <= statement_timestamp()",
    "ORDER BY t.lease_expires_at LIMIT %(batch)s FOR UPDATE OF t SKIP LOCKED",
)
# Revocation: every claimed todo of the endpoint.
CLOSE_ALL_OF_ENDPOINT = _close("t.endpoint_id = %(endpoint_id)s")

# ---------------------------------------------------------------------------------------
# Heartbeat: extend the live lease on the todo row. The attempt row gets the last values
# when it closes, so a heartbeat writes one row (ADR-0039's write-amplification concern).

_HEARTBEAT = """
UPDATE todos t
   SET last_heartbeat_at = statement_timestamp(),
       lease_expires_at = GREATEST(t.lease_expires_at,
                                   statement_timestamp() + make_interval(secs => %(lease_seconds)s)),
       updated_at = statement_timestamp()
  FROM todo_attempts a
 WHERE t.state = 'claimed'
   AND a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
   AND {filter}
RETURNING t.lease_expires_at, t.last_attempt_seq
"""
HEARTBEAT_HELD_BY_AGENT = _HEARTBEAT.format(
    filter="t.id = %(todo_id)s AND "
    + SCOPE_ENDPOINT
    + """
       AND a.claimer_kind = 'endpoint' AND a.endpoint_id = %(scope_endpoint)s
       AND a.lease_token_hash IS NULL
       AND (%(attempt_seq)s::int IS NULL OR a.seq = %(attempt_seq)s::int)"""
)
HEARTBEAT_CHECKED = _HEARTBEAT.format(filter="t.id = %(todo_id)s AND a.seq = %(attempt_seq)s")

# ---------------------------------------------------------------------------------------
# The locked read behind every slow path: the todo (in the caller's scope), its open
# attempt if any, and the attempt a call names (attempt_seq, else the newest closed one).

LOCK_TODO = """
SELECT t.id, t.state, t.endpoint_id, t.requester_id, t.last_attempt_seq, t.round,
       le.team_id
  FROM todos t
  JOIN endpoints le ON le.id = t.endpoint_id
 WHERE t.id = %(todo_id)s AND ({scope})
   FOR UPDATE OF t
"""
LOCK_TODO_AGENT = LOCK_TODO.format(scope=SCOPE_ENDPOINT + " OR t.requester_id = %(scope_endpoint)s")
LOCK_TODO_USER = LOCK_TODO.format(scope=SCOPE_USER)

ATTEMPT_FOR_CHECK = """
SELECT a.seq, a.claimer_kind, a.endpoint_id, a.user_id, a.lease_token_hash, a.ended_at,
       a.outcome, a.ended_by_id, a.ended_by_endpoint_id
  FROM todo_attempts a
 WHERE a.todo_id = %(todo_id)s
   AND (a.ended_at IS NULL
        OR a.seq = %(attempt_seq)s
        OR (%(attempt_seq)s::int IS NULL AND a.seq = (
              SELECT max(b.seq) FROM todo_attempts b
               WHERE b.todo_id = %(todo_id)s AND b.ended_at IS NOT NULL)))
"""

# ---------------------------------------------------------------------------------------
# Admission (SWITCHBOARD_CLAIMS_PER_MINUTE): a fixed one-minute window per endpoint. Open
# locks the endpoint row, starts a new window when the last one is over, and returns the
# claims already made in it and the seconds until it ends; charge adds the claim just made.
# Both run in the claim's transaction, so a refused or failed claim writes nothing.

ADMISSION_OPEN = """
WITH cur AS (
    SELECT e.id, (e.admission_window_at IS NULL
                  OR e.admission_window_at <= statement_timestamp() - interval '60 seconds') AS fresh
      FROM endpoints e
     WHERE e.id = %(endpoint_id)s
       FOR UPDATE
)
UPDATE endpoints e
   SET admission_window_at = CASE WHEN cur.fresh THEN statement_timestamp()
                                  ELSE e.admission_window_at END,
       admission_claims = CASE WHEN cur.fresh THEN 0 ELSE e.admission_claims END
  FROM cur
 WHERE e.id = cur.id
RETURNING e.admission_claims,
          extract(epoch FROM e.admission_window_at + interval '60 seconds'
                             - statement_timestamp())::float8
"""

ADMISSION_CHARGE = """
UPDATE endpoints SET admission_claims = admission_claims + 1 WHERE id = %(endpoint_id)s
RETURNING admission_claims
"""

# ---------------------------------------------------------------------------------------
# Reads.

SELECT_TODO = """
SELECT {todo_cols}
  FROM todos t
  {todo_joins}
 WHERE t.id = %(todo_id)s AND ({{scope}})
""".format(todo_cols=_todo_cols("t"), todo_joins=TODO_JOINS.format(t="t"))

SELECT_ATTEMPTS = """
SELECT {attempt_cols}
  FROM todo_attempts a
  {attempt_joins}
 WHERE a.todo_id = %(todo_id)s
 ORDER BY a.seq DESC
 LIMIT %(limit)s
""".format(attempt_cols=_attempt_cols("a"), attempt_joins=ATTEMPT_JOINS.format(a="a"))

SELECT_ATTEMPT = """
SELECT {attempt_cols}
  FROM todo_attempts a
  {attempt_joins}
 WHERE a.todo_id = %(todo_id)s AND a.seq = %(seq)s
""".format(attempt_cols=_attempt_cols("a"), attempt_joins=ATTEMPT_JOINS.format(a="a"))

# list_todos: a page of at most `limit` todos that also stops at about `max_bytes` of todo
# text (title, body, result), so a page of large bodies cannot balloon a response or the
# server's memory: sizes are summed over the page's ids first (octet_length reads a TOASTed
# value's size from its header), and only the rows within the budget are read out (always at
# least one). The last column says whether rows were left for the next page.
LIST_TODOS = """
WITH page AS (
    SELECT t.id,
           octet_length(t.title) + octet_length(t.body)
             + COALESCE(octet_length(t.result::text), 0) AS bytes
      FROM todos t
     WHERE t.endpoint_id = %(endpoint_id)s
       AND (%(state)s::text IS NULL OR t.state = %(state)s::text)
       AND (%(before_id)s::bigint IS NULL OR t.id < %(before_id)s::bigint)
     ORDER BY t.id DESC
     LIMIT %(limit)s + 1
),
sized AS (
    SELECT id, row_number() OVER w AS n, sum(bytes) OVER w AS running
      FROM page
    WINDOW w AS (ORDER BY id DESC)
)
SELECT {todo_cols}, (SELECT count(*) FROM page) > count(*) OVER ()
  FROM sized s
  JOIN todos t ON t.id = s.id
  {todo_joins}
 WHERE s.n <= %(limit)s AND (s.n = 1 OR s.running <= %(max_bytes)s)
 ORDER BY t.id DESC
""".format(todo_cols=_todo_cols("t"), todo_joins=TODO_JOINS.format(t="t"))

# ---------------------------------------------------------------------------------------
# The sweeper's other batches.

REQUEUE_DUE_RETRIES = """
WITH due AS (
    SELECT t.id FROM todos t
     WHERE t.state = 'retry_wait' AND t.claimable_at <= statement_timestamp()
     ORDER BY t.claimable_at
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
UPDATE todos t
   SET state = 'pending', next_retry_at = NULL, updated_at = statement_timestamp()
  FROM due
 WHERE t.id = due.id
RETURNING t.id, t.endpoint_id
"""

# Retention deletes a todo (its attempts cascade) only once the metrics fold has counted its
# attempts: a terminal todo's attempts all ended by its ended_at, and the fold has counted
# every attempt that ended before its mark (queues/metrics.py).
_FOLDED = """t.ended_at < COALESCE(
           (SELECT s.metrics_folded_until FROM sweeper_status s WHERE s.id = 1),
           '-infinity'::timestamptz)"""

RETENTION_BY_AGE = f"""
WITH old AS (
    SELECT t.id FROM todos t
     WHERE t.state IN ('done', 'dead', 'canceled')
       AND t.ended_at < statement_timestamp() - make_interval(days => %(days)s)
       AND {_FOLDED}
     LIMIT %(batch)s
       FOR UPDATE SKIP LOCKED
)
DELETE FROM todos t USING old WHERE t.id = old.id
RETURNING t.id
"""

# Endpoints whose terminal todos exceed the cap, and then the oldest beyond it, per endpoint.
ENDPOINTS_OVER_TERMINAL_CAP = """
SELECT t.endpoint_id
  FROM todos t
 WHERE t.state IN ('done', 'dead', 'canceled')
 GROUP BY t.endpoint_id
HAVING count(*) > %(cap)s
"""

RETENTION_BY_CAP = f"""
WITH cutoff AS (
    -- The newest `cap` terminal todos stay. The cutoff is found without locks: with
    -- SKIP LOCKED in the same scan, a locked newer row would not count toward the OFFSET
    -- and one older todo too many would go.
    SELECT t.ended_at, t.id FROM todos t
     WHERE t.endpoint_id = %(endpoint_id)s AND t.state IN ('done', 'dead', 'canceled')
     ORDER BY t.ended_at DESC, t.id DESC
    OFFSET %(cap)s - 1
     LIMIT 1
),
beyond AS (
    SELECT t.id FROM todos t, cutoff c
     WHERE t.endpoint_id = %(endpoint_id)s AND t.state IN ('done', 'dead', 'canceled')
       AND (t.ended_at, t.id) < (c.ended_at, c.id)
       AND {_FOLDED}
     ORDER BY t.ended_at, t.id
     LIMIT %(batch)s
       FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM todos t USING beyond WHERE t.id = beyond.id
RETURNING t.id
"""

RING_DOORBELL = "SELECT pg_notify('switchboard_todo_ready', %(endpoint_id)s::text)"
DOORBELL_CHANNEL = "switchboard_todo_ready"

# Tables whose statistics lag far behind their contents (changed by more than their size
# since the last ANALYZE, e.g. a fresh install's first burst). A generic plan cached while a
# table looked empty would scan it whole on every claim; ANALYZE refreshes the statistics
# and invalidates such plans in every session.
STALE_STATISTICS = """
SELECT s.relname
  FROM pg_stat_user_tables s
  JOIN pg_class c ON c.oid = s.relid
 WHERE s.relname IN ('todos', 'todo_attempts')
   AND s.schemaname = current_schema()
   AND s.n_mod_since_analyze > GREATEST(500, c.reltuples)
"""
