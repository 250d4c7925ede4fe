"""Revoking an endpoint (queues/transitions/revoke.py)."""

from __future__ import annotations

import pytest

from switchboard.queues import transitions
from switchboard.queues.errors import Unauthorized
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    events_of,
    outcomes,
)


def test_revoking_an_endpoint_dead_letters_its_live_todos(user, endpoint, agent, make_todo):
    held, waiting, done = make_todo("held"), make_todo("waiting"), make_todo("done")
    transitions.claim(agent, done.id)
    transitions.complete(agent, done.id)
    transitions.claim(agent, held.id)

    assert transitions.revoke_endpoint(Actor.human(user), endpoint) == 2

    assert Todo.objects.get(pk=held.id).state == "dead"
    assert Todo.objects.get(pk=held.id).dead_letter_reason == "revoked"
    assert outcomes(held.id) == [("revoked", "dead_lettered")]
    assert Todo.objects.get(pk=waiting.id).dead_letter_reason == "revoked"
    assert attempts_of(waiting.id) == [] and events_of(waiting.id) == ["revoke_dead_letter"]
    assert Todo.objects.get(pk=done.id).state == "done"
    with pytest.raises(Unauthorized):
        transitions.claim_next(Actor.agent(endpoint))
