-- ADR-0039's reference: the drain with `then` without attempt history, in the bench's own two
-- statements (bench/workers.py puts these parts together and runs them in its loop
-- `nohist-then`, on a psycopg connection of the worker's own). Written for the bench against
-- the real tables, not taken from the product's: the todo moves as the product's claim_next
-- and complete with then move it (the same pick, by the claimable index's own expression, the
-- same columns written, the same triggers, the todo's row and its endpoints' names read back);
-- no attempt is read, opened or closed. Both are prepared at the start of a run
-- (bench/workers.py, check_twin), which stops naming the statement if the schema no longer
-- takes it.

-- name: claim
-- claim_next: the endpoint's best claimable todo, other claimers' rows skipped ({also}: more
-- conditions on the pick), claimed.
pick AS (
    SELECT t.id
      FROM todos t
     WHERE t.endpoint_id = %(endpoint)s{also}
       AND t.state IN ('pending', 'retry_wait', 'claimed')
       AND (CASE WHEN t.state = 'claimed' THEN t.lease_expires_at
                 WHEN t.state = 'retry_wait' THEN t.next_retry_at
                 WHEN t.state = 'pending' THEN COALESCE(t.not_before, t.created_at)
                 ELSE NULL END) <= statement_timestamp()
     ORDER BY t.priority DESC,
              (CASE WHEN t.state = 'claimed' THEN t.lease_expires_at
                    WHEN t.state = 'retry_wait' THEN t.next_retry_at
                    WHEN t.state = 'pending' THEN COALESCE(t.not_before, t.created_at)
                    ELSE NULL END),
              t.id
     LIMIT 1
       FOR UPDATE OF t SKIP LOCKED
),
moved AS (
    UPDATE todos t
       SET state = 'claimed', attempt = t.attempt + 1, last_attempt_seq = t.last_attempt_seq + 1,
           owner = %(owner)s, claimed_at = statement_timestamp(), last_heartbeat_at = NULL,
           lease_expires_at = statement_timestamp() + make_interval(secs => %(lease_seconds)s),
           next_retry_at = NULL, dead_letter_reason = '', ended_at = NULL,
           updated_at = statement_timestamp()
      FROM pick
     WHERE t.id = pick.id
 RETURNING t.*
)

-- name: claim_row
SELECT m.id, m.last_attempt_seq, m.*, e.agent_id, rq.agent_id
  FROM moved m
  JOIN endpoints e ON e.id = m.endpoint_id
  LEFT JOIN endpoints rq ON rq.id = m.requester_id

-- name: close
-- complete: the held todo done; its claim follows, picking once the close has its row, and
-- never the todo being closed (close_also).
cur AS (
    SELECT t.id
      FROM todos t
     WHERE (t.state = 'claimed') IS TRUE
       AND t.id = %(todo_id)s AND t.endpoint_id = %(endpoint)s
       AND t.last_attempt_seq = %(attempt_seq)s
       FOR UPDATE OF t
),
ended AS (
    UPDATE todos t
       SET state = 'done', owner = '', claimed_at = NULL, last_heartbeat_at = NULL,
           lease_expires_at = NULL, next_retry_at = NULL, result = %(result)s::jsonb,
           dead_letter_reason = '', ended_at = statement_timestamp(),
           updated_at = statement_timestamp()
      FROM cur
     WHERE t.id = cur.id
 RETURNING t.*
)

-- name: close_also
 AND t.id <> %(todo_id)s AND EXISTS (SELECT FROM ended)

-- name: close_row
SELECT n.id, n.last_attempt_seq, m.*, e.agent_id, rq.agent_id, n.*
  FROM ended m
  JOIN endpoints e ON e.id = m.endpoint_id
  LEFT JOIN endpoints rq ON rq.id = m.requester_id
  LEFT JOIN moved n ON true
