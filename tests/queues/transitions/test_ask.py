"""Ask a person (issue 43): ``release`` with ``question`` ends the attempt ``asked`` and the todo
waits (``waiting``) until a person of its team or its requester answers; the answer ends the
wait in one transaction and the next claimer reads the question, the answer and who gave it.
The wait may also run out (the sweeper), or a person claims or cancels the todo instead."""

from __future__ import annotations

import pytest
from django.db import connection

from switchboard.queues import sweeper, transitions
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import Todo, TodoEvent, TodoQuestion
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    backdate,
    events_of,
    get_todo_for_endpoint,
    get_todo_for_user,
    tables_as_json,
)


def _asked(make_todo, agent, **question):
    """A todo its agent claimed and then asked about."""
    todo = make_todo()
    claim = transitions.claim_next(agent, claimant="builder-7")
    closed = transitions.release(
        agent, todo.id, summary="stuck on a decision", **{"question": "Go ahead?", **question}
    )
    return claim, closed


def _ledger() -> tuple:
    return tables_as_json("todos", "todo_attempts", "todo_questions", "todo_events")


def _run_out(todo_id: int) -> None:
    """The question's time is up (the database's clock decides: its time is moved back)."""
    backdate(
        "UPDATE todo_questions SET expires_at = statement_timestamp() - interval '1 second'"
        " WHERE todo_id = %s AND ended_at IS NULL",
        [todo_id],
    )


def test_an_ask_closes_the_attempt_asked_and_the_todo_waits_unclaimable(agent, make_todo):
    claim, closed = _asked(make_todo, agent, choices=["yes", "no"], answer_within_seconds=3600)

    assert (closed.attempt.outcome, closed.attempt.disposition) == ("asked", "waiting")
    assert closed.todo.state == "waiting" and closed.todo.failures == 0
    shown = closed.todo.as_api()
    assert shown["waiting_for"] == "people"
    question = shown["question"]
    assert question["text"] == "Go ahead?" and question["choices"] == ["yes", "no"]
    assert question["attempt_seq"] == claim.attempt_seq == 1
    assert question["claimant"] == "builder-7" and question["endpoint"] == "agent-a"
    assert question["ending"] is None and question["answer"] is None
    assert question["expires_at"] is not None and question["on_no_answer"] == "requeue"
    assert closed.attempt.as_api()["question"]["text"] == "Go ahead?"
    assert closed.attempt.summary == "stuck on a decision"

    assert transitions.claim_next(agent) is None  # not claimable by agents
    with pytest.raises(Conflict):
        transitions.claim(agent, closed.todo.id)
    assert sweeper.sweep_once().did_work is False  # nothing to reap, requeue or expire
    assert Todo.objects.get(pk=closed.todo.id).state == "waiting"


def test_a_persons_answer_ends_the_wait_and_the_next_claimer_reads_it(agent, human, make_todo):
    _, closed = _asked(make_todo, agent, choices=["yes", "no"])

    answered = transitions.answer(human, closed.todo.id, value="yes")

    assert answered.state == "pending" and answered.waiting_for == ""
    assert answered.as_api()["question"] is None
    again = transitions.claim_next(agent)
    assert again.todo.id == closed.todo.id and again.attempt_seq == 2
    [told] = again.as_api()["prior_attempts"]
    assert told["outcome"] == "asked" and told["summary"] == "stuck on a decision"
    asked = told["question"]
    assert asked["text"] == "Go ahead?" and asked["ending"] == "answered"
    assert asked["answer"]["value"] == "yes"
    assert asked["answer"]["answered_by"] == {"kind": "person", "label": "alice"}
    assert asked["answer"]["answered_at"] >= asked["asked_at"]
    assert events_of(closed.todo.id)[-1] == "answer"
    audit = TodoEvent.objects.filter(todo_id=closed.todo.id, kind="answer").get()
    assert audit.actor_user.username == "alice" and "yes" not in str(audit.detail)


