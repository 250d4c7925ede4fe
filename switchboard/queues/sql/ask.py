"""A question and its wait (issue 43): the question an asking close records, the locked read
of a todo's open question behind an answer, the answer and the end of the wait it makes,
the sweeper's expiry of questions whose time ran out, and a todo's questions for get_todo.

Why raw SQL: the close that asks runs on the same plans as every close (the async executor
too, where the ORM cannot); the expiry is a ``FOR UPDATE SKIP LOCKED`` batch that locks the
question and its todo together; the reads give the API's JSON shape in the statement
(queues.records ``question_json``), as the todo and attempt reads do.

The order of each pair matters: a question is ended (answered, unanswered) before its todo
leaves ``waiting``, because the trigger ``todos_wait_ended`` (queues/schema/functions.sql)
withdraws any question still open when the todo leaves the wait otherwise (claimed by a
person, canceled, revoked). ``todos_outbox_doorbell_pending`` rings the endpoint's notify
URL when the todo becomes pending again.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.records import question_json
from switchboard.queues.sql.fragments import scoped

INSERT_QUESTION = Statement(
    "insert_question",
    """
INSERT INTO todo_questions (todo_id, attempt_seq, asked_at, text, text_truncated, text_bytes,
                            choices, answer_schema, answer_within_seconds, expires_at,
                            on_no_answer, ending)
VALUES (%(todo_id)s, %(attempt_seq)s, statement_timestamp(), %(text)s, %(text_truncated)s,
        %(text_bytes)s, %(choices)s::jsonb, %(answer_schema)s::jsonb,
        %(answer_within_seconds)s::int,
        statement_timestamp() + make_interval(secs => %(answer_within_seconds)s::int),
        %(on_no_answer)s, '')
""",
    why="written by the asking close's plan, in its transaction, on either executor",
)

# The todo (in the caller's scope, locked) and its open question, if any. An agent answers
# as the todo's requester: the endpoint that sent it with ``to``, or the endpoint that
# created it on its own queue (no requester, no person).
_LOCK_QUESTION = """
SELECT t.id, t.state, t.endpoint_id, le.team_id, q.id, q.attempt_seq, q.choices,
       q.answer_schema, q.asked_at
  FROM todos t
  JOIN endpoints le ON le.id = t.endpoint_id
  LEFT JOIN todo_questions q ON q.todo_id = t.id AND q.ended_at IS NULL
 WHERE t.id = %(todo_id)s AND ({scope})
   FOR UPDATE OF t
"""
LOCK_QUESTION = scoped(
    "lock_question",
    _LOCK_QUESTION,
    why="a scoped FOR UPDATE with the open question joined: the answer's one read",
    agent="t.requester_id = %(scope_endpoint)s"
    " OR (t.requester_id IS NULL AND t.created_by_id IS NULL"
    " AND t.endpoint_id = %(scope_endpoint)s)",
)

ANSWER_QUESTION = Statement(
    "answer_question",
    """
UPDATE todo_questions
   SET ended_at = statement_timestamp(), ending = 'answered', answer = %(answer)s::jsonb,
       answered_by_user_id = %(user_id)s, answered_by_endpoint_id = %(endpoint_id)s
 WHERE id = %(question_id)s AND ended_at IS NULL
RETURNING extract(epoch FROM ended_at - asked_at)::float8
""",
    why="a guarded update (the question still open) under the todo's row lock",
)

# The wait ends: claimable at once. (The trigger clears waiting_for.)
END_WAIT = Statement(
    "end_wait",
    """
UPDATE todos
   SET state = 'pending', updated_at = statement_timestamp()
 WHERE id = ANY(%(todo_ids)s::bigint[]) AND state = 'waiting'
RETURNING id, endpoint_id
""",
    why="a guarded state change, of one todo or a sweeper's batch",
)

# The sweeper: questions whose time ran out, each locked with its todo (a concurrent answer
# holds the todo's lock: the question is skipped, and the answer wins), ended as unanswered.
EXPIRE_QUESTIONS = Statement(
    "expire_questions",
    """
WITH due AS (
    SELECT q.id
      FROM todo_questions q
      JOIN todos t ON t.id = q.todo_id
     WHERE q.ended_at IS NULL AND q.expires_at <= statement_timestamp()
       AND t.state = 'waiting'
     ORDER BY q.expires_at
     LIMIT %(batch)s
       FOR UPDATE OF q, t SKIP LOCKED
)
UPDATE todo_questions q
   SET ended_at = statement_timestamp(), ending = 'unanswered'
  FROM due
 WHERE q.id = due.id
RETURNING q.todo_id, q.attempt_seq, q.on_no_answer, q.answer_within_seconds
""",
    why="a SKIP LOCKED batch over the expiring index, locking each question's todo too",
)

# An unanswered question whose on_no_answer is dead_letter: the todo dies (no attempt is
# open: the asking attempt closed when it asked).
DEAD_LETTER_UNANSWERED = Statement(
    "dead_letter_unanswered",
    """
UPDATE todos
   SET state = 'dead', dead_letter_reason = 'unanswered', ended_at = statement_timestamp(),
       updated_at = statement_timestamp()
 WHERE id = ANY(%(todo_ids)s::bigint[]) AND state = 'waiting'
RETURNING id, endpoint_id
""",
    why="a guarded state change of the sweeper's batch",
)

# Every question of a todo, newest first, as the API shows each (get_todo's ``questions``);
# after the scoped read of the todo found it.
SELECT_QUESTIONS = Statement(
    "select_questions",
    f"""
SELECT {question_json("x.todo_id", seq="x.attempt_seq")}
  FROM todo_questions x
 WHERE x.todo_id = %(todo_id)s
 ORDER BY x.attempt_seq DESC
 LIMIT %(limit)s
""",
    why="the API's JSON shape built in the statement, by the (todo, seq) unique index",
    prepare=True,
)
