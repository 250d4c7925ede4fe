"""The sweeper's one status row and its fold of attempt endings into the metric counters."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from django.db import connection

from switchboard.queues import counters, endpoints, sweeper, transitions
from switchboard.queues.models import MetricCounter, SweeperStatus
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    a_lapsed_lease,
    lapse_lease,
    row_trigger,
    run_together,
    sweeper_running,
    wait_for,
)


def _db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]


def _closed_attempts(endpoint, count: int) -> None:
    agent = Actor.agent(endpoint)
    for n in range(count):
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title=f"t{n}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)


def test_each_pass_records_its_times_count_and_report(endpoint, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)
    assert not SweeperStatus.objects.exists()
    before = _db_now()

    report = sweeper.sweep_once()
    sweeper.sweep_once()

    status = SweeperStatus.objects.get()
    assert status.passes == 2
    assert before <= status.last_started_at <= status.last_finished_at <= _db_now()
    assert status.last_error == ""
    assert report.reaped == 1
    # The last pass's report: it found nothing left to do.
    assert {k: v for k, v in status.last_report.items() if k != "elapsed_ms"} == asdict(
        sweeper.SweepReport()
    )
    assert status.last_report["elapsed_ms"] >= 0


def test_the_fold_runs_before_retention_deletes_what_it_counts(
    endpoint, agent, make_todo, settings, monkeypatch
):
    """With 0 retention days a todo is deleted at the next pass; its attempt is counted in
    that same pass, first."""
    settings.SWITCHBOARD_RETENTION_DAYS = 0
    monkeypatch.setattr(counters, "FOLD_LAG_SECONDS", 0.0)
    todo = make_todo()
    transitions.claim(agent, todo.id)
    transitions.complete(agent, todo.id)

    report = sweeper.sweep_once()

    assert report.deleted_by_age == 1
    assert MetricCounter.objects.get(name="attempts_closed_total", label="completed").value == 1
    status = SweeperStatus.objects.get()
    assert status.metrics_folded_until is not None
    assert status.metrics_folded_until <= status.last_finished_at


@pytest.mark.django_db(transaction=True)
def test_two_folds_at_once_count_every_ending_exactly_once(team):
    endpoint, _ = endpoints.vend(team, "folded")
    added: list[dict] = []

    def fold(_n: int) -> None:
        added.append(counters.fold_attempt_endings(lag_seconds=0))

    total = 0
    for _round in range(5):
        _closed_attempts(endpoint, 12)
        total += 12
        added.clear()
        assert run_together(fold, 2, timeout=60) == []
        assert sum(a.get("completed", 0) for a in added) == 12
        stored = MetricCounter.objects.get(name="attempts_closed_total", label="completed")
        assert stored.value == total


@pytest.mark.django_db(transaction=True)
def test_two_sweepers_count_their_passes_in_one_row(team):
    def sweep(_n: int) -> None:
        for _ in range(3):
            sweeper.sweep_once()

    assert run_together(sweep, 2, timeout=60) == []
    assert SweeperStatus.objects.get().passes == 6


_FAIL_EVERY_REAP, _DROP_FAIL_EVERY_REAP = row_trigger(
    "sweeper_status_test_fail", "    RAISE EXCEPTION 'cannot update todo %', NEW.title;"
)


@pytest.mark.django_db(transaction=True)
def test_a_failed_pass_records_its_error_class_without_the_message(team):
    """A database message may quote a row (here the todo's title): only the error's class
    and SQLSTATE are kept. The next pass that finishes clears it."""
    endpoint, _ = endpoints.vend(team, "failing")
    a_lapsed_lease(endpoint, "MARKER-TITLE-in-an-error")
    with connection.cursor() as cursor:
        cursor.execute(_FAIL_EVERY_REAP)
    try:
        with sweeper_running() as thread:
            assert wait_for(lambda: SweeperStatus.objects.filter(last_error__gt="").exists()), (
                "no failure recorded"
            )
            status = SweeperStatus.objects.get()
            assert status.last_error == "ProgrammingError (SQLSTATE P0001)"
            assert status.passes == 0
            with connection.cursor() as cursor:
                cursor.execute(_DROP_FAIL_EVERY_REAP)
            assert wait_for(lambda: SweeperStatus.objects.get().passes >= 1)
            assert wait_for(lambda: SweeperStatus.objects.get().last_error == "")
    finally:
        with connection.cursor() as cursor:
            cursor.execute(_DROP_FAIL_EVERY_REAP)
    assert not thread.is_alive()
