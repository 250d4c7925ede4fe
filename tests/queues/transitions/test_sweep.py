"""The sweeper's transitions: reaping lapsed leases (queues/transitions/sweep.py)."""

from __future__ import annotations

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    lapse_lease,
    outcomes,
)


def test_reap_below_cap_requeues_and_marks_the_attempt_died(endpoint, make_todo):
    todo = make_todo(max_attempts=2)
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)

    [reaped] = transitions.reap_lapsed()

    assert reaped.todo.state == "pending" and reaped.todo.failures == 1
    assert reaped.attempt.outcome == "reaped" and reaped.attempt.died
    assert outcomes(todo.id) == [("reaped", "requeued")]


def test_reap_at_cap_dead_letters(endpoint, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)

    [reaped] = transitions.reap_lapsed()

    assert reaped.todo.state == "dead" and reaped.todo.dead_letter_reason == "reaped"
    assert outcomes(todo.id) == [("reaped", "dead_lettered")]


def test_reap_leaves_live_leases_alone(endpoint, make_todo):
    make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    assert transitions.reap_lapsed() == []
