"""The sweeper against the real database: reaping, retries, retention, and two at once."""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest
from django.db import connection

from switchboard.queues import endpoints, sweeper, transitions
from switchboard.queues.models import Todo, TodoAttempt, TodoEvent
from switchboard.queues.sweeper import SweepReport
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    a_lapsed_lease,
    backdate,
    held_open,
    lapse_lease,
    make_retry_due,
    row_trigger,
    run_together,
    sweeper_running,
    wait_for,
)


@pytest.fixture(autouse=True)
def _folds_count_up_to_now(monkeypatch):
    """Retention deletes only what the metrics fold counted; here the fold takes every
    ending up to now (the product lags a second behind the clock)."""
    from switchboard.queues import counters

    monkeypatch.setattr(counters, "FOLD_LAG_SECONDS", 0.0)


def _claimed(make_todo, endpoint, title: str = "work", **kwargs):
    todo = make_todo(title, on=endpoint, **kwargs)
    claim = transitions.claim_next(Actor.agent(endpoint))
    assert claim is not None and claim.todo.id == todo.id
    return todo


def _ended_days_ago(todo_id: int, days: float) -> None:
    """Backdate a terminal todo's end (and its creation, so the row stays plausible)."""
    backdate(
        "UPDATE todos SET ended_at = statement_timestamp() - make_interval(secs => %s),"
        " created_at = statement_timestamp() - make_interval(secs => %s)"
        " WHERE id = %s AND state IN ('done', 'dead', 'canceled')",
        [days * 86400, days * 86400 + 60, todo_id],
    )


def _created_days_ago(todo_id: int, days: float) -> None:
    backdate(
        "UPDATE todos SET created_at = statement_timestamp() - make_interval(secs => %s)"
        " WHERE id = %s",
        [days * 86400, todo_id],
    )


def _done(make_todo, endpoint, agent, title: str = "finished"):
    todo = _claimed(make_todo, endpoint, title)
    transitions.complete(agent, todo.id, result={"ok": True})
    return todo


# ---------------------------------------------------------------------------------------
# Reaping and retries


def test_lapsed_lease_is_reaped_back_to_pending(endpoint, make_todo):
    todo = _claimed(make_todo, endpoint)
    live = _claimed(make_todo, endpoint, "still leased")
    lapse_lease(todo.id)

    report = sweeper.sweep_once()

    assert report == SweepReport(reaped=1)
    assert Todo.objects.get(pk=todo.id).state == "pending"
    assert Todo.objects.get(pk=live.id).state == "claimed"
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.outcome, attempt.disposition) == ("reaped", "requeued")


def test_lapsed_lease_on_the_last_attempt_is_dead_lettered(endpoint, make_todo):
    todo = _claimed(make_todo, endpoint, max_attempts=1)
    lapse_lease(todo.id)

    report = sweeper.sweep_once()

    assert (report.reaped, report.dead_lettered_by_reap) == (1, 1)
    row = Todo.objects.get(pk=todo.id)
    assert (row.state, row.dead_letter_reason) == ("dead", "reaped")


def test_reaping_repeats_batches_until_every_lapsed_lease_is_closed(endpoint, make_todo):
    todos = [_claimed(make_todo, endpoint, f"t{n}") for n in range(5)]
    for todo in todos:
        lapse_lease(todo.id)

    report = sweeper.sweep_once(reap_batch=2)

    assert report.reaped == 5
    assert set(Todo.objects.values_list("state", flat=True)) == {"pending"}


def test_due_retry_is_requeued_and_a_later_one_waits(endpoint, agent, make_todo):
    due = _claimed(make_todo, endpoint, "due")
    transitions.fail(agent, due.id, summary="flaky")
    later = _claimed(make_todo, endpoint, "later")
    transitions.fail(agent, later.id, summary="flaky")
    make_retry_due(due.id)
    # A retry_wait todo whose time has not come stays put: push it well into the future.
    Todo.objects.filter(pk=later.id).update(next_retry_at="2999-01-01T00:00:00Z")

    report = sweeper.sweep_once()

    assert report == SweepReport(requeued_retries=1)
    assert Todo.objects.get(pk=due.id).state == "pending"
    assert Todo.objects.get(pk=later.id).state == "retry_wait"


