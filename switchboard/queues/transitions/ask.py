"""A todo waiting for a person (issue 43). An agent asks by closing its attempt with a
question (``release`` with ``question``: Close.release makes it an ask; queues/questions.py
says what a question may be). The attempt ends ``asked``, the todo ``waiting``, and the
question is recorded in that transaction (``asked``, a step of the close). The wait ends:

- with an answer (``answer``): from a person of the todo's team, or from its requester (the
  endpoint that sent it with ``to``, or created it on its own queue); checked against the
  question, recorded with who gave it, audited; the todo is pending at once, its endpoint's
  long-polls woken;
- with no answer in the question's time (``expire_questions``, the sweeper's): back to the
  queue or a dead letter, as ``on_no_answer`` said; audited as ``unanswered``;
- or otherwise: a person claims the todo (an owner attempt) or cancels it, or its endpoint is
  revoked; the trigger ``todos_wait_ended`` withdraws the question.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from switchboard.queues import db, questions, sql
from switchboard.queues.arguments import todo_id as checked_todo_id
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, NotFound
from switchboard.queues.models import EventKind, OnNoAnswer, TodoState
from switchboard.queues.questions import Question
from switchboard.queues.records import Closed, TodoRecord, json_value
from switchboard.queues.transitions._common import (
    Actor,
    event,
    in_scope,
    read_attempt,
    read_todo,
    ring,
    transition,
)


def asked(question: Question, todo_id: int, seq: int) -> Plan[Closed]:
    """Record the question attempt ``seq`` asked in closing (the close's own transaction),
    and read the todo and the attempt back with it."""
    yield Fetch(
        sql.INSERT_QUESTION,
        {
            "todo_id": todo_id,
            "attempt_seq": seq,
            "text": question.text.text,
            "text_truncated": question.text.truncated,
            "text_bytes": question.text.bytes,
            "choices": _jsonb(question.choices),
            "answer_schema": _jsonb(question.answer_schema),
            "answer_within_seconds": question.answer_within_seconds,
            "on_no_answer": question.on_no_answer,
        },
    )
    todo = yield from read_todo(todo_id)
    return Closed(todo, (yield from read_attempt(todo_id, seq)))


@dataclass(frozen=True, slots=True)
class OpenQuestion:
    """A todo as the answer's locked read found it, with its open question (LOCK_QUESTION_*;
    the question's fields are None when it has none open)."""

    todo_id: int
    state: str
    endpoint_id: int
    team_id: int
    question_id: int | None
    attempt_seq: int | None
    choices: Any
    answer_schema: Any
    asked_at: datetime | None


@transition
def answer(actor: Actor, todo_id: int, *, value: object) -> Plan[TodoRecord]:
    """Answer the todo's open question with ``value`` and end its wait: the todo is pending,
    claimable at once, and the next claimer reads the question and this answer in its prior
    attempts. A person of the team may answer, or the todo's requester. Unknown and foreign
    todos alike: NotFound; no open question (answered, withdrawn, never asked): Conflict; a
    value the question does not take: Invalid."""
    actor.check_active()
    todo_id = checked_todo_id(todo_id)
    return (yield Atomic(_answer(actor, todo_id, value)))


def _answer(actor: Actor, todo_id: int, value: object) -> Plan[TodoRecord]:
    rows = yield in_scope(sql.LOCK_QUESTION, actor, todo_id=todo_id)
    if not rows:
        raise NotFound()
    found = OpenQuestion(*rows[0])
    if found.question_id is None or found.state != TodoState.WAITING:
        raise Conflict(
            f"That todo has no open question to answer (it is {found.state}): it was"
            " answered, withdrawn or ran out of time."
        )
    given = questions.check_answer(
        value, choices=json_value(found.choices), answer_schema=json_value(found.answer_schema)
    )
    waited = yield Fetch(
        sql.ANSWER_QUESTION,
        {
            "question_id": found.question_id,
            "answer": json.dumps(given),
            "user_id": None if actor.is_agent else actor.user.pk,
            "endpoint_id": actor.endpoint_id,
        },
    )
    yield Fetch(sql.END_WAIT, {"todo_ids": [todo_id]})
    yield from event(
        EventKind.ANSWER,
        todo_id,
        team_id=found.team_id,
        actor=actor,
        detail={"attempt_seq": found.attempt_seq, "waited_seconds": round(waited[0][0], 3)},
    )
    yield from ring(found.endpoint_id)
    return (yield from read_todo(todo_id))


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A question the sweeper ended for want of an answer, and where its todo went."""

    todo_id: int
    endpoint_id: int
    attempt_seq: int
    state: str  # pending (requeued) or dead


def expire_questions(*, batch: int = 100) -> list[Unanswered]:
    """End a batch of questions whose time ran out: each todo back to the queue or dead, as
    its question's ``on_no_answer`` says, in one transaction with the question (a question
    being answered meanwhile is skipped, and its answer stands)."""
    return db.run(_atomic(_expire(batch)))


def _atomic(plan: Plan) -> Plan:
    return (yield Atomic(plan))


def _expire(batch: int) -> Plan[list[Unanswered]]:
    ended = yield Fetch(sql.EXPIRE_QUESTIONS, {"batch": batch})
    seqs = {todo_id: (seq, within) for todo_id, seq, _, within in ended}
    requeue = [todo_id for todo_id, _, then, _ in ended if then == OnNoAnswer.REQUEUE]
    dead = [todo_id for todo_id, _, then, _ in ended if then == OnNoAnswer.DEAD_LETTER]
    moved: list[Unanswered] = []
    for statement, ids, state in (
        (sql.END_WAIT, requeue, TodoState.PENDING),
        (sql.DEAD_LETTER_UNANSWERED, dead, TodoState.DEAD),
    ):
        if ids:
            rows = yield Fetch(statement, {"todo_ids": ids})
            moved += [Unanswered(i, e, seqs[i][0], state) for i, e in rows]
    for each in moved:
        seq, within = seqs[each.todo_id]
        yield from event(
            EventKind.UNANSWERED,
            each.todo_id,
            detail={"attempt_seq": seq, "within_seconds": within, "to_state": each.state},
        )
    for endpoint_id in sorted({m.endpoint_id for m in moved if m.state == TodoState.PENDING}):
        yield from ring(endpoint_id)
    return moved


def _jsonb(value: object) -> str | None:
    return None if value is None else json.dumps(value)
