"""complete, fail, release and cancel: each row of the state table a close makes (queues/transitions/close.py and its one statement, queues/sql/close.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from switchboard.queues import transitions
from switchboard.queues.errors import Conflict, NotFound
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    events_of,
    make_retry_due,
    outcomes,
)


def test_complete_is_done_completed_done(endpoint, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim_next(Actor.agent(endpoint))

    closed = transitions.complete(
        agent, todo.id, attempt_seq=claim.attempt_seq, result={"pages": 12}, summary="rebuilt"
    )

    assert closed.todo.state == "done" and closed.todo.result == {"pages": 12}
    assert closed.todo.ended_at is not None and closed.todo.owner == ""
    assert outcomes(todo.id) == [("completed", "done")]
    attempt = attempts_of(todo.id)[0]
    assert attempt.result == {"pages": 12} and attempt.summary == "rebuilt"


def test_the_closed_attempt_names_its_claimer_and_closer_on_either_path(
    endpoint, agent, user, human, make_todo
):
    # The agent's own close (the fast path) takes the names from the todo's endpoint row; a
    # close that goes through the checks joins them. Both must say who claimed and who ended.
    own = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    mine = transitions.complete(agent, own.id).attempt
    assert (mine.claimer_kind, mine.endpoint, mine.user, mine.ended_by) == (
        "endpoint",
        endpoint.agent_id,
        None,
        None,
    )
    fenced = make_todo()
    transitions.claim_next(Actor.agent(endpoint), require_fence=True)
    theirs = transitions.release(human, fenced.id).attempt
    assert (theirs.endpoint, theirs.user, theirs.ended_by) == (
        endpoint.agent_id,
        None,
        user.username,
    )
    held = make_todo()
    transitions.claim(human, held.id)
    by_hand = transitions.complete(human, held.id).attempt
    # (ended_by names someone who ended another's attempt; the holder's own close has none)
    assert (by_hand.claimer_kind, by_hand.endpoint, by_hand.user, by_hand.ended_by) == (
        "owner",
        None,
        user.username,
        None,
    )


def test_fail_below_cap_waits_to_retry_with_backoff(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=3)
    transitions.claim_next(Actor.agent(endpoint))

    closed = transitions.fail(agent, todo.id, result={"err": "flaky"}, summary="timed out")

    assert closed.todo.state == "retry_wait" and closed.todo.failures == 1
    # full jitter: between now and base * 2**0 seconds from now
    delay = closed.todo.next_retry_at - closed.attempt.ended_at
    assert timedelta(0) <= delay <= timedelta(seconds=10)
    assert outcomes(todo.id) == [("failed", "retry_scheduled")]


def test_backoff_grows_with_failures_and_respects_the_max(settings, endpoint, agent, make_todo):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 100
    settings.SWITCHBOARD_RETRY_MAX_SECONDS = 150
    todo = make_todo(max_attempts=10)
    delays = []
    for _ in range(4):
        transitions.claim(agent, todo.id) if delays else transitions.claim_next(
            Actor.agent(endpoint)
        )
        closed = transitions.fail(agent, todo.id)
        delays.append((closed.todo.next_retry_at - closed.attempt.ended_at).total_seconds())
        make_retry_due(todo.id)
    assert all(0 <= d <= 150 for d in delays)
    assert delays[0] <= 100


def test_fail_at_cap_is_dead_lettered(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=2)
    for _ in range(2):
        transitions.claim(agent, todo.id)
        closed = transitions.fail(agent, todo.id, summary="nope")
        if closed.todo.state == "retry_wait":
            make_retry_due(todo.id)

    assert closed.todo.state == "dead" and closed.todo.dead_letter
    assert closed.todo.dead_letter_reason == "failed" and closed.todo.failures == 2
    assert outcomes(todo.id) == [("failed", "retry_scheduled"), ("failed", "dead_lettered")]


def test_fail_not_retryable_dead_letters_at_once(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=5)
    transitions.claim_next(Actor.agent(endpoint))

    closed = transitions.fail(agent, todo.id, retryable=False)

    assert closed.todo.state == "dead" and closed.todo.dead_letter_reason == "failed"
    assert outcomes(todo.id) == [("failed", "dead_lettered")]


def test_release_requeues_without_spending_the_budget(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(Actor.agent(endpoint))

    closed = transitions.release(agent, todo.id, summary="shutting down")

    assert closed.todo.state == "pending" and closed.todo.failures == 0
    assert outcomes(todo.id) == [("released", "requeued")]
    # max_attempts=1 and still claimable: a release passes no verdict
    assert transitions.claim_next(Actor.agent(endpoint)).todo.id == todo.id


def test_cancel_by_holder(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))

    closed = transitions.cancel(agent, todo.id)

    assert closed.todo.state == "canceled" and closed.todo.ended_at is not None
    assert outcomes(todo.id) == [("canceled", "canceled")]


def test_cancel_of_a_pending_todo_writes_an_event_not_an_attempt(endpoint, agent, make_todo):
    todo = make_todo()

    closed = transitions.cancel(agent, todo.id)

    assert closed.todo.state == "canceled" and closed.attempt is None
    assert attempts_of(todo.id) == [] and events_of(todo.id) == ["cancel"]


def test_cancel_by_the_requester_of_a_claimed_todo(make_endpoint, make_todo):
    worker, sender = make_endpoint("worker"), make_endpoint("sender")
    todo = make_todo(on=worker, requester=sender)
    transitions.claim_next(Actor.agent(worker), require_fence=True)

    closed = transitions.cancel(Actor.agent(sender), todo.id)

    assert closed.todo.state == "canceled"
    assert outcomes(todo.id) == [("canceled", "canceled")]
    assert events_of(todo.id) == ["cancel"]


def test_another_endpoint_cannot_cancel(make_endpoint, make_todo):
    worker, stranger = make_endpoint("worker"), make_endpoint("stranger")
    todo = make_todo(on=worker)
    with pytest.raises(NotFound):
        transitions.cancel(Actor.agent(stranger), todo.id)
    assert Todo.objects.get(pk=todo.id).state == "pending"


@pytest.mark.parametrize(
    ("verb", "state", "outcome", "disposition"),
    [
        ("release", "pending", "released", "requeued"),
        ("cancel", "canceled", "canceled", "canceled"),
    ],
)
def test_human_close_of_an_agents_fenced_lease_is_recorded(
    verb, state, outcome, disposition, user, human, endpoint, make_todo
):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint), require_fence=True)

    closed = getattr(transitions, verb)(human, todo.id)

    assert closed.todo.state == state
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.outcome, attempt.disposition) == (outcome, disposition)
    assert attempt.ended_by_id == user.pk and events_of(todo.id) == [verb]


def test_human_cannot_complete_an_agents_lease(human, endpoint, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    with pytest.raises(Conflict):
        transitions.complete(human, todo.id)
    assert Todo.objects.get(pk=todo.id).state == "claimed"
