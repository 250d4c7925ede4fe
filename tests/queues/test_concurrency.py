"""Real parallel connections against one queue (threads: each has its own Django connection,
and PostgreSQL does the work, so the GIL does not serialise the interesting part)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.conf import settings
from django.db import connection, connections

from switchboard.queues import endpoints, sql, transitions
from switchboard.queues.models import Endpoint, Todo, TodoAttempt
from switchboard.queues.records import Budget
from switchboard.queues.transitions import Actor, Close, decide
from switchboard.queues.transitions._common import claim_params
from tests.queues.helpers import (
    analyze,
    held_open,
    lock_waiters,
    outcome_in_thread,
    run_together,
    wait_for,
)

WORKERS = 8
TODOS = 2000


def _bulk_todos(endpoint, count: int, *, max_attempts: int = 5) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason)"
            " SELECT %s, 'todo ' || g, '', 0, 'pending', %s, 0, 0, 1, 0, 0, '', ''"
            " FROM generate_series(1, %s) g",
            [endpoint.pk, max_attempts, count],
        )
        # Fresh statistics, as the sweeper takes them for a table that outgrew its own
        # (queues/sql/sweep.py, STALE_STATISTICS): on this worker's database they were taken
        # whenever an earlier test left it, and from one of a handful of rows the planner
        # sorted the endpoint's every open todo at each claim (a 1.6 s drain took 12-31 s).
        analyze(cursor, "todos")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_eight_connections_drain_two_thousand_todos_each_claimed_once(team):
    endpoint, _ = endpoints.vend(team, "drainer")
    _bulk_todos(endpoint, TODOS)
    claimed_by: dict[int, list[int]] = {n: [] for n in range(WORKERS)}

    def drain(n: int) -> None:
        agent = Actor.agent(endpoint)
        while (claim := transitions.claim_next(Actor.agent(endpoint))) is not None:
            claimed_by[n].append(claim.todo.id)
            transitions.complete(
                agent, claim.todo.id, attempt_seq=claim.attempt_seq, result={"by": n}
            )

    assert run_together(drain, WORKERS) == []

    everything = [todo_id for ids in claimed_by.values() for todo_id in ids]
    assert len(everything) == TODOS and len(set(everything)) == TODOS
    assert sum(1 for ids in claimed_by.values() if ids) > 1  # it really ran in parallel
    assert Todo.objects.exclude(state="done").count() == 0
    assert TodoAttempt.objects.count() == TODOS
    assert set(TodoAttempt.objects.values_list("outcome", flat=True)) == {"completed"}
    per_todo = Counter(TodoAttempt.objects.values_list("todo_id", flat=True))
    assert set(per_todo.values()) == {1}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_eight_connections_completing_then_claiming_in_one_statement_claim_each_once(team):
    """The same drain with each complete claiming the next todo (close_then_claim_next: the
    complete and the claim in one statement): no todo claimed twice, none lost, one attempt
    each."""
    endpoint, _ = endpoints.vend(team, "then-drainer")
    todos = TODOS // 2
    _bulk_todos(endpoint, todos)
    claimed_by: dict[int, list[int]] = {n: [] for n in range(WORKERS)}
    in_one: Counter = Counter()

    def drain(n: int) -> None:
        agent = Actor.agent(endpoint)
        claim = transitions.claim_next(agent)
        while claim is not None:
            claimed_by[n].append(claim.todo.id)
            both = transitions.close_then_claim_next(
                agent,
                transitions.Close.complete(result={"by": n}),
                claim.todo.id,
                attempt_seq=claim.attempt_seq,
                claim=transitions.ClaimArgs(),
            )
            assert both.next in (transitions.Next.CLAIMED, transitions.Next.NOTHING)
            assert both.closed.todo.state == "done" and both.closed.attempt.outcome == "completed"
            in_one[n] += 1
            claim = both.claim
            if claim is None:  # the queue looked empty as that statement began: look again
                claim = transitions.claim_next(agent)

    assert run_together(drain, WORKERS) == []

    everything = [todo_id for ids in claimed_by.values() for todo_id in ids]
    assert len(everything) == todos and len(set(everything)) == todos
    assert sum(1 for ids in claimed_by.values() if ids) > 1
    assert sum(in_one.values()) == todos
    assert Todo.objects.exclude(state="done").count() == 0
    per_todo = Counter(TodoAttempt.objects.values_list("todo_id", flat=True))
    assert len(per_todo) == todos and set(per_todo.values()) == {1}
    assert set(TodoAttempt.objects.values_list("outcome", flat=True)) == {"completed"}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_eight_connections_draining_keys_one_at_a_time_with_then_never_overlap_a_key(team):
    """The then-drain under max_claimed_per_key 1 (close_then_claim_next_keyed; a key met at
    its limit after the statement's snapshot fails it whole, and the close runs alone, then
    claim_next): every todo claimed once, never two todos of one key claimed in any snapshot
    a watcher takes meanwhile (attempts' times cannot say it: a statement's timestamp is taken
    before its snapshot, and a backend may wait between the two on a busy machine), and the
    keys' counts back at zero."""
    endpoint, _ = endpoints.vend(team, "keyed-drainer")
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed_per_key=1)
    todos, keys = 600, 12
    _bulk_todos(endpoint, todos)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todos SET key = 'k' || (id %% %s) WHERE endpoint_id = %s", [keys, endpoint.pk]
        )
    claimed_by: dict[int, list[int]] = {n: [] for n in range(WORKERS)}

    def drain(n: int) -> None:
        agent = Actor.agent(Endpoint.objects.get(pk=endpoint.pk))
        claim = transitions.claim_next(agent)
        while claim is not None:
            claimed_by[n].append(claim.todo.id)
            both = transitions.close_then_claim_next(
                agent,
                transitions.Close.complete(),
                claim.todo.id,
                attempt_seq=claim.attempt_seq,
                claim=transitions.ClaimArgs(),
            )
            assert both.closed.todo.state == "done", both
            claim = both.claim or transitions.claim_next(agent)

    done = threading.Event()
    looks: list[int] = []

    def watch() -> None:
        try:
            with connections["default"].cursor() as cursor:
                while not done.is_set():
                    cursor.execute(
                        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM todos"
                        " WHERE endpoint_id = %s AND state = 'claimed' GROUP BY key) x",
                        [endpoint.pk],
                    )
                    looks.append(cursor.fetchone()[0])
        finally:
            connections["default"].close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        assert run_together(drain, WORKERS) == []
    finally:
        done.set()
        watcher.join(30)

    everything = [todo_id for ids in claimed_by.values() for todo_id in ids]
    assert len(everything) == todos and len(set(everything)) == todos
    assert sum(1 for ids in claimed_by.values() if ids) > 1
    assert Todo.objects.filter(endpoint=endpoint).exclude(state="done").count() == 0
    assert looks and max(looks) == 1, (len(looks), max(looks, default=None))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_racing_takeovers_and_reaps_never_open_two_attempts(team):
    """Workers that fail, release or abandon their leases while a reaper runs: every todo
    ends with at most one open attempt, seqs strictly increasing, nothing lost."""
    endpoint, _ = endpoints.vend(team, "chaos")
    _bulk_todos(endpoint, 300, max_attempts=3)
    stop = threading.Event()

    def work(n: int) -> None:
        agent = Actor.agent(endpoint)
        if n == 0:  # the reaper
            while not stop.is_set():
                transitions.reap_lapsed()
                transitions.requeue_due_retries()
            return
        for i in range(400):
            claim = transitions.claim_next(Actor.agent(endpoint), lease_seconds=1)
            if claim is None:
                break
            kind = (claim.todo.id + i + n) % 4
            if kind == 0:
                transitions.complete(agent, claim.todo.id, attempt_seq=claim.attempt_seq)
            elif kind == 1:
                transitions.fail(agent, claim.todo.id, attempt_seq=claim.attempt_seq)
            elif kind == 2:
                transitions.release(agent, claim.todo.id, attempt_seq=claim.attempt_seq)
            else:  # abandon: make the lease lapse at once so it is reaped or taken over
                with connection.cursor() as cursor:
                    cursor.execute(
                        "UPDATE todos SET lease_expires_at = statement_timestamp()"
                        " - interval '1 second' WHERE id = %s AND last_attempt_seq = %s"
                        " AND state = 'claimed'",
                        [claim.todo.id, claim.attempt_seq],
                    )

    remaining = [WORKERS - 1]
    lock = threading.Lock()

    def workers_then_stop(n: int) -> None:
        try:
            work(n)
        finally:
            if n != 0:
                with lock:
                    remaining[0] -= 1
                    if remaining[0] == 0:
                        stop.set()

    assert run_together(workers_then_stop, WORKERS) == []

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT todo_id FROM todo_attempts WHERE ended_at IS NULL"
            " GROUP BY todo_id HAVING count(*) > 1"
        )
        assert cursor.fetchall() == []
        cursor.execute(
            "SELECT count(*) FROM todos t WHERE t.state = 'claimed' AND NOT EXISTS ("
            " SELECT 1 FROM todo_attempts a WHERE a.todo_id = t.id AND a.ended_at IS NULL)"
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute(
            "SELECT count(*) FROM todo_attempts a JOIN todos t ON t.id = a.todo_id"
            " WHERE a.seq > t.last_attempt_seq"
        )
        assert cursor.fetchone()[0] == 0
    assert Todo.objects.count() == 300
    # the failure budget was honoured for every todo that died
    for todo in Todo.objects.filter(state="dead"):
        assert todo.failures == todo.max_attempts
        assert todo.dead_letter_reason in {"failed", "reaped", "lease_expired"}
    assert TodoAttempt.objects.filter(outcome__in=["reaped", "lease_expired"]).exists()


@pytest.mark.django_db(transaction=True)
def test_a_claim_that_waited_for_the_row_lock_rereads_the_attempts(team):
    """Regression: a claim whose snapshot predates a takeover committed while it waited for
    the todo's row lock must not open a second open attempt (it used to violate the
    one-open-attempt constraint); it re-runs on a fresh snapshot and takes over again."""
    endpoint, _ = endpoints.vend(team, "waiter")
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="contended", max_attempts=10)
    agent = Actor.agent(endpoint)
    transitions.claim(agent, todo.id)
    lapse = (
        "UPDATE todos SET lease_expires_at = statement_timestamp() - interval '1 second'"
        " WHERE id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(lapse, [todo.id])

    holder_ready, release_holder = threading.Event(), threading.Event()

    def holder() -> None:
        from django.db import transaction

        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT id FROM todos WHERE id = %s FOR UPDATE", [todo.id])
                holder_ready.set()
                # the waiter now blocks on this lock, its snapshot already taken
                release_holder.wait(30)
                # a takeover (the claim statement itself): attempt 2, then it lapses too
                params, _ = claim_params(agent, None, False, None, None)
                died = decide(Close.lapse(), Budget(failures=0, max_attempts=10))
                cursor.execute(
                    sql.CLAIM_ONE_AGENT_TAKEOVER.text,
                    {**params, **died.lapse_params(), "todo_id": todo.id},
                )
                assert cursor.fetchall()[0][0] is True
                cursor.execute(lapse, [todo.id])
        finally:
            connections.close_all()

    h = threading.Thread(target=holder)
    h.start()
    assert holder_ready.wait(30)
    w, waiter_result = outcome_in_thread(lambda: transitions.claim(agent, todo.id))
    # wait until the waiter is blocked on the row lock (its snapshot is now taken)
    assert wait_for(lambda: lock_waiters() == 1, seconds=10)
    release_holder.set()
    h.join(30)
    w.join(30)

    [claim] = waiter_result
    assert not isinstance(claim, BaseException), claim
    assert claim.attempt_seq == 3
    outcomes = list(
        TodoAttempt.objects.filter(todo_id=todo.id).order_by("seq").values_list("seq", "outcome")
    )
    assert outcomes == [(1, "lease_expired"), (2, "lease_expired"), (3, "")]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_claim_next_racing_releases_of_the_same_todos_opens_each_attempt_once(team):
    """The fast claim_next reads no attempt and checks no snapshot (queues/sql/claim.py):
    six workers claim and release the same two todos as fast as they can, so claims
    often lock a version of the todo that a release committed after the claim's snapshot began.
    Every claim opens exactly one attempt with the next seq; nothing is refused."""
    endpoint, _ = endpoints.vend(team, "churn")
    _bulk_todos(endpoint, 2, max_attempts=5)
    claims = Counter()

    def churn(n: int) -> None:
        agent = Actor.agent(endpoint)
        mine = 0
        for _ in range(5000):
            claim = transitions.claim_next(Actor.agent(endpoint))
            if claim is None:
                continue  # both are held by others at this instant
            with lock:
                claims[claim.todo.id] += 1
            transitions.release(agent, claim.todo.id, attempt_seq=claim.attempt_seq)
            mine += 1
            if mine == 40:
                return
        raise AssertionError(f"worker {n} claimed {mine} times in 5000 tries")

    lock = threading.Lock()
    assert run_together(churn, 6) == []
    assert sum(claims.values()) == 240
    for todo in Todo.objects.all():
        seqs = list(
            TodoAttempt.objects.filter(todo=todo).order_by("seq").values_list("seq", flat=True)
        )
        kept = min(todo.last_attempt_seq, settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO)
        assert seqs == list(range(todo.last_attempt_seq - kept + 1, todo.last_attempt_seq + 1))
        assert todo.last_attempt_seq == claims[todo.id]
        assert todo.state == "pending" and todo.failures == 0
        assert not TodoAttempt.objects.filter(todo=todo, ended_at__isnull=True).exists()


def _asked_across(todo_id: int, change) -> tuple[str, bool]:
    """(the todo's state in a statement's snapshot, switchboard_todo_unclaimed asked of that
    row later in the same statement), ``change()`` committed in between: the statement waits
    on an advisory lock after taking its snapshot."""
    gate, asked = 1463896405, []

    def ask() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT t.state, switchboard_todo_unclaimed(t.id, t.last_attempt_seq)"
                    "  FROM todos t WHERE t.id = %s AND pg_advisory_lock_shared(%s)::text = ''",
                    [todo_id, gate],
                )
                asked.append(cursor.fetchone())
                cursor.execute("SELECT pg_advisory_unlock_shared(%s)", [gate])
        finally:
            connections.close_all()

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [gate])
    asker = threading.Thread(target=ask)
    asker.start()
    try:
        assert wait_for(lambda: lock_waiters() == 1, seconds=30)  # its snapshot is taken
        change()
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [gate])
        asker.join(30)
    return asked[0]


