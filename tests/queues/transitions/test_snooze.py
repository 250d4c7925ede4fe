"""Snooze: ``release`` with a wake time (``not_before`` or ``delay_seconds``). An agent waiting
on something outside gives the todo back for later without spending a try; its attempt closes
released, requeued, with the wake time, which the next claimer and the drawer are shown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from switchboard.queues import transitions
from switchboard.queues.errors import Invalid
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.agents.api_helpers import post
from tests.queues.helpers import backdate, events_of, get_todo_for_user


def _wake_now(todo_id: int) -> None:
    """The snooze is over (the database's clock decides, so its time is moved back)."""
    backdate(
        "UPDATE todos SET not_before = statement_timestamp() - interval '1 second'"
        " WHERE id = %s AND state = 'pending'",
        [todo_id],
    )


def test_a_snooze_gives_the_todo_back_for_later_without_spending_a_try(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=2)
    transitions.claim_next(agent)

    closed = transitions.release(agent, todo.id, delay_seconds=600, summary="waiting on CI")

    assert closed.todo.state == "pending" and closed.todo.failures == 0
    assert (closed.attempt.outcome, closed.attempt.disposition) == ("released", "requeued")
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        (now,) = cursor.fetchone()
    wake = closed.attempt.not_before
    assert closed.todo.not_before == wake
    assert timedelta(seconds=590) < wake - now <= timedelta(seconds=600)
    assert transitions.claim_next(agent) is None  # not before its wake time

    _wake_now(todo.id)
    again = transitions.claim_next(agent)

    assert again.todo.id == todo.id and again.todo.attempt == 2 and again.todo.failures == 0
    [told] = again.as_api()["prior_attempts"]  # the next claimer is told of the snooze
    assert told["outcome"] == "released" and told["not_before"] == wake.isoformat()
    assert told["summary"] == "waiting on CI"


def test_a_snooze_to_an_instant_and_the_drawer_says_until_when(
    endpoint, agent, make_todo, user, logged_in
):
    todo = make_todo()
    transitions.claim_next(agent)
    # Within the 30 days a wake time may reach (bounds.SNOOZE_SECONDS_MAX).
    wake = (datetime.now(UTC) + timedelta(days=10)).replace(microsecond=0)

    transitions.release(agent, todo.id, not_before=wake)

    assert Todo.objects.get(pk=todo.id).not_before == wake
    assert TodoAttempt.objects.get(todo_id=todo.id).not_before == wake
    detail = get_todo_for_user(user, todo.id)
    assert detail.attempts[0].not_before == wake
    assert transitions.claim_next(agent) is None
    page = logged_in.get(f"/todos/{todo.id}/").content.decode()
    assert "Snoozed until" in page and f'datetime="{wake:%Y-%m-%dT%H:%M:%S}.000Z"' in page


def test_a_plain_release_has_no_wake_time(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(agent)
    closed = transitions.release(agent, todo.id)
    assert closed.attempt.not_before is None and closed.todo.not_before is None
    assert transitions.claim_next(agent).todo.id == todo.id


def test_a_person_snoozes_a_lease_as_they_release_it_and_it_is_audited(
    endpoint, agent, human, make_todo
):
    todo = make_todo()
    transitions.claim_next(agent, require_fence=True)  # a person passes the fence
    closed = transitions.release(human, todo.id, delay_seconds=60)
    assert closed.attempt.not_before is not None and closed.todo.state == "pending"
    assert events_of(todo.id) == ["release"]


@pytest.mark.parametrize(
    "arguments",
    [
        {"delay_seconds": 0},
        {"delay_seconds": -5},
        {"delay_seconds": 31 * 86_400},
        {"delay_seconds": True},
        {"delay_seconds": "soon"},
        {"not_before": datetime(2031, 1, 1)},  # noqa: DTZ001 -- naive: refused
        {"not_before": "tomorrow"},
        {"not_before": datetime(2031, 1, 1, tzinfo=UTC), "delay_seconds": 60},
        # Further than delay_seconds may reach (30 days): a year-9999 snooze was taken.
        {"not_before": datetime(9999, 12, 31, tzinfo=UTC)},
        # An id of its own: a time in the id differs between pytest-xdist's workers.
        pytest.param(
            {"not_before": datetime.now(UTC) + timedelta(days=31)}, id="not_before=in 31 days"
        ),
    ],
    ids=lambda a: ",".join(f"{k}={v}" for k, v in a.items()),
)
def test_a_bad_wake_time_is_invalid_and_nothing_moves(endpoint, agent, make_todo, arguments):
    todo = make_todo()
    transitions.claim_next(agent)
    with pytest.raises(Invalid):
        transitions.release(agent, todo.id, **arguments)
    assert Todo.objects.get(pk=todo.id).state == "claimed"
    assert TodoAttempt.objects.get(todo_id=todo.id).ended_at is None


@pytest.mark.django_db(transaction=True)
def test_over_http_a_snooze_is_release_with_a_delay_and_bad_ones_are_400(live_server, vend):
    endpoint, token = vend("snoozer")
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="wait on a person")
    claimed = post(live_server.url, "claim_next", {}, token=token).json()
    ids = {"todo_id": todo.id, "attempt_seq": claimed["attempt_seq"]}

    for bad in ({"delay_seconds": 0}, {"not_before": "2031-01-01T00:00:00"}):
        refused = post(live_server.url, "release", {**ids, **bad}, token=token)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid"
    assert Todo.objects.get(pk=todo.id).state == "claimed"

    released = post(live_server.url, "release", {**ids, "delay_seconds": 3600}, token=token)
    assert released.status_code == 200, released.text
    assert released.json()["todo"]["not_before"] is not None
    nothing = post(live_server.url, "claim_next", {}, token=token).json()
    assert nothing["todo"] is None
    got = post(live_server.url, "get_todo", {"todo_id": todo.id}, token=token).json()
    assert got["todo"]["attempts"][0]["not_before"] == released.json()["todo"]["not_before"]
