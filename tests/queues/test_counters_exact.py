"""switchboard_attempts_closed_total counts every close exactly once (issue 10, item 7).

The counters were folded by the sweeper from attempt rows still present some seconds after
they closed, so rows pruned by the per-todo history cap (or removed by retention) before the
fold were never counted: 134 failed closes read as 113 after 21 were pruned. Now a claim that
prunes rows the fold has not counted carries their counts over, retention deletes only
counted todos, and the fold never moves past a transaction still open.
"""

from __future__ import annotations

import itertools
import threading

import pytest
from django.db import connection, connections, transaction

from switchboard.queues import counters, sweeper, transitions
from switchboard.queues.models import MetricCounter, SweeperStatus, Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.queues.helpers import run_together


def counted(outcome: str) -> float:
    row = MetricCounter.objects.filter(name=counters.ATTEMPTS_CLOSED, label=outcome).first()
    return row.value if row else 0.0


@pytest.fixture
def fast_retries(settings):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO = 3


def _claim_and_fail(agent, todo_id: int, times: int) -> None:
    for _ in range(times):
        transitions.claim(agent, todo_id)
        transitions.fail(agent, todo_id)


def test_attempts_pruned_before_the_fold_are_still_counted(fast_retries, agent, make_todo):
    todo = make_todo(max_attempts=100)
    _claim_and_fail(agent, todo.id, 10)
    transitions.claim(agent, todo.id)  # this claim prunes too
    assert TodoAttempt.objects.filter(todo_id=todo.id).count() == 3  # 8 pruned, unfolded

    assert counters.fold_attempt_endings(lag_seconds=0) == {"failed": 10}
    assert counted("failed") == 10
    assert counters.fold_attempt_endings(lag_seconds=0) == {}  # once


def test_rows_pruned_after_the_fold_are_not_counted_twice(fast_retries, agent, make_todo):
    todo = make_todo(max_attempts=100)
    _claim_and_fail(agent, todo.id, 3)
    assert counters.fold_attempt_endings(lag_seconds=0) == {"failed": 3}
    _claim_and_fail(agent, todo.id, 4)  # prunes the three counted rows and one more
    counters.fold_attempt_endings(lag_seconds=0)
    assert counted("failed") == 7


def test_retention_deletes_only_what_the_fold_counted(settings, agent, make_todo):
    settings.SWITCHBOARD_RETENTION_DAYS = 0
    todos = [make_todo(f"t{n}") for n in range(3)]
    for todo in todos:
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)

    # Before any fold, nothing is counted, so retention keeps every todo.
    assert sweeper._delete_by_age(days=0, batch=100) == 0
    assert Todo.objects.count() == 3
    counters.fold_attempt_endings(lag_seconds=0)
    assert sweeper._delete_by_age(days=0, batch=100) == 3
    assert counted("completed") == 3


def test_the_cap_retention_waits_for_the_fold_too(settings, agent, make_todo):
    for n in range(4):
        todo = make_todo(f"t{n}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
    assert sweeper._delete_by_cap(cap=1, batch=100) == 0
    counters.fold_attempt_endings(lag_seconds=0)
    assert sweeper._delete_by_cap(cap=1, batch=100) == 3
    assert counted("completed") == 4


@pytest.mark.django_db(transaction=True)
def test_a_close_committed_late_in_a_long_transaction_is_counted(endpoint, make_todo):
    todo = make_todo()
    agent = Actor.agent(endpoint)
    transitions.claim(agent, todo.id)
    closed, release = threading.Event(), threading.Event()

    def slow_closer() -> None:
        try:
            with transaction.atomic():
                transitions.complete(agent, todo.id)  # ended_at stamped now
                closed.set()
                release.wait(30)  # ... committed much later
        finally:
            connections.close_all()

    thread = threading.Thread(target=slow_closer)
    thread.start()
    assert closed.wait(30)
    # The open transaction holds the horizon back: the mark does not pass its close.
    assert counters.fold_attempt_endings(lag_seconds=0) == {}
    release.set()
    thread.join(30)
    assert counters.fold_attempt_endings(lag_seconds=0) == {"completed": 1}


@pytest.mark.django_db(transaction=True)
def test_claims_that_prune_while_folds_run_count_every_close_once(settings, make_endpoint):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO = 1  # every claim prunes
    endpoint = make_endpoint("racer")
    agent = Actor.agent(endpoint)
    todos = [
        transitions.create_todo(Actor.agent(endpoint), title=f"t{n}", max_attempts=1000)[0]
        for n in range(4)
    ]
    rounds, stop = 40, threading.Event()
    folds = itertools.count()

    def work(n: int) -> None:
        if n == len(todos):  # the folder
            while not stop.is_set():
                counters.fold_attempt_endings(lag_seconds=0)
                next(folds)
            return
        try:
            _claim_and_fail(agent, todos[n].id, rounds)
        finally:
            if n == 0:
                stop.set()

    errors = run_together(work, len(todos) + 1)
    assert errors == []
    stop.set()
    counters.fold_attempt_endings(lag_seconds=0)
    assert next(folds) > 1
    assert counted("failed") == len(todos) * rounds
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM metric_deltas")
        assert cursor.fetchone() == (0,)  # the fold took every carried count


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("folded_before", [False, True], ids=["first fold", "later fold"])
def test_a_claim_open_across_a_fold_is_counted_once(settings, make_endpoint, folded_before):
    # A claim prunes a failed attempt and carries its count, and stays open while a fold runs:
    # the fold still sees the row (its deletion is not committed) and counts it, then the
    # claim commits the carried count. The next fold must drop it. Before, a claim locked the
    # sweeper_status row to read the mark, and a new database has no such row yet (the
    # sweeper makes it): a first fold counted 2 failed closes for 1 (CI, 2026-12-01).
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO = 1
    endpoint = make_endpoint("first")
    agent = Actor.agent(endpoint)
    todo = transitions.create_todo(Actor.agent(endpoint), title="t", max_attempts=10)[0]
    if folded_before:
        counters.fold_attempt_endings(lag_seconds=0)  # a mark before the failure below
    _claim_and_fail(agent, todo.id, 1)
    assert SweeperStatus.objects.exists() == folded_before
    pruned, release = threading.Event(), threading.Event()

    def claimer() -> None:
        try:
            with transaction.atomic():
                transitions.claim(agent, todo.id)  # prunes the failed attempt, carries it
                pruned.set()
                release.wait(30)
        finally:
            connections.close_all()

    thread = threading.Thread(target=claimer)
    thread.start()
    try:
        assert pruned.wait(30)
        assert counters.fold_attempt_endings(lag_seconds=0) == {"failed": 1}  # the row
    finally:
        release.set()
        thread.join(30)
    with connection.cursor() as cursor:
        cursor.execute("SELECT label, value FROM metric_deltas")
        assert cursor.fetchall() == [("failed", 1.0)]  # carried as well
    assert counters.fold_attempt_endings(lag_seconds=0) == {}  # and dropped
    assert counted("failed") == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM metric_deltas")
        assert cursor.fetchone() == (0,)
