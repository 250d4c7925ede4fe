"""The doorbell rings (pg_notify at commit) whenever a todo becomes claimable, and the
process-wide listener wakes waiters."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from agents.doorbell import Doorbell
from queues import endpoints, transitions
from queues.sql import DOORBELL_CHANNEL
from queues.transitions import Actor
from tests.queues.helpers import lapse_lease, make_retry_due

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def rings():
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(key, None)
    listener = psycopg.connect(**params, autocommit=True)
    listener.execute(f"LISTEN {DOORBELL_CHANNEL}")

    def heard() -> list[int]:
        return [int(n.payload) for n in listener.notifies(timeout=0.5)]

    yield heard
    listener.close()


def test_every_way_a_todo_becomes_claimable_rings(team, user, rings):
    endpoint, _ = endpoints.vend(team, "bell")
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(endpoint=endpoint, title="t", max_attempts=10)
    assert rings() == [endpoint.pk]  # created

    transitions.claim_next(endpoint=endpoint)
    assert rings() == []  # a claim makes nothing claimable
    transitions.release(agent, todo.id)  # the holder's fast path
    assert rings() == [endpoint.pk]

    transitions.claim_next(endpoint=endpoint)
    lapse_lease(todo.id)
    transitions.reap_lapsed()
    assert rings() == [endpoint.pk]

    transitions.claim_next(endpoint=endpoint)
    transitions.fail(agent, todo.id)
    assert rings() == []  # waiting to retry is not claimable yet
    make_retry_due(todo.id)
    transitions.requeue_due_retries()
    assert rings() == [endpoint.pk]

    transitions.claim_next(endpoint=endpoint)
    transitions.fail(agent, todo.id)
    transitions.retry_now(user, todo.id)
    assert rings() == [endpoint.pk]

    transitions.claim_next(endpoint=endpoint)
    transitions.complete(agent, todo.id)
    assert rings() == []
    transitions.rerun(user, todo.id)
    assert rings() == [endpoint.pk]


def test_the_listener_wakes_a_waiter_of_that_endpoint_only(team):
    import threading

    bell = Doorbell()
    try:
        endpoint, _ = endpoints.vend(team, "woken")
        other, _ = endpoints.vend(team, "asleep")
        mine, theirs = bell.ticket(endpoint.pk), bell.ticket(other.pk)
        assert bell.listening.wait(10)
        mine, theirs = bell.ticket(endpoint.pk), bell.ticket(other.pk)
        results = {}

        def wait(name, endpoint_id, ticket):
            results[name] = bell.wait(endpoint_id, ticket, timeout=3)

        waiters = [
            threading.Thread(target=wait, args=("mine", endpoint.pk, mine)),
            threading.Thread(target=wait, args=("theirs", other.pk, theirs)),
        ]
        for w in waiters:
            w.start()
        transitions.create_todo(endpoint=endpoint, title="for the first")
        for w in waiters:
            w.join(10)
        assert results == {"mine": True, "theirs": False}
    finally:
        bell.stop()
