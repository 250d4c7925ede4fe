"""The reads of get_todo, list_todos and the Board's drawer: a todo in a caller's scope, its
attempts newest first, one attempt, a page of a queue, the people's actions on a todo; and
the Board queue's capped tab counts and its dead letters by reason.

Why raw SQL: every read returns the same row layout as the claim and close statements (the
records' sources), through one prepared statement; the ORM would build model instances the
callers never use, and compile each query per request.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.fragments import (
    SCOPE_ENDPOINT_OR_REQUESTER,
    attempt_columns,
    attempt_joins,
    scoped,
    todo_columns,
    todo_joins,
)

_SELECT_TODO = f"""
SELECT {todo_columns("t")}
  FROM todos t
  {todo_joins("t")}
 WHERE t.id = %(todo_id)s AND ({{scope}})
"""

SELECT_TODO = Statement(
    "select_todo",
    _SELECT_TODO.format(scope="true"),
    why="a todo by id with no scope: only after a scoped lock or claim found it",
    prepare=True,
)
# A todo the caller can see (missing_or_conflict: an agent's own queue; the Board's drawer).
SELECT_TODO_IN = scoped(
    "select_todo_in",
    _SELECT_TODO,
    why="a todo of the agent's own queue, or of any queue in the person's teams",
    prepare=True,
)
SELECT_TODO_FOR_AGENT_OR_REQUESTER = Statement(
    "select_todo_for_agent_or_requester",
    _SELECT_TODO.format(scope=SCOPE_ENDPOINT_OR_REQUESTER),
    why="get_todo: the agent's own queue, or a todo it sent elsewhere (as requester)",
    prepare=True,
)

# Attempts in the records' layout, with their claimer's names: the two reads below say which.
_SELECT_ATTEMPTS = f"""
SELECT {attempt_columns("a")}
  FROM todo_attempts a
  {attempt_joins("a")}
"""

SELECT_ATTEMPTS = Statement(
    "select_attempts",
    _SELECT_ATTEMPTS
    + """ WHERE a.todo_id = %(todo_id)s
 ORDER BY a.seq DESC
 LIMIT %(limit)s
""",
    why="the newest attempts of a todo with their claimer's names, by the (todo, seq) index",
    prepare=True,
)

SELECT_ATTEMPT = Statement(
    "select_attempt",
    _SELECT_ATTEMPTS + " WHERE a.todo_id = %(todo_id)s AND a.seq = %(seq)s\n",
    why="one attempt in the records' layout (a replayed close answers with it)",
    prepare=True,
)

# The drawer's history shows people's actions among the tries: the audit rows of one todo
# (by the todo_events todo index), newest first, with who acted. Only after the scoped read
# of the todo itself found it.
SELECT_TODO_PEOPLE = Statement(
    "select_todo_people",
    """
SELECT ev.kind, ev.created_at, u.username, ep.agent_id, ev.detail
  FROM todo_events ev
  LEFT JOIN auth_user u ON u.id = ev.actor_user_id
  LEFT JOIN endpoints ep ON ep.id = ev.actor_endpoint_id
 WHERE ev.todo_id = %(todo_id)s AND ev.kind = ANY(%(kinds)s::text[])
 ORDER BY ev.created_at DESC, ev.id DESC
 LIMIT %(limit)s
""",
    why="one todo's audit rows with their actors' names, in the records' layout",
    prepare=True,
)

# A page of at most `limit` todos that also stops at about `max_bytes` of todo text (title,
# body, result), so a page of large bodies cannot balloon a response or the server's memory:
# sizes are summed over the page's ids first (octet_length reads a TOASTed value's size from
# its header), and only the rows within the budget are read out (always at least one). The
# last column says whether rows were left for the next page.
# A keyset page of todos newest first, bounded in rows and in bytes: ``page`` is a CTE of ids
# and their text's size (``_BYTES``; at most %(limit)s + 1, newest first), and the last column
# says whether there are more.
_BYTES = "octet_length(t.title) + octet_length(t.body) + COALESCE(octet_length(t.result::text), 0)"
_SIZED_PAGE = f"""
WITH page AS ({{page}}),
sized AS (
    SELECT id, row_number() OVER w AS n, sum(bytes) OVER w AS running
      FROM page
    WINDOW w AS (ORDER BY id DESC)
)
SELECT {todo_columns("t")}, (SELECT count(*) FROM page) > count(*) OVER ()
  FROM sized s
  JOIN todos t ON t.id = s.id
  {todo_joins("t")}
 WHERE s.n <= %(limit)s AND (s.n = 1 OR s.running <= %(max_bytes)s)
 ORDER BY t.id DESC