def test_an_idle_pass_reports_nothing(endpoint, make_todo):
    make_todo()
    assert sweeper.sweep_once() == SweepReport()


def test_each_pass_logs_one_line_with_the_counts(endpoint, make_todo, caplog):
    lapse_lease(_claimed(make_todo, endpoint).id)

    with caplog.at_level(logging.DEBUG, logger="switchboard.sweeper"):
        sweeper.sweep_once()
        sweeper.sweep_once()

    passes = [r for r in caplog.records if r.name == "switchboard.sweeper"]
    assert [r.levelno for r in passes] == [logging.INFO, logging.DEBUG]  # the idle pass is quiet
    assert passes[0].sweep == {
        "reaped": 1,
        "dead_lettered_by_reap": 0,
        "requeued_retries": 0,
        "unanswered": 0,
        "scheduled": 0,
        "released_dependents": 0,
        "deleted_by_age": 0,
        "deleted_by_cap": 0,
        "dead_lettered_revoked": 0,
        "delivered": 0,
    }
    assert "reaped=1" in passes[0].getMessage()


# ---------------------------------------------------------------------------------------
# Retention


def test_terminal_todo_older_than_retention_is_deleted_with_its_attempts(
    endpoint, agent, make_todo, settings
):
    settings.SWITCHBOARD_RETENTION_DAYS = 30
    old = _done(make_todo, endpoint, agent, "old")
    recent = _done(make_todo, endpoint, agent, "recent")
    _ended_days_ago(old.id, 31)
    _ended_days_ago(recent.id, 29)
    assert TodoAttempt.objects.filter(todo_id=old.id).count() == 1

    report = sweeper.sweep_once()

    assert report == SweepReport(deleted_by_age=1)
    assert not Todo.objects.filter(pk=old.id).exists()
    assert not TodoAttempt.objects.filter(todo_id=old.id).exists()
    assert Todo.objects.filter(pk=recent.id).exists()
    assert TodoAttempt.objects.filter(todo_id=recent.id).count() == 1


def test_dead_and_canceled_todos_age_out_like_done_ones(
    endpoint, agent, human, make_todo, settings
):
    settings.SWITCHBOARD_RETENTION_DAYS = 30
    dead = _claimed(make_todo, endpoint, "dead", max_attempts=1)
    transitions.fail(agent, dead.id)
    canceled = make_todo("canceled")
    transitions.cancel(human, canceled.id)
    assert set(Todo.objects.values_list("state", flat=True)) == {"dead", "canceled"}
    _ended_days_ago(dead.id, 40)
    _ended_days_ago(canceled.id, 40)

    assert sweeper.sweep_once() == SweepReport(deleted_by_age=2)
    assert not Todo.objects.exists()
    assert not TodoEvent.objects.filter(todo_id=canceled.id).exists()


def test_live_todos_are_never_deleted_however_old(endpoint, agent, make_todo, settings):
    settings.SWITCHBOARD_RETENTION_DAYS = 0
    settings.SWITCHBOARD_RETENTION_MAX_TERMINAL = 1
    claimed = _claimed(make_todo, endpoint, "claimed")
    waiting = _claimed(make_todo, endpoint, "waiting")
    transitions.fail(agent, waiting.id)
    pending = make_todo("pending")
    Todo.objects.filter(pk=waiting.id).update(next_retry_at="2999-01-01T00:00:00Z")
    for todo in (pending, claimed, waiting):
        _created_days_ago(todo.id, 400)

    report = sweeper.sweep_once()

    assert (report.deleted_by_age, report.deleted_by_cap) == (0, 0)
    states = dict(Todo.objects.values_list("id", "state"))
    assert states == {pending.id: "pending", claimed.id: "claimed", waiting.id: "retry_wait"}


