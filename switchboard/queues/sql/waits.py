"""Todos that wait for todos (issue 44): made ``after`` others, a parent waiting for its
children, keys; the reads that show what a todo waits for and what waits for it; the
sweeper's release of what a trigger left (queues/waits.py).

Why raw SQL: the locks a wait needs are taken in the statements that read its inputs (the
prerequisites are locked by the update that marks them ``has_dependents``, so none can end
unseen between the read and the new todo's commit), on either executor; the counts
themselves are kept by triggers (queues/schema/functions.sql: ``todos_waits_follow``), in the transaction of the change that
moves them.
"""

from __future__ import annotations

from switchboard.queues.bounds import WAITED_WINDOW_SECONDS
from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.events import DOORBELL_CHANNEL
from switchboard.queues.sql.fragments import OPEN, TERMINAL, UNCLAIMED

# A create with ``after``: the prerequisites of the new todo's team, locked and marked (their
# end is counted from now on), with their states as of the lock. Unknown and foreign ids are
# not returned.
MARK_PREREQUISITES = Statement(
    "mark_prerequisites",
    """
UPDATE todos t
   SET has_dependents = true
  FROM endpoints e
 WHERE t.id = ANY(%(after_ids)s::bigint[]) AND e.id = t.endpoint_id AND e.team_id = %(team_id)s
RETURNING t.id, t.state
""",
    why="an update that locks, marks and reads the prerequisites in one statement",
)

INSERT_EDGES = Statement(
    "insert_edges",
    """
INSERT INTO todo_after (todo_id, after_id, ended)
SELECT %(todo_id)s, x.after_id, x.ended
  FROM unnest(%(after_ids)s::bigint[], %(ended)s::text[]) AS x(after_id, ended)
""",
    why="many rows from two arrays, one statement",
)

# A create with ``parent``: the parent (in the team), locked, with its open attempt's holder.
LOCK_PARENT = Statement(
    "lock_parent",
    """
SELECT t.id, t.state, a.claimer_kind, a.endpoint_id, a.user_id
  FROM todos t
  JOIN endpoints e ON e.id = t.endpoint_id
  LEFT JOIN todo_attempts a
    ON a.todo_id = t.id AND a.seq = t.last_attempt_seq AND a.ended_at IS NULL
 WHERE t.id = %(parent_id)s AND e.team_id = %(team_id)s
   FOR UPDATE OF t
""",
    why="a scoped FOR UPDATE joined to the open attempt",
)
COUNT_CHILD = Statement(
    "count_child",
    """
UPDATE todos SET children_total = children_total + 1, children_open = children_open + 1
 WHERE id = %(parent_id)s
""",
    why="a counter under the row lock LOCK_PARENT took",
)

# A long-poll about to wait marks its endpoint (waited_at), under the advisory lock the trigger
# todos_waits_follow takes shared before it reads the mark to decide whether a freed key
# rings (queues/schema/functions.sql; class WAIT, 0x57414954). Exclusive here: the mark waits
# for the ends in flight to commit (its long-poll's next look sees them), and an end that
# comes after waits for the mark to commit (it reads the mark and rings). The endpoint's row
# is locked first: a revoke or a claim under admission or max_claimed holds that row when its
# ends take the shared lock, so the other order could deadlock. The time is the clock's once
# both are held (a mark that waited is not older than it says), and never moves back.
MARK_WAITING = Statement(
    "mark_waiting",
    """
WITH row AS (
    SELECT e.id FROM endpoints e WHERE e.id = %(endpoint_id)s FOR NO KEY UPDATE
),
held AS (
    SELECT pg_advisory_xact_lock(1463896404, (row.id & 2147483647)::integer) FROM row
)
UPDATE endpoints e SET waited_at = greatest(e.waited_at, clock_timestamp())
  FROM held
 WHERE e.id = %(endpoint_id)s
""",
    why="the endpoint's row lock, an advisory lock for the transaction, one row's update",
)

