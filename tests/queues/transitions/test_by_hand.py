"""A person's retry now and rerun (queues/transitions/by_hand.py)."""

from __future__ import annotations

import pytest

from switchboard.queues import transitions
from switchboard.queues.errors import Conflict
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    events_of,
)


def test_retry_now_is_pending_at_once_same_round(user, endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    transitions.fail(agent, todo.id)

    again = transitions.retry_now(Actor.human(user), todo.id)

    assert again.state == "pending" and again.next_retry_at is None
    assert (again.round, again.attempt, again.failures) == (1, 1, 1)
    assert events_of(todo.id) == ["retry_now"]
    with pytest.raises(Conflict):
        transitions.retry_now(Actor.human(user), todo.id)


def test_rerun_opens_a_new_round_and_clears_the_result(user, endpoint, agent, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(Actor.agent(endpoint))
    transitions.fail(agent, todo.id, result={"err": 1})
    assert Todo.objects.get(pk=todo.id).state == "dead"

    rerun = transitions.rerun(Actor.human(user), todo.id)

    assert rerun.state == "pending" and rerun.round == 2
    assert (rerun.attempt, rerun.failures, rerun.result) == (0, 0, None)
    assert rerun.dead_letter_reason == "" and rerun.ended_at is None
    claim = transitions.claim_next(Actor.agent(endpoint))
    assert claim.attempt_seq == 2 and claim.todo.attempt == 1 and claim.todo.round == 2
    new = attempts_of(todo.id)[-1]
    assert (new.seq, new.round, new.attempt) == (2, 2, 1)
    assert attempts_of(todo.id)[0].result == {"err": 1}  # each attempt keeps its own
    [prior] = claim.prior_attempts
    assert prior.round == 1 and prior.outcome == "failed"


def test_rerun_refuses_a_live_todo(user, make_todo):
    todo = make_todo()
    with pytest.raises(Conflict):
        transitions.rerun(Actor.human(user), todo.id)