"""

LIST_TODOS = Statement(
    "list_todos",
    _SIZED_PAGE.format(
        page=f"""
    SELECT t.id, {_BYTES} AS bytes
      FROM todos t
     WHERE t.endpoint_id = %(endpoint_id)s
       AND (%(state)s::text IS NULL OR t.state = %(state)s::text)
       AND (%(before_id)s::bigint IS NULL OR t.id < %(before_id)s::bigint)
     ORDER BY t.id DESC
     LIMIT %(limit)s + 1"""
    ),
    why="a keyset page bounded in rows and in bytes, with window sums (no ORM window filter)",
    prepare=True,
)

_TASKS_OF = f"""
    (SELECT t.id, {_BYTES} AS bytes
       FROM todos t
      WHERE t.{{column}} = %(endpoint_id)s
        AND (%(task_state)s::text IS NULL
             OR switchboard_task_state(t.state, t.attempt, t.waiting_for) = %(task_state)s::text)
        AND (%(before_id)s::bigint IS NULL OR t.id < %(before_id)s::bigint)
        AND (%(updated_after)s::timestamptz IS NULL OR t.updated_at > %(updated_after)s)
      ORDER BY t.id DESC
      LIMIT %(limit)s + 1)"""

# The tasks an endpoint may read (A2A ListTasks): its own queue's and those it sent, as
# get_todo scopes them; each side walks its own index newest first, and the union is cut. A
# task state is switchboard_task_state()'s (queues/schema/functions.sql).
LIST_TASKS = Statement(
    "list_tasks",
    _SIZED_PAGE.format(
        page=f"""
    SELECT id, bytes FROM ({_TASKS_OF.format(column="endpoint_id")}
                    UNION
                    {_TASKS_OF.format(column="requester_id")}
                   ) mine
     ORDER BY id DESC
     LIMIT %(limit)s + 1"""
    ),
    why="a union of two index walks cut to one keyset page, bounded in rows and bytes",
    prepare=True,
)

TEAM_SLUG = Statement(
    "team_slug",
    "SELECT slug FROM teams WHERE id = %(team_id)s",
    why="a request's tenant checked against its token's team, one row by primary key",
    prepare=True,
)

# The team's card (A2A's extended Agent Card): its slug and its endpoints, revoked ones left out.
TEAM_CARD = Statement(
    "team_card",
    """
SELECT tm.slug, e.agent_id, e.name, e.paused_at IS NOT NULL
  FROM teams tm
  LEFT JOIN endpoints e ON e.team_id = tm.id AND e.revoked_at IS NULL
 WHERE tm.id = %(team_id)s
 ORDER BY e.agent_id
 LIMIT 1001
""",
    why="a team and its live endpoints in one read, as the card lists them",
)


# The Board queue's state tabs (queues.selectors.board_queue_counts): todos of the teams'
# endpoints (or of one of them) in each state, each count stopped at ``cap`` + 1 (the tabs
# say "10,000+"), a bounded walk of todos_endpoint_state for each state and endpoint. Raw
# SQL: a LIMIT inside a subquery for each state, side by side in one statement; the ORM
# writes one query per sliced count.
COUNT_TODOS_BY_STATE_CAPPED = Statement(
    "count_todos_by_state_capped",
    """
SELECT s.state,
       (SELECT count(*)
          FROM (SELECT 1 FROM todos t
                 WHERE t.state = s.state
                   AND t.endpoint_id IN (
                       SELECT e.id FROM endpoints e
                        WHERE e.team_id = ANY(%(team_ids)s::bigint[])
                          AND (%(endpoint_id)s::bigint IS NULL OR e.id = %(endpoint_id)s::bigint))
                 LIMIT %(cap)s + 1) AS upto) AS n
  FROM unnest(%(states)s::text[]) AS s(state)