# A close freed a claim of an endpoint with max_claimed (all keys): its doorbell rings if a
# long-poll of it may be waiting (a mark younger than the trigger's window: bounds
# WAITED_WINDOW_SECONDS), so one refused by the cap looks again at once rather than at the
# doorbell's periodic look. Run after the close's commit, in a statement of its own (a fresh
# snapshot): a mark it does not see committed after the close did, so the long-poll's look
# after that mark sees the freed claim. No advisory lock, unlike a freed key's ring in the
# trigger, which reads the mark inside the closing transaction. (A close inside a larger
# transaction, a cancel or a person's batch, and the sweeper's reap of a lease it dead-letters
# run it before that commits: a mark committed in between waits for the doorbell's periodic
# look.)
RING_IF_WAITING = Statement(
    "ring_if_waiting",
    f"""
SELECT pg_notify('{DOORBELL_CHANNEL}', e.id::text)
  FROM endpoints e
 WHERE e.id = %(endpoint_id)s AND e.max_claimed IS NOT NULL
   AND e.waited_at > statement_timestamp() - interval '{WAITED_WINDOW_SECONDS} seconds'
""",
    why="one row by its primary key, and a notification only when a long-poll may wait",
)

# unique_while_active: one open todo per (endpoint, key). The lock makes two creates of one
# key take turns (the second reads the first's todo once it commits).
LOCK_KEY = Statement(
    "lock_key",
    "SELECT pg_advisory_xact_lock(hashtextextended(%(endpoint_id)s::text || ':' || %(key)s, 44))",
    why="an advisory lock for the transaction, keyed by the endpoint and the key",
)
OPEN_TODO_OF_KEY = Statement(
    "open_todo_of_key",
    f"""
SELECT id FROM todos
 WHERE endpoint_id = %(endpoint_id)s AND key = %(key)s AND state IN {OPEN}
 ORDER BY id
 LIMIT 1
""",
    why="an index probe (todos_key) on the async path too",
)

# What a todo waits for and what waits for it, with their states (get_todo, the drawer): the
# todos at the other end of its edges from one side or the other.
_EDGES = """
SELECT o.id, o.state, o.title
  FROM todo_after a JOIN todos o ON o.id = a.{other}
 WHERE a.{this} = %(todo_id)s
 ORDER BY o.id
 LIMIT %(limit)s
"""
PREREQUISITES = Statement(
    "prerequisites",
    _EDGES.format(this="todo_id", other="after_id"),
    why="the edges of one todo by the primary key, with each prerequisite's state",
)
DEPENDENTS = Statement(
    "dependents",
    _EDGES.format(this="after_id", other="todo_id"),
    why="the edges to one todo by their after_id index, with each dependent's state",
)
# A todo's children as a claimer and get_todo show them: each with its state, its last
# attempt's outcome and summary, and its result (bounded as stored).
CHILDREN = Statement(
    "children",
    """
SELECT c.id, c.title, ce.agent_id, c.state, NULLIF(la.outcome, ''), la.summary,
       la.summary_truncated, c.result, c.dead_letter_reason, c.ended_at
  FROM todos c
  JOIN endpoints ce ON ce.id = c.endpoint_id
  LEFT JOIN todo_attempts la ON la.todo_id = c.id AND la.seq = c.last_attempt_seq
 WHERE c.parent_id = %(todo_id)s
 ORDER BY c.id
 LIMIT %(limit)s
""",
    why="the children by the parent index, each with its newest attempt by (todo, seq)",
)

