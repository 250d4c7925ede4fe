"""heartbeat and a person's Extend (queues/transitions/hold.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from switchboard.queues import transitions
from switchboard.queues.errors import Conflict, NotFound
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    events_of,
    lapse_lease,
)


def test_heartbeat_extends_and_works_past_expiry_while_open(endpoint, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim_next(Actor.agent(endpoint), lease_seconds=30)
    lapse_lease(todo.id)

    lease = transitions.heartbeat(agent, todo.id, attempt_seq=claim.attempt_seq, lease_seconds=600)

    row = Todo.objects.get(pk=todo.id)
    assert row.lease_expires_at == lease.lease_expires_at
    assert lease.attempt_seq == claim.attempt_seq
    assert row.lease_expires_at - row.last_heartbeat_at == timedelta(seconds=600)
    # closing copies the live lease onto the attempt
    transitions.complete(agent, todo.id)
    attempt = attempts_of(todo.id)[0]
    assert attempt.last_heartbeat_at == row.last_heartbeat_at
    assert attempt.lease_expires_at == row.lease_expires_at


def test_human_extend_keeps_their_own_lease_alive_and_is_audited(user, human, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim(human, todo.id)

    lease = transitions.heartbeat(human, todo.id, lease_seconds=3600)

    assert lease.attempt_seq == claim.attempt_seq
    assert lease.lease_expires_at > claim.todo.lease_expires_at
    assert events_of(todo.id) == ["claim", "extend"]
    with pytest.raises(Conflict):  # the agent does not hold the human's lease
        transitions.heartbeat(agent, todo.id)


def test_a_human_cannot_extend_someone_elses_lease_or_a_foreign_todo(
    make_user, human, endpoint, make_todo
):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    with pytest.raises(Conflict):
        transitions.heartbeat(human, todo.id)
    outsider = Actor.human(make_user("mallory"))
    with pytest.raises(NotFound):
        transitions.heartbeat(outsider, todo.id)