""",
    why="counts that stop at a cap, one LIMIT subquery per state, in one statement",
)


# The Board's dead letters by reason (queues.selectors.board_dead_letter_groups and
# board_dead_letters): the newest ``limit`` dead letters of the teams' endpoints (or of one),
# each with what its reason's words are made from (board/reasons.py): its dead_letter_reason,
# spent budget, and, where the words use them, how many tries of its last round failed and
# died (as the queue rows count them); and the start of the first line of its last try's
# summary (its error). The newest ids come from each endpoint's own walk of
# todos_endpoint_state, newest first and at most ``limit`` (index only), merged; the counts
# are one probe of todo_attempts_todo_seq per dead letter that needs them (a one-time filter
# skips the rest), the error one probe by (todo, seq). Raw SQL: a LIMIT per endpoint inside
# a LATERAL, a gated LATERAL aggregate and a GROUP BY over them, in one statement.
_DEAD_LETTERS = """
WITH newest AS (
    SELECT t.id, t.dead_letter_reason, t.failures, t.max_attempts, t.round, t.last_attempt_seq,
           -- the words use the counts (board/reasons.py): not for a revoked endpoint, nor a
           -- fail that said not retryable before the budget was spent
           NOT (t.dead_letter_reason = 'revoked'
                OR (t.dead_letter_reason = 'failed' AND t.failures < t.max_attempts)) AS counted
      FROM (SELECT d.id
              FROM endpoints e
             CROSS JOIN LATERAL (
                   SELECT t.id FROM todos t
                    WHERE t.endpoint_id = e.id AND t.state = 'dead'
                    ORDER BY t.id DESC
                    LIMIT %(limit)s) AS d
             WHERE e.team_id = ANY(%(team_ids)s::bigint[])
               AND (%(endpoint_id)s::bigint IS NULL OR e.id = %(endpoint_id)s::bigint)
             ORDER BY d.id DESC
             LIMIT %(limit)s) AS ids
      JOIN todos t ON t.id = ids.id
),
keyed AS (
    SELECT n.id, n.dead_letter_reason AS reason, n.failures, n.max_attempts,
           CASE WHEN n.counted THEN k.failed END AS failed,
           CASE WHEN n.counted THEN k.died END AS died,
           NULLIF(left(split_part(last.summary, E'\\n', 1), %(error_chars)s), '') AS error
      FROM newest n
     CROSS JOIN LATERAL (
           SELECT count(*) FILTER (WHERE a.outcome = 'failed') AS failed,
                  count(*) FILTER (WHERE a.outcome = ANY(%(died_outcomes)s::text[])) AS died
             FROM todo_attempts a
            WHERE n.counted AND a.todo_id = n.id AND a.round = n.round) AS k
      LEFT JOIN todo_attempts last ON last.todo_id = n.id AND last.seq = n.last_attempt_seq
)
"""

DEAD_LETTER_GROUPS = Statement(
    "dead_letter_groups",
    _DEAD_LETTERS
    + """
SELECT reason, failures, max_attempts, failed, died, error, count(*) AS n, max(id) AS newest,
       (SELECT count(*)
          FROM (SELECT 1 FROM todos t
                 WHERE t.state = 'dead'
                   AND t.endpoint_id IN (
                       SELECT e.id FROM endpoints e
                        WHERE e.team_id = ANY(%(team_ids)s::bigint[])
                          AND (%(endpoint_id)s::bigint IS NULL OR e.id = %(endpoint_id)s::bigint))
                 LIMIT %(cap)s + 1) AS upto) AS total
  FROM keyed
 GROUP BY reason, failures, max_attempts, failed, died, error
""",
    why="the newest dead letters' reasons and errors, counted by what their words are made"
    " from, with every dead letter counted up to a cap, in one statement",
)

DEAD_LETTERS_NEWEST = Statement(
    "dead_letters_newest",
    _DEAD_LETTERS
    + """
SELECT id, reason, failures, max_attempts, failed, died, error
  FROM keyed
 ORDER BY id DESC
""",
    why="the newest dead letters, each with what its reason's words are made from (a bulk"
    " action on one group picks its own)",
)