def test_the_requester_answers_over_the_api_and_other_endpoints_cannot(
    endpoint, make_endpoint, make_todo
):
    orchestrator = make_endpoint("orchestrator")
    bystander = make_endpoint("bystander")
    todo = make_todo(requester=orchestrator)
    worker = Actor.agent(endpoint)
    transitions.claim_next(worker)
    transitions.release(worker, todo.id, question="Which customer?")
    before = _ledger()

    for stranger in (Actor.agent(bystander), worker):  # not the requester: as if unknown
        with pytest.raises(NotFound):
            transitions.answer(stranger, todo.id, value="ACME")
    assert _ledger() == before
    seen = get_todo_for_endpoint(orchestrator, todo.id).as_api()["todo"]
    assert seen["state"] == "waiting" and seen["question"]["text"] == "Which customer?"

    answered = transitions.answer(Actor.agent(orchestrator), todo.id, value="ACME Corp")

    assert answered.state == "pending"
    [question] = get_todo_for_endpoint(endpoint, todo.id).as_api()["todo"]["questions"]
    assert question["answer"]["answered_by"] == {"kind": "endpoint", "label": "orchestrator"}
    assert question["answer"]["value"] == "ACME Corp"


def test_an_endpoint_answers_what_it_made_on_its_own_queue(agent, make_todo):
    _, closed = _asked(make_todo, agent)
    assert transitions.answer(agent, closed.todo.id, value="go").state == "pending"


def test_an_endpoint_cannot_answer_what_a_person_made_on_its_queue(agent, human, endpoint):
    """A person's todo (a child of what the person holds, too) is the team's: its question is
    a person's to answer, and the endpoint is told not_found, as for a todo it cannot see."""
    todo, _ = transitions.create_todo(human, endpoint=endpoint, title="made by alice")
    transitions.claim_next(agent)
    transitions.release(agent, todo.id, question="Go ahead?")
    before = _ledger()

    with pytest.raises(NotFound):
        transitions.answer(agent, todo.id, value="go")
    assert _ledger() == before
    assert transitions.answer(human, todo.id, value="go").state == "pending"


def test_another_teams_todo_answers_not_found_exactly_like_an_unknown_one(
    agent, make_todo, make_user
):
    _, closed = _asked(make_todo, agent)
    outsider = Actor.human(make_user("mallory"))
    before = _ledger()

    errors = []
    for todo_id in (closed.todo.id, 987_654_321):
        with pytest.raises(NotFound) as caught:
            transitions.answer(outsider, todo_id, value="yes")
        errors.append(caught.value.as_dict())
    assert errors[0] == errors[1]
    assert _ledger() == before