def test_zero_retention_days_deletes_every_terminal_todo_at_the_next_pass(
    endpoint, agent, make_todo, settings
):
    settings.SWITCHBOARD_RETENTION_DAYS = 0
    done = _done(make_todo, endpoint, agent)
    live = make_todo("live")

    assert sweeper.sweep_once() == SweepReport(deleted_by_age=1)
    assert list(Todo.objects.values_list("id", flat=True)) == [live.id]
    assert not TodoAttempt.objects.filter(todo_id=done.id).exists()


def test_per_endpoint_cap_keeps_the_newest_terminal_todos(
    team, endpoint, agent, make_todo, settings
):
    settings.SWITCHBOARD_RETENTION_MAX_TERMINAL = 2
    done = [_done(make_todo, endpoint, agent, f"done {n}") for n in range(5)]
    for age, todo in enumerate(reversed(done)):  # done[4] is the newest
        _ended_days_ago(todo.id, age + 1)
    live = make_todo("still pending")
    other, _ = endpoints.vend(team, "other-agent")
    others = [_done(make_todo, other, Actor.agent(other), f"other {n}") for n in range(2)]

    report = sweeper.sweep_once(delete_batch=2)

    assert report == SweepReport(deleted_by_cap=3)
    kept = set(Todo.objects.values_list("id", flat=True))
    assert kept == {done[3].id, done[4].id, live.id, *(t.id for t in others)}
    assert set(TodoAttempt.objects.values_list("todo_id", flat=True)) == kept - {live.id}


@pytest.mark.django_db(transaction=True)
def test_cap_counts_a_locked_newest_todo_as_kept(team, settings):
    """Regression: with OFFSET and SKIP LOCKED in one scan, a newer terminal todo locked by
    someone else (say a human rerunning it) did not count toward the cap, and one todo too
    many was deleted."""
    settings.SWITCHBOARD_RETENTION_MAX_TERMINAL = 2
    endpoint, _ = endpoints.vend(team, "capped")
    agent = Actor.agent(endpoint)
    done = []
    for n in range(4):
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title=f"done {n}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
        done.append(todo)
    for age, todo in enumerate(reversed(done)):  # done[3] is the newest
        _ended_days_ago(todo.id, age + 1)
    with held_open("SELECT id FROM todos WHERE id = %s FOR UPDATE", [done[3].id]):
        report = sweeper.sweep_once()

    assert report.deleted_by_cap == 2
    assert set(Todo.objects.values_list("id", flat=True)) == {done[2].id, done[3].id}


def test_a_cap_of_zero_means_no_cap(endpoint, agent, make_todo, settings):
    settings.SWITCHBOARD_RETENTION_MAX_TERMINAL = 0
    for n in range(3):
        _done(make_todo, endpoint, agent, f"done {n}")

    assert sweeper.sweep_once().deleted_by_cap == 0
    assert Todo.objects.count() == 3


# ---------------------------------------------------------------------------------------
# Several sweepers, and the loop


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_sweepers_at_once_reap_each_lapsed_lease_exactly_once(team):
    endpoint, _ = endpoints.vend(team, "crowded")
    count = 120
    for n in range(count):
        transitions.create_todo(Actor.agent(endpoint), title=f"t{n}")
        assert transitions.claim_next(Actor.agent(endpoint)) is not None
    backdate(
        "UPDATE todos SET lease_expires_at = statement_timestamp() - interval '1 second'"
        " WHERE endpoint_id = %s",
        [endpoint.pk],
        rows=count,
    )

    reports: list[SweepReport] = []

    def sweep(_n: int) -> None:
        # Small batches, so the two sweepers interleave over many transactions.
        reports.append(sweeper.sweep_once(reap_batch=3))

    assert run_together(sweep, 2, timeout=120) == []
    assert sum(r.reaped for r in reports) == count
    reaped = Counter(TodoAttempt.objects.filter(outcome="reaped").values_list("todo_id", flat=True))
    assert len(reaped) == count and set(reaped.values()) == {1}
    assert set(Todo.objects.values_list("state", flat=True)) == {"pending"}


def _reaches(todo_id: int, state: str) -> bool:
    return wait_for(lambda: Todo.objects.filter(pk=todo_id, state=state).exists())


