"""Pausing an endpoint (queues/endpoints.py pause, resume): its claim and claim_next claim
nothing while everything else works; holders keep their leases; audited; resume rings."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from switchboard.queues import endpoints, transitions
from switchboard.queues.errors import Conflict, RateLimited
from switchboard.queues.models import Endpoint, Todo, TodoAttempt, TodoEvent
from switchboard.queues.sql import DOORBELL_CHANNEL
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease


def _ledger():
    return (
        sorted(Todo.objects.values_list("id", "state", "last_attempt_seq")),
        TodoAttempt.objects.count(),
    )


def test_a_paused_endpoint_claims_nothing_by_either_verb(user, endpoint, agent, make_todo):
    todo = make_todo()
    held = transitions.claim(agent, make_todo("lapsed").id)
    lapse_lease(held.todo.id)  # claim_next would take a lapsed lease over: not while paused
    assert endpoints.pause(endpoint, user=user) is True
    before = _ledger()

    assert transitions.claim_next(Actor.agent(endpoint)) is None
    assert transitions.claim(agent, todo.id) is None
    assert transitions.claim(agent, 999_999) is None  # nothing is looked up at all
    assert _ledger() == before

    assert endpoints.resume(endpoint, user=user) is True
    assert transitions.claim(agent, todo.id).todo.id == todo.id
    assert transitions.claim_next(Actor.agent(endpoint)).todo.id == held.todo.id


def test_holders_keep_working_and_everything_else_works(user, endpoint, agent, make_todo):
    first, second, third = make_todo("one"), make_todo("two"), make_todo("three")
    transitions.claim(agent, first.id)
    transitions.claim(agent, second.id)
    endpoints.pause(endpoint, user=user)

    assert transitions.heartbeat(agent, first.id).attempt_seq == 1
    assert transitions.complete(agent, first.id, result={"ok": True}).todo.state == "done"
    assert transitions.fail(agent, second.id).todo.state == "retry_wait"
    made, created = transitions.create_todo(Actor.agent(endpoint), title="while paused")
    assert created and made.state == "pending"
    assert transitions.cancel(agent, third.id).todo.state == "canceled"
    # A person may still claim by hand: a pause holds back the endpoint's agents only.
    by_hand = transitions.claim(Actor.human(user), made.id)
    assert by_hand is not None and by_hand.todo.owner == f"user:{user.pk}"
    transitions.release(Actor.human(user), made.id)
    # The sweeper still reaps and requeues.
    transitions.claim(Actor.human(user), made.id)
    lapse_lease(made.id)
    assert [c.todo.id for c in transitions.reap_lapsed()] == [made.id]


def test_a_pause_charges_no_admission_and_leaves_the_limit_as_it_was(
    settings, user, endpoint, agent, make_todo
):
    settings.SWITCHBOARD_CLAIMS_PER_MINUTE = 1
    todos = [make_todo(f"t{n}") for n in range(3)]
    endpoints.pause(endpoint, user=user)
    for _ in range(5):
        assert transitions.claim_next(Actor.agent(endpoint)) is None
    assert Endpoint.objects.get(pk=endpoint.pk).admission_claims == 0
    endpoints.resume(endpoint, user=user)

    assert transitions.claim(agent, todos[0].id) is not None
    with pytest.raises(RateLimited):
        transitions.claim(agent, todos[1].id)


def test_pause_and_resume_are_audited_once_and_say_when_nothing_changed(user, endpoint):
    assert endpoints.pause(endpoint, user=user) is True
    assert endpoint.paused and endpoint.paused_by == user
    assert endpoints.pause(endpoint, user=user) is False
    assert endpoints.resume(endpoint, user=user) is True
    assert not endpoint.paused and endpoint.paused_by is None
    assert endpoints.resume(endpoint, user=user) is False
    rows = list(
        TodoEvent.objects.filter(kind__in=["pause", "resume"])
        .order_by("id")
        .values_list("kind", "actor_user", "team", "todo", "detail")
    )
    assert rows == [
        ("pause", user.pk, endpoint.team_id, None, {"agent_id": "agent-a"}),
        ("resume", user.pk, endpoint.team_id, None, {"agent_id": "agent-a"}),
    ]


def test_a_revoked_endpoint_is_not_paused(user, endpoint):
    transitions.revoke_endpoint(None, endpoint)
    endpoint.refresh_from_db()
    with pytest.raises(Conflict):
        endpoints.pause(endpoint, user=user)
    assert Endpoint.objects.get(pk=endpoint.pk).paused_at is None


@pytest.mark.django_db(transaction=True)
def test_resume_rings_the_doorbell_and_pause_does_not(team, user):
    endpoint, _ = endpoints.vend(team, "bell")
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(key, None)
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {DOORBELL_CHANNEL}")

        def heard() -> list[int]:
            return [int(n.payload) for n in listener.notifies(timeout=0.3)]

        endpoints.pause(endpoint, user=user)
        assert heard() == []
        endpoints.resume(endpoint, user=user)
        assert heard() == [endpoint.pk]
        endpoints.resume(endpoint, user=user)  # not paused: nothing changes, nothing rings
        assert heard() == []


def test_a_long_polls_recheck_sees_the_pause_and_the_resume(user, endpoint):
    """What a waiter does on each wake (agents/waiting.py): the re-check brings the
    endpoint's pause up to date, so the claim after it goes by what is true now."""
    from switchboard.queues import db

    seen = Endpoint.objects.get(pk=endpoint.pk)  # as the request authenticated it
    endpoints.pause(endpoint, user=user)
    assert not seen.paused
    db.run(endpoints.still_valid_plan(seen))
    assert seen.paused
    endpoints.resume(endpoint, user=user)
    db.run(endpoints.still_valid_plan(seen))
    assert not seen.paused
