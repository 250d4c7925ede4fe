"""The doorbell rings (pg_notify at commit) whenever a todo becomes claimable, and the
process-wide listener wakes waiters."""

from __future__ import annotations

import pytest
from django.db import connection

from switchboard.queues import endpoints, transitions
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease, make_retry_due

pytestmark = pytest.mark.django_db(transaction=True)


def test_every_way_a_todo_becomes_claimable_rings(team, user, rings):
    endpoint, _ = endpoints.vend(team, "bell")
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="t", max_attempts=10)
    assert rings() == [endpoint.pk]  # created

    transitions.claim_next(Actor.agent(endpoint))
    assert rings() == []  # a claim makes nothing claimable
    transitions.release(agent, todo.id)  # the holder's fast path
    assert rings() == [endpoint.pk]

    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)
    transitions.reap_lapsed()
    assert rings() == [endpoint.pk]

    transitions.claim_next(Actor.agent(endpoint))
    transitions.fail(agent, todo.id)
    assert rings() == []  # waiting to retry is not claimable yet
    make_retry_due(todo.id)
    transitions.requeue_due_retries()
    assert rings() == [endpoint.pk]

    transitions.claim_next(Actor.agent(endpoint))
    transitions.fail(agent, todo.id)
    transitions.retry_now(Actor.human(user), todo.id)
    assert rings() == [endpoint.pk]

    transitions.claim_next(Actor.agent(endpoint))
    transitions.complete(agent, todo.id)
    assert rings() == []
    transitions.rerun(Actor.human(user), todo.id)
    assert rings() == [endpoint.pk]


def test_the_listener_wakes_a_waiter_of_that_endpoint_only(team):
    """The real LISTEN connection: a todo created on one endpoint wakes that endpoint's waiter
    and not another's."""
    import asyncio

    from switchboard.agents.doorbell import AsyncDoorbell
    from switchboard.queues.notify import Listener

    endpoint, _ = endpoints.vend(team, "woken")
    other, _ = endpoints.vend(team, "asleep")

    def create() -> None:  # in a thread of its own, whose connection is closed after
        try:
            transitions.create_todo(Actor.agent(endpoint), title="first")
        finally:
            connection.close()

    async def go() -> dict[str, bool]:
        listener = Listener()
        bell = AsyncDoorbell(listener)
        try:
            bell.ensure_listening()
            await asyncio.wait_for(bell.listening.wait(), 10)
            mine = asyncio.create_task(bell.wait(endpoint.pk, bell.ticket(endpoint.pk), 3))
            theirs = asyncio.create_task(bell.wait(other.pk, bell.ticket(other.pk), 3))
            await asyncio.sleep(0)
            await asyncio.to_thread(create)
            return {"mine": await mine, "theirs": await theirs}
        finally:
            await bell.stop()
            await listener.stop()

    assert asyncio.run(go()) == {"mine": True, "theirs": False}


# --- The asyncio doorbell: a ring wakes one waiter, the longest waiting --------------------


def _bell_scenario(body):
    """Run ``body(bell)`` on a fresh event loop with a doorbell whose LISTEN is not started
    (rings are made by hand here)."""
    import asyncio

    from switchboard.agents.doorbell import AsyncDoorbell
    from switchboard.queues.notify import Listener

    async def go():
        bell = AsyncDoorbell(Listener())
        bell.ensure_listening = lambda: None  # no LISTEN connection in this unit test
        return await body(bell)

    return asyncio.run(go())


def test_a_ring_wakes_exactly_one_waiter_the_newest():
    import asyncio

    async def body(bell):
        order = []

        async def waiter(n):
            woke = await bell.wait(7, bell.ticket(7), 2.0)
            order.append((n, woke))

        tasks = []
        for n in range(20):
            tasks.append(asyncio.create_task(waiter(n)))
            await asyncio.sleep(0)  # each starts waiting in turn
        await asyncio.sleep(0.05)
        bell.ring(7)
        await asyncio.sleep(0.05)
        woken_first = list(order)
        bell.ring(8)  # another endpoint's ring wakes none of these
        await asyncio.sleep(0.05)
        after_other = list(order)
        await asyncio.gather(*tasks)
        return woken_first, after_other, order

    woken_first, after_other, order = _bell_scenario(body)
    assert woken_first == [(19, True)]  # the newest: a ghost only ages (docs/deploy.md)
    assert after_other == woken_first
    assert sorted(n for n, woke in order if not woke) == list(range(19))  # timed out


def test_a_ring_is_kept_for_a_waiter_that_took_its_ticket_before_it():
    async def body(bell):
        ticket = bell.ticket(3)
        bell.ring(3)  # rang between the miss and the wait
        return await bell.wait(3, ticket, 2.0)

    assert _bell_scenario(body) is True


def test_pass_on_wakes_the_next_waiter_and_a_gone_waiter_passes_its_ring_on():
    import asyncio

    async def body(bell):
        gone = asyncio.get_running_loop().create_future()
        first = asyncio.create_task(bell.wait(5, bell.ticket(5), 2.0))
        await asyncio.sleep(0)
        newest = asyncio.create_task(bell.wait(5, bell.ticket(5), 2.0, gone=gone))
        await asyncio.sleep(0.01)
        gone.set_result(None)  # the newest one's client leaves...
        bell.ring(5)  # ...as the ring reaches it
        await asyncio.sleep(0.05)
        return first.done() and await first, await newest

    first_woke, _ = _bell_scenario(body)
    assert first_woke is True  # the ring went on to the one still there
