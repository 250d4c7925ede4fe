"""The web server SIGKILLed between a question and its answer (issue 43): nothing is lost, the
question still waits, it is answered once only, and the next claim reads the answer.

Real processes: ``switchboard serve`` (gunicorn) killed as a process group and started again
on the same database; a sender and a worker speaking HTTP through ``switchboard.client``; a
person answering as the Board does (``transitions.answer`` as a human).
"""

from __future__ import annotations

import random
import threading
import time

import pytest

from switchboard.client import Client, SwitchboardError
from switchboard.queues import transitions
from switchboard.queues.errors import Conflict
from switchboard.queues.models import EventKind, Todo, TodoAttempt, TodoEvent, TodoQuestion
from switchboard.queues.transitions import Actor
from tests.crash.harness import ignore_transport

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FORM = {
    "type": "object",
    "properties": {"approve": {"type": "boolean"}, "amount": {"type": "integer"}},
    "required": ["approve"],
}
# What each todo asks, and the answer it gets (the keys are the todos' titles).
ASKS = {
    "drop the column": ({"choices": ["drop it", "keep it"]}, "keep it"),
    "refund 840 EUR": ({"answer_schema": FORM}, {"approve": True, "amount": 840}),
    "which customer": ({"answer_within_seconds": 3600}, "the second one"),
}


def test_a_server_killed_between_ask_and_answer_loses_nothing_and_answers_once(
    vend, procs, crash_env, user
):
    _, sender_token = vend("crash-sender")
    _, worker_token = vend("crash-worker")
    server, base = procs.serve(crash_env)
    sender, worker = Client(base, sender_token), Client(base, worker_token)
    ids = {
        title: sender.create_todo(title=title, to="crash-worker")["todo"]["id"] for title in ASKS
    }

    # The worker claims each todo and asks its question; the server dies once all are asked.
    for _ in ASKS:
        claimed = worker.claim_next()
        title = claimed["todo"]["title"]
        asked = worker.release(
            todo_id=claimed["todo"]["id"],
            attempt_seq=claimed["attempt_seq"],
            question=f"{title}: go ahead?",
            **ASKS[title][0],
        )
        assert (asked["outcome"], asked["todo"]["state"]) == ("asked", "waiting")
    server.kill()

    # Nothing lost: each todo waits with its question open, its attempt closed asked, no try
    # spent.
    for title, todo_id in ids.items():
        todo = Todo.objects.get(pk=todo_id)
        assert (todo.state, todo.waiting_for, todo.failures) == ("waiting", "people", 0)
        [attempt] = TodoAttempt.objects.filter(todo_id=todo_id)
        assert (attempt.outcome, attempt.disposition) == ("asked", "waiting")
        [question] = TodoQuestion.objects.filter(todo_id=todo_id)
        assert question.ended_at is None and question.text == f"{title}: go ahead?"

    server, base = procs.serve(crash_env)
    sender, worker = Client(base, sender_token), Client(base, worker_token)
    for title, todo_id in ids.items():
        shown = sender.get_todo(todo_id=todo_id)["todo"]
        assert shown["state"] == "waiting" and shown["question"]["text"] == f"{title}: go ahead?"

    # A long-poll of the worker's queue waits through the questions (not claimable), and the
    # first answer wakes it with that todo.
    woken: dict = {}
    poll = threading.Thread(
        target=lambda: woken.update(worker.claim_next(wait_seconds=20)), daemon=True
    )
    poll.start()
    time.sleep(1)
    assert poll.is_alive() and not woken
    answered = sender.answer(todo_id=ids["drop the column"], value="keep it")
    assert answered["todo"]["state"] == "pending"
    poll.join(timeout=10)
    assert woken["todo"]["id"] == ids["drop the column"]
    [prior] = woken["prior_attempts"]
    answer = prior["question"]["answer"]
    assert (prior["outcome"], answer["value"]) == ("asked", "keep it")
    assert answer["answered_by"] == {"kind": "endpoint", "label": "crash-sender"}
    # Answered once only: the sender again and a person on the Board are refused.
    with pytest.raises(SwitchboardError) as again:
        sender.answer(todo_id=ids["drop the column"], value="drop it")
    assert (again.value.status, again.value.code) == (409, "conflict")
    with pytest.raises(Conflict):
        transitions.answer(Actor.human(user), ids["drop the column"], value="drop it")

    # An answer in flight when the server dies: it committed or it did not; sent again to
    # the next server it is taken (it had not) or refused as answered (it had), never twice.
    refund = ids["refund 840 EUR"]
    value = ASKS["refund 840 EUR"][1]
    in_flight = threading.Thread(
        target=lambda: ignore_transport(lambda: sender.answer(todo_id=refund, value=value)),
        daemon=True,
    )
    in_flight.start()
    time.sleep(random.choice([0, 0.005, 0.02, 0.1]))
    server.kill()
    in_flight.join(timeout=10)
    committed = TodoQuestion.objects.get(todo_id=refund).ending == "answered"
    server, base = procs.serve(crash_env)
    sender, worker = Client(base, sender_token), Client(base, worker_token)
    if committed:
        with pytest.raises(SwitchboardError) as again:
            sender.answer(todo_id=refund, value=value)
        assert again.value.code == "conflict"
    else:
        assert sender.answer(todo_id=refund, value=value)["todo"]["state"] == "pending"

    # A person answers the last one; the sender's answer after it is a conflict.
    transitions.answer(Actor.human(user), ids["which customer"], value="the second one")
    with pytest.raises(SwitchboardError) as again:
        sender.answer(todo_id=ids["which customer"], value="the first one")
    assert again.value.code == "conflict"

    # The next claims read each question and its one answer, and who gave it.
    read = {}
    for _ in range(2):
        claimed = worker.claim_next()
        [prior] = claimed["prior_attempts"]
        read[claimed["todo"]["id"]] = prior["question"]["answer"]
    assert worker.claim_next()["todo"] is None
    assert read[refund]["value"] == value
    assert read[refund]["answered_by"] == {"kind": "endpoint", "label": "crash-sender"}
    assert read[ids["which customer"]]["value"] == "the second one"
    assert read[ids["which customer"]]["answered_by"] == {
        "kind": "person",
        "label": user.username,
    }
    for todo_id in ids.values():
        [question] = TodoQuestion.objects.filter(todo_id=todo_id)
        assert question.ending == "answered"
        assert TodoEvent.objects.filter(todo_id=todo_id, kind=EventKind.ANSWER).count() == 1
        assert Todo.objects.get(pk=todo_id).state == "claimed"
    assert server.alive()