@pytest.mark.django_db(transaction=True)
def test_run_forever_sweeps_until_stopped(team):
    endpoint, _ = endpoints.vend(team, "looper")
    todo = a_lapsed_lease(endpoint)

    with sweeper_running() as thread:
        assert _reaches(todo.id, "pending")
    assert not thread.is_alive()


@pytest.mark.django_db(transaction=True)
def test_run_forever_survives_its_connection_dying_mid_pass(team, caplog):
    """A real failure: the sweeper's own session is terminated in the middle of a reap
    (a trigger fires once, through a sequence, which no rollback undoes). The loop logs it,
    drops the dead connection and reaps on a fresh one at the next pass."""
    endpoint, _ = endpoints.vend(team, "unlucky")
    todo = a_lapsed_lease(endpoint)
    with connection.cursor() as cursor:
        cursor.execute(_KILL_ONCE_TRIGGER)
    try:
        with caplog.at_level(logging.WARNING, logger="switchboard.sweeper"), sweeper_running():
            assert _reaches(todo.id, "pending")
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_DROP_KILL_ONCE_TRIGGER)

    assert "sweep pass failed" in caplog.text
    assert "terminating connection" in caplog.text
    assert list(TodoAttempt.objects.values_list("outcome", flat=True)) == ["reaped"]


_KILL_ONCE_TRIGGER, _DROP_KILL_ONCE_TRIGGER = row_trigger(
    "sweeper_test_kill_once",
    """    IF nextval('sweeper_test_kill_once') = 1 THEN
        PERFORM pg_terminate_backend(pg_backend_pid());
    END IF;
    RETURN NEW;""",
)
_KILL_ONCE_TRIGGER = "CREATE SEQUENCE sweeper_test_kill_once;\n" + _KILL_ONCE_TRIGGER
_DROP_KILL_ONCE_TRIGGER += "DROP SEQUENCE IF EXISTS sweeper_test_kill_once;\n"


def test_a_todo_claimed_after_its_endpoint_was_revoked_is_dead_lettered(endpoint, agent, make_todo):
    """A claim in flight during a revocation can commit after it (it authenticated first);
    the sweeper dead-letters what such a race leaves live."""
    todo = make_todo()
    transitions.revoke_endpoint(None, endpoint)
    with connection.cursor() as cursor:  # the late claim, as it would land
        cursor.execute(
            "UPDATE todos SET state = 'pending', dead_letter_reason = '', ended_at = NULL"
            " WHERE id = %s",
            [todo.id],
        )
    endpoint.revoked_at = None  # the in-flight request's view of its endpoint
    transitions.claim(agent, todo.id)

    report = sweeper.sweep_once()

    assert report.dead_lettered_revoked == 1
    row = Todo.objects.get(pk=todo.id)
    assert row.state == "dead" and row.dead_letter_reason == "revoked"
    assert list(TodoAttempt.objects.filter(todo_id=todo.id).values_list("outcome", flat=True)) == [
        "revoked"
    ]


@pytest.mark.django_db(transaction=True)
def test_a_trigger_past_its_batch_rings_the_sweeper_at_once(team):
    """A prerequisite with more dependents than the trigger releases (1,000) says so on
    switchboard_sweep; a sweeper waiting out a long interval passes at once and releases the
    rest, instead of at its next interval."""
    from switchboard.queues import transitions
    from switchboard.queues.transitions import Actor

    endpoint, _ = endpoints.vend(team, "fan-in")
    agent = Actor.agent(endpoint)
    first, _ = transitions.create_todo(agent, title="first")
    waiting = [
        transitions.create_todo(agent, title=f"w{n}", after=[first.id])[0].id for n in range(1003)
    ]
    with sweeper_running(interval=120):
        time.sleep(1.0)  # its first pass is done; the next is two minutes away
        transitions.claim(agent, first.id)
        transitions.complete(agent, first.id)
        assert wait_for(
            lambda: not Todo.objects.filter(pk__in=waiting, state="waiting").exists(), seconds=10
        )