@pytest.mark.django_db(transaction=True)
def test_a_pick_passes_over_a_todo_claimed_since_its_snapshot_and_only_that(team):
    """switchboard_todo_unclaimed, which claim_next's pick asks of each candidate before
    locking it: false for a todo claimed and committed after the asking statement's snapshot
    (which still shows it pending); true for one a transaction holds uncommitted (SKIP LOCKED
    passes over that one) and for one that moved between live states without a claim (a
    lapsed lease reaped: claimable before and after, so the pick takes it)."""
    from switchboard.queues import sweeper
    from tests.queues.helpers import lapse_lease

    endpoint, _ = endpoints.vend(team, "passing")
    agent = Actor.agent(endpoint)
    claimed, held, reaped = (
        transitions.create_todo(agent, title=title)[0]
        for title in ("claimed meanwhile", "held, not committed", "reaped meanwhile")
    )

    assert _asked_across(claimed.id, lambda: transitions.claim(agent, claimed.id)) == (
        "pending",
        False,
    )

    grab = (
        "UPDATE todos SET state = 'claimed', last_attempt_seq = 1, owner = 'x',"
        " claimed_at = now(), lease_expires_at = now() WHERE id = %s"
    )
    with held_open(grab, [held.id]):  # claimed, not committed
        assert _asked_across(held.id, lambda: None) == ("pending", True)

    transitions.claim(agent, reaped.id)
    lapse_lease(reaped.id)
    assert _asked_across(reaped.id, sweeper.sweep_once) == ("claimed", True)
    assert Todo.objects.get(pk=reaped.id).state in ("pending", "retry_wait")
