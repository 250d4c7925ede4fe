"""Workers SIGKILLed mid-lease: their todos are reaped, their attempts died, nothing is lost.

Real processes throughout: ``switchboard serve`` (gunicorn), ``switchboard sweep`` (one
pass a second) and worker processes speaking HTTP through ``switchboard.client``.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import Count, Q
from django.db.models.functions import Now

from switchboard.client import Client
from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.crash.harness import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LEASE_SECONDS = 2  # what the doomed workers ask for
SWEEP_INTERVAL_SECONDS = 1
# Two shared cores running gunicorn, the sweeper, workers and PostgreSQL: a pass can start
# late. Generous, yet far below the 300 s default lease a stuck todo would otherwise wait.
SLACK_SECONDS = 8
DOOMED_WORKERS = 4
HEALTHY_WORKERS = 3
TODOS = 12


def test_workers_killed_mid_lease_are_reaped_as_died_and_nothing_is_lost(vend, procs, crash_env):
    endpoint, token = vend("crash-worker")
    todo_ids = {
        transitions.create_todo(Actor.agent(endpoint), title=f"crash {n}")[0].id
        for n in range(TODOS)
    }
    env = {**crash_env, "SWITCHBOARD_SWEEP_INTERVAL_SECONDS": str(SWEEP_INTERVAL_SECONDS)}
    server, base = procs.serve(env)
    sweeper = procs.switchboard("sweeper", "sweep", env=env)
    agent_env = {**env, "SWITCHBOARD_TOKEN": token}

    # Workers that claim a todo each with a short lease and heartbeat it while "working";
    # half of them fenced.
    doomed = [
        procs.agent(
            f"doomed-{n}",
            "hold",
            base,
            f"crash/doomed-{n}",
            str(LEASE_SECONDS),
            *(["fence"] if n % 2 else []),
            env=agent_env,
        )
        for n in range(DOOMED_WORKERS)
    ]

    def all_beating():
        return all(any(e["event"] == "beat" for e in w.events()) for w in doomed)

    wait_until(
        all_beating,
        seconds=30,
        what="every doomed worker to heartbeat its lease",
        logs=procs.logs,
        watch=[server, sweeper, *doomed],
    )
    orphans = {}
    for worker in doomed:
        claimed = next(e for e in worker.events() if e["event"] == "claimed")
        orphans[claimed["todo_id"]] = claimed["attempt_seq"]
    assert len(orphans) == DOOMED_WORKERS  # four different todos, one lease each
    # Each holds its lease, alive: claimed, its attempt open, heartbeated.
    assert Todo.objects.filter(pk__in=orphans, state="claimed").count() == DOOMED_WORKERS
    for todo_id, seq in orphans.items():
        assert TodoAttempt.objects.filter(todo_id=todo_id, seq=seq, ended_at=None).exists()
    for worker in doomed:
        worker.kill_group()
    for worker in doomed:
        assert worker.popen.wait(timeout=10) == -9

    def all_orphans_closed():
        return (
            TodoAttempt.objects.filter(todo_id__in=orphans, ended_at__isnull=False).count()
            == DOOMED_WORKERS
        )

    # Their leases lapse within LEASE_SECONDS of the kill; a pass comes within the interval.
    wait_until(
        all_orphans_closed,
        seconds=LEASE_SECONDS + SWEEP_INTERVAL_SECONDS + SLACK_SECONDS,
        what="the sweeper to reap every orphaned lease",
        logs=procs.logs,
        watch=[server, sweeper],
    )

    fenced = {
        e["todo_id"] for w in doomed for e in w.events() if e["event"] == "claimed" and e["fenced"]
    }
    assert len(fenced) == DOOMED_WORKERS // 2
    for todo_id, seq in orphans.items():
        attempt = TodoAttempt.objects.get(todo_id=todo_id, seq=seq)
        assert attempt.fenced == (todo_id in fenced)
        assert attempt.outcome in {"reaped", "lease_expired"}
        assert attempt.died
        assert attempt.last_heartbeat_at is not None  # it was alive, then it was not
        # Reaped only once the lease had lapsed (the database's clock), and not much later.
        assert attempt.ended_at >= attempt.lease_expires_at
        assert attempt.ended_at - attempt.lease_expires_at <= timedelta(
            seconds=SWEEP_INTERVAL_SECONDS + SLACK_SECONDS
        )
    # What an agent reads: the attempt died.
    client = Client(base, token)
    for todo_id, seq in orphans.items():
        todo = client.get_todo(todo_id=todo_id)["todo"]
        [attempt] = [a for a in todo["attempts"] if a["seq"] == seq]
        assert attempt["died"] is True
        assert attempt["outcome"] in {"reaped", "lease_expired"}
        assert todo["state"] == "pending" and todo["failures"] == 1
    # Nothing is stuck: no todo is claimed on a lease that has lapsed.
    assert not Todo.objects.filter(state="claimed", lease_expires_at__lt=Now()).exists()

    # Healthy workers drain the queue: every todo, the orphans included, is done once.
    healthy = [
        procs.agent(f"healthy-{n}", "drain", base, f"crash/healthy-{n}", "60", env=agent_env)
        for n in range(HEALTHY_WORKERS)
    ]
    wait_until(
        lambda: not any(w.alive() for w in healthy),
        seconds=60,
        what="the healthy workers to drain the queue",
        logs=procs.logs,
        watch=[server, sweeper],
    )
    assert [w.popen.returncode for w in healthy] == [0] * HEALTHY_WORKERS, procs.logs()

    acknowledged = Counter(
        e["todo_id"] for w in healthy for e in w.events() if e["event"] == "completed"
    )
    assert set(acknowledged) == todo_ids
    assert set(acknowledged.values()) == {1}
    assert Todo.objects.filter(pk__in=todo_ids, state="done").count() == TODOS
    per_todo = (
        TodoAttempt.objects.filter(todo_id__in=todo_ids)
        .values("todo_id")
        .annotate(
            completed=Count("id", filter=Q(outcome="completed")),
            open=Count("id", filter=Q(ended_at__isnull=True)),
            died=Count("id", filter=Q(outcome__in=["reaped", "lease_expired"])),
        )
    )
    by_todo = {row["todo_id"]: row for row in per_todo}
    assert set(by_todo) == todo_ids
    for todo_id, row in by_todo.items():
        assert row["completed"] == 1 and row["open"] == 0
        assert row["died"] == (1 if todo_id in orphans else 0)
    assert server.alive() and sweeper.alive()
