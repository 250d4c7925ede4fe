"""The doorbell rings (pg_notify at commit) whenever a todo becomes claimable, and the
process-wide listener wakes waiters."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection, transaction

from switchboard.queues import bounds, db, endpoints, schema, transitions
from switchboard.queues.models import Endpoint, Todo
from switchboard.queues.sql import DOORBELL_CHANNEL
from switchboard.queues.transitions import Actor
from tests.queues.helpers import backdate, lapse_lease, make_retry_due

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


# --- A freed key rings while a long-poll may be waiting -----------------------------------


def _keyed(team, name: str, todos: int) -> tuple:
    """An endpoint with max_claimed_per_key 1, and ``todos`` todos of one key on it."""
    endpoint, _ = endpoints.vend(team, name)
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed_per_key=1)
    agent = Actor.agent(endpoint)
    made = [transitions.create_todo(agent, title=f"t{n}", key="repo")[0] for n in range(todos)]
    return endpoint, agent, made


def test_a_freed_key_rings_only_while_a_long_poll_of_its_endpoint_may_be_waiting(team, rings):
    endpoint, agent, _ = _keyed(team, "keyed", 4)
    rings()  # the creates'

    def end_one() -> list[int]:
        claim = transitions.claim_next(agent)
        transitions.complete(agent, claim.todo.id)
        return rings()

    assert end_one() == []  # no long-poll of it has waited: every end's commit stays its own
    db.run(endpoints.mark_waiting_plan(endpoint.pk))  # a long-poll about to wait
    assert end_one() == [endpoint.pk]
    backdate(
        "UPDATE endpoints SET waited_at = waited_at - make_interval(secs => %s) WHERE id = %s",
        [bounds.WAITED_WINDOW_SECONDS + 1, endpoint.pk],
    )
    assert end_one() == []  # that wait has ended, whatever it was


def test_the_rings_window_outlasts_a_marks_age_and_a_whole_wait():
    """The trigger's window in SQL is the one bounds names, and it covers a long-poll that
    relied on a mark as old as WAITED_REFRESH_SECONDS and then waited as long as it may."""
    text = schema.function("switchboard_waits_follow")
    assert f"interval '{bounds.WAITED_WINDOW_SECONDS} seconds'" in text
    assert bounds.WAITED_REFRESH_SECONDS + bounds.WAIT_SECONDS_MAX < bounds.WAITED_WINDOW_SECONDS


def _advisory_waits() -> int:
    """Advisory lock waits in this test's database (each xdist worker has its own)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database"
            " WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = current_database()"
        )
        return cursor.fetchone()[0]


def _in_thread(fn) -> threading.Thread:
    def run() -> None:
        try:
            fn()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "waited in vain"
        time.sleep(0.02)


def test_an_end_and_a_long_polls_mark_in_either_order_lose_no_wake_up(team, rings):
    """The race the mark closes: an end that read no mark must be seen by the long-poll's
    look after its mark, and an end after the mark must ring. Each order held open on
    purpose: the second waits on the advisory lock until the first commits."""
    endpoint, agent, (first, second, _) = _keyed(team, "raced", 3)
    rings()

    def mark() -> None:
        db.run(endpoints.mark_waiting_plan(endpoint.pk))

    held = transitions.claim_next(agent)
    assert held.todo.id == first.id

    # The end first: it read no mark, so rang nothing; the mark waits for its commit.
    inside, go = threading.Event(), threading.Event()

    def end_held_open() -> None:
        with transaction.atomic():
            transitions.complete(agent, first.id)
            inside.set()
            go.wait(10)

    ender = _in_thread(end_held_open)
    assert inside.wait(10)
    marker = _in_thread(mark)
    _until(lambda: _advisory_waits() == 1)
    go.set()
    ender.join(10)
    marker.join(10)
    assert not ender.is_alive() and not marker.is_alive()
    assert Endpoint.objects.get(pk=endpoint.pk).waited_at is not None  # the mark committed
    assert rings() == []
    assert transitions.claim_next(agent).todo.id == second.id  # the look after the mark

    # The mark first: the end waits for it, reads it (a snapshot after the lock) and rings.
    backdate("UPDATE endpoints SET waited_at = NULL WHERE id = %s", [endpoint.pk])
    inside, go = threading.Event(), threading.Event()

    def mark_held_open() -> None:
        with transaction.atomic():
            mark()
            inside.set()
            go.wait(10)

    marker = _in_thread(mark_held_open)
    assert inside.wait(10)
    ender = _in_thread(lambda: transitions.complete(agent, second.id))
    _until(lambda: _advisory_waits() == 1)
    go.set()
    marker.join(10)
    ender.join(10)
    assert not ender.is_alive() and not marker.is_alive()
    assert Todo.objects.get(pk=second.id).state == "done"
    assert rings() == [endpoint.pk]


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
