"""claim and claim_next: what a claim opens, takes over, and refuses (queues/transitions/claim.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from switchboard.queues import transitions
from switchboard.queues.errors import Conflict
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    events_of,
    lapse_lease,
    open_attempts,
    outcomes,
)


def test_claim_opens_an_attempt_and_leases_by_the_database_clock(endpoint, make_todo):
    todo = make_todo()
    assert Todo.objects.get(pk=todo.id).state == "pending"

    claim = transitions.claim_next(Actor.agent(endpoint), lease_seconds=120, claimant="run-1")

    assert claim.todo.state == "claimed" and claim.todo.attempt == 1
    assert claim.todo.owner == "agent:agent-a"
    assert claim.todo.lease_expires_at - claim.todo.claimed_at == timedelta(seconds=120)
    [attempt] = attempts_of(todo.id)
    assert attempt.seq == 1 and attempt.round == 1 and attempt.attempt == 1
    assert attempt.claimer_kind == "endpoint" and attempt.endpoint_id == endpoint.pk
    assert attempt.claimant == "run-1" and attempt.ended_at is None
    assert attempt.outcome == "" and attempt.disposition == ""


def test_due_retry_is_claimable_before_the_sweeper_runs(settings, endpoint, agent, make_todo):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    assert transitions.fail(agent, todo.id).todo.state == "retry_wait"

    again = transitions.claim_next(Actor.agent(endpoint))

    assert again.todo.id == todo.id and again.attempt_seq == 2 and again.todo.attempt == 2


def test_takeover_of_a_lapsed_lease_closes_it_as_lease_expired(endpoint, make_todo):
    todo = make_todo(max_attempts=3)
    first = transitions.claim_next(Actor.agent(endpoint), claimant="worker-1")
    lapse_lease(todo.id)

    second = transitions.claim_next(Actor.agent(endpoint), claimant="worker-2")

    assert second.todo.id == todo.id and second.attempt_seq == 2
    assert second.todo.failures == 1 and second.todo.attempt == 2
    assert outcomes(todo.id) == [("lease_expired", "requeued"), ("", "")]
    [prior] = second.prior_attempts
    assert prior.seq == first.attempt_seq and prior.died and prior.outcome == "lease_expired"
    assert prior.claimant == "worker-1"
    assert open_attempts(todo.id) == 1


def test_takeover_at_cap_dead_letters_and_claim_next_moves_on(endpoint, make_todo):
    doomed = make_todo("doomed", max_attempts=1, priority=5)
    other = make_todo("other")
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(doomed.id)

    claim = transitions.claim_next(Actor.agent(endpoint))

    assert claim.todo.id == other.id
    dead = Todo.objects.get(pk=doomed.id)
    assert dead.state == "dead" and dead.dead_letter_reason == "lease_expired"
    assert outcomes(doomed.id) == [("lease_expired", "dead_lettered")]


def test_takeover_at_cap_by_id_is_conflict_and_the_dead_letter_stays(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)

    with pytest.raises(Conflict):
        transitions.claim(agent, todo.id)

    assert Todo.objects.get(pk=todo.id).state == "dead"
    assert outcomes(todo.id) == [("lease_expired", "dead_lettered")]


def test_human_claim_is_an_owner_attempt(user, human, endpoint, make_todo):
    todo = make_todo()

    claim = transitions.claim(human, todo.id)

    assert claim.todo.owner == f"user:{user.pk}"
    assert claim.todo.lease_expires_at - claim.todo.claimed_at == timedelta(seconds=1800)
    [attempt] = attempts_of(todo.id)
    assert attempt.claimer_kind == "owner" and attempt.user_id == user.pk
    assert attempt.endpoint_id is None
    closed = transitions.complete(human, todo.id, summary="did it by hand", result={"x": 1})
    assert closed.todo.state == "done"
    assert events_of(todo.id) == ["claim", "complete"]


def test_human_claim_does_not_spend_the_budget_and_agents_cannot_close_it(
    human, endpoint, agent, make_todo
):
    todo = make_todo(max_attempts=1)
    transitions.claim(human, todo.id)
    with pytest.raises(Conflict):
        transitions.complete(agent, todo.id)
    transitions.release(human, todo.id)
    assert Todo.objects.get(pk=todo.id).failures == 0


def test_deleting_a_user_keeps_their_owner_attempts_in_the_history(make_user, team, make_todo):
    from switchboard.queues import teams
    from tests.queues.helpers import get_todo_for_user

    bob = make_user("bob")
    teams.add_member(team, bob)
    todo = make_todo()
    transitions.claim(Actor.human(bob), todo.id)
    transitions.complete(Actor.human(bob), todo.id, summary="by hand")
    bob_id = bob.pk
    bob.delete()
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.claimer_kind, attempt.user_id, attempt.owner) == (
        "owner",
        None,
        f"user:{bob_id}",
    )
    seen = get_todo_for_user(team.memberships.get().user, todo.id).as_api()
    assert seen["todo"]["attempts"][0]["user"] is None
