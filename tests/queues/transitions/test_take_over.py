"""Take over (queues/transitions/by_hand.py): a person takes a todo from the agent holding it
in one transaction. The agent's attempt ends (released, ended by the person, its fence
passed), the person's owner attempt opens, the todo is never claimable in between, and the
agent's late calls are conflicts."""

from __future__ import annotations

import threading

import pytest
from django.db import connections, transaction

from switchboard.queues import db, transitions
from switchboard.queues.errors import Conflict, NotFound
from switchboard.queues.models import Delivery, Endpoint, Todo, TodoAttempt, TodoEvent
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    events_of,
    lapse_lease,
    lock_waiters,
    open_attempts,
    wait_for,
)


def test_the_agents_try_ends_taken_over_and_the_persons_opens(user, endpoint, agent, make_todo):
    todo = make_todo(max_attempts=3)
    claimed = transitions.claim(agent, todo.id, require_fence=True, claimant="buildbox/1")

    taken = transitions.take_over(Actor.human(user), todo.id, attempt_seq=claimed.attempt_seq)

    assert taken.attempt_seq == 2 and taken.todo.state == "claimed"
    assert taken.todo.owner == f"user:{user.pk}" and taken.todo.failures == 0
    theirs, mine = attempts_of(todo.id)
    assert (theirs.outcome, theirs.disposition, theirs.ended_by_id) == (
        "taken_over",
        "taken_over",
        user.pk,
    )
    assert theirs.ended_at == mine.claimed_at  # one statement: no moment in between
    assert (mine.claimer_kind, mine.user_id, mine.endpoint_id, mine.ended_at) == (
        "owner",
        user.pk,
        None,
        None,
    )
    assert not mine.lease_token_hash and mine.attempt == 2
    assert (mine.lease_expires_at - mine.claimed_at).total_seconds() == 1800  # a person's lease
    [row] = TodoEvent.objects.filter(todo_id=todo.id)
    assert (row.kind, row.actor_user_id) == ("take_over", user.pk)
    assert row.detail == {"attempt_seq": 2, "from_attempt_seq": 1, "from_endpoint": "agent-a"}


def test_the_agents_late_calls_are_conflicts_and_the_person_finishes(
    user, endpoint, agent, make_todo
):
    fenced = make_todo("fenced")
    plain = make_todo("plain")
    lease = transitions.claim(agent, fenced.id, require_fence=True).lease_token
    transitions.claim(agent, plain.id)
    transitions.take_over(Actor.human(user), fenced.id)
    transitions.take_over(Actor.human(user), plain.id)

    for todo_id, token in ((fenced.id, lease), (plain.id, None)):
        with pytest.raises(Conflict):
            transitions.heartbeat(agent, todo_id, attempt_seq=1, lease_token=token)
        with pytest.raises(Conflict):
            transitions.complete(agent, todo_id, attempt_seq=1, lease_token=token)
        with pytest.raises(Conflict):
            transitions.fail(agent, todo_id, lease_token=token)
        assert open_attempts(todo_id) == 1
    person = Actor.human(user)
    done = transitions.complete(person, plain.id, summary="finished by hand")
    assert done.todo.state == "done" and done.attempt.claimer_kind == "owner"


def test_only_an_agents_open_lease_is_taken(user, make_user, endpoint, agent, make_todo):
    waiting = make_todo("pending")
    with pytest.raises(Conflict):
        transitions.take_over(Actor.human(user), waiting.id)
    by_hand = make_todo("by hand")
    transitions.claim(Actor.human(user), by_hand.id)
    with pytest.raises(Conflict):
        transitions.take_over(Actor.human(user), by_hand.id)
    moved = make_todo("moved on")
    transitions.claim(agent, moved.id)
    transitions.release(agent, moved.id)
    transitions.claim(agent, moved.id)
    with pytest.raises(Conflict):  # the try the person saw (seq 1) has ended
        transitions.take_over(Actor.human(user), moved.id, attempt_seq=1)
    stranger = make_user("mallory")
    with pytest.raises(NotFound):  # another team's todo: unknown and foreign alike
        transitions.take_over(Actor.human(stranger), moved.id)
    assert events_of(moved.id) == [] and open_attempts(moved.id) == 1


def test_a_take_over_makes_nothing_claimable_and_rings_nothing(user, endpoint, agent, make_todo):
    Endpoint.objects.filter(pk=endpoint.pk).update(notify_url="https://hooks.example.com/sb")
    todo = make_todo()
    Delivery.objects.all().delete()  # the creation's doorbell
    transitions.claim(agent, todo.id)
    lapse_lease(todo.id)  # even a lapsed lease goes to the person, not to the queue

    transitions.take_over(Actor.human(user), todo.id)

    assert not Delivery.objects.filter(kind="doorbell").exists()  # never pending
    assert transitions.claim_next(Actor.agent(endpoint)) is None


@pytest.mark.django_db(transaction=True)
def test_a_racing_agent_claim_loses(team, user, make_endpoint):
    endpoint = make_endpoint("racer")
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="contested", max_attempts=5)
    transitions.claim(agent, todo.id)
    lapse_lease(todo.id)  # claimable by a takeover claim: the race is real
    results: dict = {}

    def agent_claims() -> None:
        try:
            results["claim_next"] = transitions.claim_next(Actor.agent(endpoint))  # skips our lock
            try:
                transitions.claim(agent, todo.id)  # waits for our lock, then re-checks
                results["claim"] = "claimed"
            except Conflict:
                results["claim"] = "conflict"
        finally:
            connections.close_all()

    with transaction.atomic():
        taken = db.run(transitions.take_over.plan(Actor.human(user), todo.id))
        racer = threading.Thread(target=agent_claims)
        racer.start()
        _until_a_lock_waiter()
        assert racer.is_alive()

    racer.join(10)
    assert results == {"claim_next": None, "claim": "conflict"}
    row = Todo.objects.get(pk=todo.id)
    assert (row.state, row.owner, row.last_attempt_seq) == ("claimed", f"user:{user.pk}", 2)
    assert open_attempts(todo.id) == 1
    assert TodoAttempt.objects.get(todo_id=todo.id, ended_at__isnull=True).seq == taken.attempt_seq


def _until_a_lock_waiter() -> None:
    assert wait_for(lambda: lock_waiters() > 0, seconds=10), (
        "the racing claim never waited for the take over's lock"
    )


def test_the_agents_next_call_is_told_who_took_it_over(user, agent, make_todo):
    """After a take-over the agent's heartbeat, complete, fail or release is a conflict that
    says a person took the todo over, and who (it was a bare 'does not hold' before)."""
    todo = make_todo()
    claimed = transitions.claim(agent, todo.id)
    transitions.take_over(Actor.human(user), todo.id)
    calls = (
        lambda: transitions.heartbeat(agent, todo.id, attempt_seq=claimed.attempt_seq),
        lambda: transitions.complete(agent, todo.id, attempt_seq=claimed.attempt_seq),
        lambda: transitions.fail(agent, todo.id),
        lambda: transitions.release(agent, todo.id, attempt_seq=claimed.attempt_seq),
    )
    for call in calls:
        with pytest.raises(Conflict) as refused:
            call()
        said = refused.value
        assert f"{user.username} took this todo over" in said.message, said.message
        assert said.extra == {"taken_over_by": user.username}