# A parent's cancel: its unfinished children (of the parents given), locked, in id order.
OPEN_CHILDREN = Statement(
    "open_children",
    f"""
SELECT t.id, t.state
  FROM todos t
 WHERE t.parent_id = ANY(%(parent_ids)s::bigint[]) AND t.state IN {OPEN}
 ORDER BY t.id
   FOR UPDATE
""",
    why="FOR UPDATE of many rows by the parent index",
)
CANCEL_MANY_UNCLAIMED = Statement(
    "cancel_many_unclaimed",
    f"""
UPDATE todos
   SET state = 'canceled', next_retry_at = NULL, ended_at = statement_timestamp(),
       updated_at = statement_timestamp()
 WHERE id = ANY(%(todo_ids)s::bigint[]) AND state IN {UNCLAIMED}
RETURNING id
""",
    why="a guarded state change of many rows",
)

# A person starts a todo now that waits for todos or its children.
START_NOW = Statement(
    "start_now",
    """
UPDATE todos SET state = 'pending', updated_at = statement_timestamp()
 WHERE id = %(todo_id)s AND state = 'waiting' AND waiting_for IN ('todos', 'children')
RETURNING id
""",
    why="a guarded state change",
)

# The release of dependents that a trigger left (over its batch of 1000 edges): the
# prerequisites that ended with edges still unmarked. Marking a batch of their edges
# moves no prerequisite, so the statement does what the trigger does, for one of them.
ENDED_WITH_UNMARKED_EDGES = Statement(
    "ended_with_unmarked_edges",
    """
SELECT DISTINCT a.after_id, p.state
  FROM todo_after a JOIN todos p ON p.id = a.after_id
 WHERE a.ended = '' AND p.state IN """
    + TERMINAL
    + """
 LIMIT %(limit)s
""",
    why="the unmarked edges' index joined to their prerequisites",
)
RELEASE_BATCH = Statement(
    "release_batch",
    """
WITH edges AS (
    UPDATE todo_after a
       SET ended = %(ended)s
     WHERE a.after_id = %(after_id)s
       AND a.todo_id IN (SELECT x.todo_id FROM todo_after x
                          WHERE x.after_id = %(after_id)s AND x.ended = ''
                          ORDER BY x.todo_id LIMIT %(batch)s
                            FOR UPDATE SKIP LOCKED)
    RETURNING a.todo_id
)
UPDATE todos w
   SET after_left = w.after_left - 1,
       state = CASE WHEN w.after_policy = 'all_done' AND %(ended)s <> 'done' THEN 'dead'
                    WHEN w.after_left = 1 THEN 'pending'
                    ELSE w.state END,
       dead_letter_reason = CASE WHEN w.after_policy = 'all_done' AND %(ended)s <> 'done'
                                 THEN 'after_ended' ELSE w.dead_letter_reason END,
       ended_at = CASE WHEN w.after_policy = 'all_done' AND %(ended)s <> 'done'
                       THEN statement_timestamp() ELSE w.ended_at END,
       updated_at = statement_timestamp()
  FROM edges
 WHERE w.id = edges.todo_id AND w.state = 'waiting' AND w.waiting_for = 'todos'
RETURNING w.endpoint_id, w.state
""",
    why="the trigger todos_waits_follow's statement, for one batch the sweeper runs",
)

# max_claimed_per_key as the endpoint has it now, read by claim_next after the trigger
# refused its keyed pick: the limit its process read may be one changed since.
KEY_LIMIT_OF_ENDPOINT = Statement(
    "key_limit_of_endpoint",
    "SELECT e.max_claimed_per_key FROM endpoints e WHERE e.id = %(scope_endpoint)s",
    why="one row by the endpoint's primary key",
)

# max_claimed: an endpoint's claimed todos now, counted under its row's lock (held to the
# claim's commit: the endpoint's claims take turns, only while it sets the limit).
CLAIMED_OF_ENDPOINT = Statement(
    "claimed_of_endpoint",
    """
SELECT (SELECT count(*) FROM todos t WHERE t.endpoint_id = e.id AND t.state = 'claimed')
  FROM endpoints e
 WHERE e.id = %(endpoint_id)s
   FOR UPDATE OF e
""",
    why="a count by the (endpoint, state) index under the endpoint row's lock",
)
