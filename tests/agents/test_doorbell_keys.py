"""A freed key, or a freed claim under max_claimed, rings the doorbell only while a long-poll
of its endpoint may be waiting (``endpoints.waited_at``, docs/ledger.md "Keys"), and an end
and a long-poll's mark in either order lose no wake-up. Not in the serial lane
(tests/conftest.py): no time bound is promised here, only an order, which each test holds
open on purpose."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from switchboard.queues import bounds, db, endpoints, schema, sql, transitions
from switchboard.queues.models import Endpoint, Todo
from switchboard.queues.transitions import Actor
from tests.queues.helpers import backdate, lock_waiters, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


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


def test_a_freed_claim_under_max_claimed_rings_only_while_a_long_poll_may_be_waiting(
    team, user, rings
):
    """An agent's close and a person's close alike; an endpoint without max_claimed runs no
    statement for it."""
    capped, _ = endpoints.vend(team, "capped")
    Endpoint.objects.filter(pk=capped.pk).update(max_claimed=1)
    capped.refresh_from_db()
    agent = Actor.agent(capped)
    for n in range(4):
        transitions.create_todo(agent, title=f"t{n}")
    rings()  # the creates'

    def end_one(person=None) -> list[int]:
        claim = transitions.claim_next(agent)
        if person is None:
            transitions.complete(agent, claim.todo.id)
        else:
            transitions.cancel(person, claim.todo.id)
        return rings()

    assert end_one() == []  # no long-poll of it has waited
    db.run(endpoints.mark_waiting_plan(capped.pk))  # a long-poll about to wait
    assert end_one() == [capped.pk]
    assert end_one(Actor.human(user)) == [capped.pk]
    sender, _ = endpoints.vend(team, "sender")  # a requester's cancel, from an uncapped endpoint
    sent, _ = transitions.create_todo(
        Actor.agent(sender), endpoint=capped, title="sent", priority=5
    )
    rings()
    assert transitions.claim_next(agent).todo.id == sent.id
    transitions.cancel(Actor.agent(sender), sent.id)
    assert rings() == [capped.pk]
    backdate(
        "UPDATE endpoints SET waited_at = waited_at - make_interval(secs => %s) WHERE id = %s",
        [bounds.WAITED_WINDOW_SECONDS + 1, capped.pk],
    )
    assert end_one() == []  # that wait has ended

    free, _ = endpoints.vend(team, "uncapped")
    other = Actor.agent(free)
    made, _ = transitions.create_todo(other, title="free")
    db.run(endpoints.mark_waiting_plan(free.pk))
    rings()
    transitions.claim_next(other)
    with CaptureQueriesContext(connection) as ran:
        transitions.complete(other, made.id)
    ring = " ".join(sql.RING_IF_WAITING.native.split()[:4])  # its SELECT pg_notify(… e.id…
    assert not any(ring in " ".join(q["sql"].split()) for q in ran)
    assert rings() == []


def test_a_close_under_max_claimed_stands_and_answers_when_its_ring_fails(team):
    """The ring runs after the close committed: a failure of it (here the column it reads gone
    for the moment) leaves the close done and answered, not an error for a close that stood."""
    capped, _ = endpoints.vend(team, "capped-ring-fails")
    Endpoint.objects.filter(pk=capped.pk).update(max_claimed=1)
    capped.refresh_from_db()
    agent = Actor.agent(capped)
    made, _ = transitions.create_todo(agent, title="t")
    transitions.claim_next(agent)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE endpoints RENAME COLUMN waited_at TO waited_at_gone")
    try:
        closed = transitions.complete(agent, made.id)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE endpoints RENAME COLUMN waited_at_gone TO waited_at")
    assert closed.todo.state == "done" and not closed.replayed
    assert Todo.objects.get(pk=made.id).state == "done"


def test_the_rings_window_outlasts_a_marks_age_and_a_whole_wait():
    """The trigger's window in SQL is the one bounds names, and it covers a long-poll that
    relied on a mark as old as WAITED_REFRESH_SECONDS and then waited as long as it may."""
    for text in (schema.function("switchboard_waits_follow"), sql.RING_IF_WAITING.text):
        assert f"interval '{bounds.WAITED_WINDOW_SECONDS} seconds'" in text
    assert bounds.WAITED_REFRESH_SECONDS + bounds.WAIT_SECONDS_MAX < bounds.WAITED_WINDOW_SECONDS


def _in_thread(fn) -> threading.Thread:
    def run() -> None:
        try:
            fn()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


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
    assert wait_for(lambda: lock_waiters() == 1, seconds=10)
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
    assert wait_for(lambda: lock_waiters() == 1, seconds=10)
    go.set()
    marker.join(10)
    ender.join(10)
    assert not ender.is_alive() and not marker.is_alive()
    assert Todo.objects.get(pk=second.id).state == "done"
    assert rings() == [endpoint.pk]