@pytest.mark.parametrize(
    ("question", "value", "says"),
    [
        ({"choices": ["yes", "no"]}, "maybe", "one of the question's choices"),
        ({"choices": ["yes", "no"]}, ["yes"], "one of the question's choices"),
        ({}, "", "must be text"),
        ({}, {"a": 1}, "must be text"),
        ({}, "x" * 2049, "at most 2048 bytes"),
        ({}, None, "must be text"),
        (
            {"answer_schema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            {"n": 1.5},
            "whole number",
        ),
        (
            {
                "answer_schema": {
                    "type": "object",
                    "properties": {"ok": {"type": "boolean"}},
                    "required": ["ok"],
                }
            },
            {},
            "required",
        ),
        (
            {"answer_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}},
            {"ok": True, "extra": 1},
            "fields the form does not",
        ),
    ],
)
def test_an_answer_the_question_does_not_take_is_invalid_and_writes_nothing(
    agent, human, make_todo, question, value, says
):
    _, closed = _asked(make_todo, agent, **question)
    before = _ledger()

    with pytest.raises(Invalid) as caught:
        transitions.answer(human, closed.todo.id, value=value)

    assert says in caught.value.message
    assert _ledger() == before


def test_an_answer_fills_the_questions_form(agent, human, make_todo):
    schema = {
        "type": "object",
        "properties": {
            "approve": {"type": "boolean", "title": "Approve the refund?"},
            "amount": {"type": "number", "minimum": 0, "maximum": 1000},
            "reason": {"type": "string", "maxLength": 200},
            "tier": {"type": "string", "enum": ["gold", "silver"]},
        },
        "required": ["approve"],
    }
    _, closed = _asked(make_todo, agent, answer_schema=schema)

    transitions.answer(
        human, closed.todo.id, value={"approve": True, "amount": 840, "tier": "gold"}
    )

    [question] = get_todo_for_user(human.user, closed.todo.id).questions
    assert question["answer_schema"] == schema
    assert question["answer"]["value"] == {"approve": True, "amount": 840, "tier": "gold"}


def test_a_stale_answer_is_a_conflict(agent, human, make_todo, make_user):
    _, closed = _asked(make_todo, agent)
    transitions.answer(human, closed.todo.id, value="first")
    before = _ledger()

    with pytest.raises(Conflict) as caught:
        transitions.answer(human, closed.todo.id, value="second")

    assert "no open question" in caught.value.message
    assert _ledger() == before
    with pytest.raises(Conflict):  # a todo that never asked
        transitions.answer(human, make_todo("other").id, value="x")


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"question": ""}, "non-empty"),
        ({"question": "?", "choices": ["a"], "answer_schema": {"type": "object"}}, "not both"),
        ({"question": "?", "choices": []}, "1 to 10"),
        ({"question": "?", "choices": ["a", "a"]}, "distinct"),
        ({"question": "?", "choices": ["x" * 101]}, "at most 100"),
        ({"question": "?", "choices": [f"c{n}" for n in range(11)]}, "1 to 10"),
        ({"question": "?", "answer_schema": {"type": "string"}}, "JSON Schema object"),
        (
            {
                "question": "?",
                "answer_schema": {
                    "type": "object",
                    "properties": {"deep": {"type": "object", "properties": {}}},
                },
            },
            "nothing nested",
        ),
        ({"question": "?", "answer_within_seconds": 0}, "from 1 to"),
        ({"question": "?", "answer_within_seconds": 31 * 86400}, "from 1 to"),
        ({"question": "?", "on_no_answer": "dead_letter"}, "needs answer_within_seconds"),
        ({"question": "?", "on_no_answer": "explode", "answer_within_seconds": 5}, "one of"),
        ({"question": "?", "delay_seconds": 60}, "not for a time"),
        ({"choices": ["a"]}, "go with a question"),
    ],
)
def test_a_malformed_question_is_invalid_and_the_lease_stands(agent, make_todo, arguments, says):
    todo = make_todo()
    transitions.claim_next(agent)
    before = _ledger()

    with pytest.raises(Invalid) as caught:
        transitions.release(agent, todo.id, **arguments)

    assert says in caught.value.message
    assert _ledger() == before


def test_a_long_question_is_truncated_and_marked_like_a_summary(agent, make_todo):
    _, closed = _asked(make_todo, agent, question="é" * 2000)

    question = closed.todo.as_api()["question"]
    assert question["text_truncated"] is True and question["text_bytes"] == 4000
    assert len(question["text"].encode()) <= 2048


def test_a_repeated_ask_replays_and_records_one_question(agent, make_todo):
    _, closed = _asked(make_todo, agent)

    again = transitions.release(agent, closed.todo.id, question="Go ahead?")

    assert again.replayed and again.todo.state == "waiting"
    assert TodoQuestion.objects.filter(todo_id=closed.todo.id).count() == 1


def test_an_unanswered_question_requeues_or_dead_letters_as_it_said(agent, make_todo):
    _, requeued = _asked(make_todo, agent, answer_within_seconds=60)
    todo = make_todo("second")
    transitions.claim(agent, todo.id)
    dead = transitions.release(
        agent, todo.id, question="Approve?", answer_within_seconds=60, on_no_answer="dead_letter"
    )
    assert sweeper.sweep_once().unanswered == 0  # not yet
    _run_out(requeued.todo.id)
    _run_out(dead.todo.id)

    report = sweeper.sweep_once()

    assert report.unanswered == 2
    assert Todo.objects.get(pk=requeued.todo.id).state == "pending"
    gone = Todo.objects.get(pk=dead.todo.id)
    assert (gone.state, gone.dead_letter_reason) == ("dead", "unanswered")
    assert events_of(dead.todo.id)[-1] == "unanswered"
    again = transitions.claim_next(agent)
    [told] = again.as_api()["prior_attempts"]
    assert told["question"]["ending"] == "unanswered"
    assert told["question"]["answer_within_seconds"] == 60 and told["question"]["answer"] is None
    assert sweeper.sweep_once().unanswered == 0  # nothing ends twice


def test_an_answer_and_the_expiry_never_both_end_a_question(agent, human, make_todo):
    _, closed = _asked(make_todo, agent, answer_within_seconds=60)
    transitions.answer(human, closed.todo.id, value="yes")
    _run_out_anyway = connection.cursor()
    with _run_out_anyway as cursor:  # an answered question's time passes: nothing happens
        cursor.execute(
            "UPDATE todo_questions SET expires_at = statement_timestamp() - interval '1 s'"
            " WHERE todo_id = %s",
            [closed.todo.id],
        )

    assert sweeper.sweep_once().unanswered == 0
    [question] = TodoQuestion.objects.filter(todo_id=closed.todo.id)
    assert question.ending == "answered"


def test_a_person_claims_a_waiting_todo_instead_and_the_question_is_withdrawn(
    agent, human, make_todo
):
    _, closed = _asked(make_todo, agent)

    mine = transitions.claim(human, closed.todo.id)

    assert mine.todo.state == "claimed" and mine.todo.waiting_for == ""
    question = mine.as_api()["prior_attempts"][0]["question"]
    assert question["ending"] == "withdrawn"
    with pytest.raises(Conflict):
        transitions.answer(human, closed.todo.id, value="too late")


def test_a_waiting_todo_can_be_canceled_by_a_person_or_its_endpoint(
    endpoint, agent, human, make_todo
):
    _, first = _asked(make_todo, agent)
    _, second = _asked(make_todo, agent)

    for actor, todo in ((human, first.todo), (agent, second.todo)):
        canceled = transitions.cancel(actor, todo.id)
        assert canceled.todo.state == "canceled" and canceled.todo.waiting_for == ""
        assert TodoQuestion.objects.get(todo_id=todo.id).ending == "withdrawn"


def test_revoking_the_endpoint_kills_its_waiting_todos(endpoint, agent, make_todo):
    _, closed = _asked(make_todo, agent)

    transitions.revoke_endpoint(None, endpoint)

    todo = Todo.objects.get(pk=closed.todo.id)
    assert (todo.state, todo.dead_letter_reason) == ("dead", "revoked")
    assert TodoQuestion.objects.get(todo_id=todo.id).ending == "withdrawn"


def test_an_ask_with_then_claims_the_next_todo(agent, make_todo):
    todo = make_todo("first")
    make_todo("second")
    transitions.claim(agent, todo.id)
    close = transitions.Close.release(question="Which branch?")

    then = transitions.close_then_claim_next(agent, close, todo.id, claim=transitions.ClaimArgs())

    assert then.closed.todo.state == "waiting" and then.next is transitions.Next.CLAIMED
    assert then.claim.todo.title == "second"


def test_get_todo_lists_every_question_newest_first(agent, human, make_todo):
    _, closed = _asked(make_todo, agent, question="First?")
    transitions.answer(human, closed.todo.id, value="one")
    transitions.claim_next(agent)
    transitions.release(agent, closed.todo.id, question="Second?")

    detail = get_todo_for_endpoint(agent.endpoint, closed.todo.id).as_api()["todo"]

    assert [q["text"] for q in detail["questions"]] == ["Second?", "First?"]
    assert detail["question"]["text"] == "Second?"
    assert [q["ending"] for q in detail["questions"]] == [None, "answered"]


def test_a_person_holding_a_lease_may_ask_but_not_for_an_agent(agent, human, make_todo):
    todo = make_todo()
    transitions.claim_next(agent)
    with pytest.raises(Conflict):  # a person ends an agent's lease, but does not ask for it
        transitions.release(human, todo.id, question="Should I?")
    transitions.release(agent, todo.id)
    transitions.claim(human, todo.id)

    asked = transitions.release(human, todo.id, question="Can someone else decide?")

    assert asked.todo.state == "waiting"
    assert asked.attempt.as_api()["question"]["claimant"] is None
