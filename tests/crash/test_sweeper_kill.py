"""The sweeper SIGKILLed mid-pass: the next pass finishes the work, and nothing is done twice.

To kill a pass at a known point, the test holds a row lock that one statement of the pass
needs (an attempt row the reap must close, an attempt row a retention delete must cascade
to): the sweeper blocks there, inside its batch's transaction, with earlier batches
committed, and is killed while it waits. For the outbox, a webhook receiver in the test
holds its answers instead, so the sweeper is killed with POSTs in flight.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter

import pytest
from django.db import connection

from switchboard.queues import outbox, teams, transitions
from switchboard.queues.models import Delivery, Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.crash.harness import SWITCHBOARD, kill_blocked, wait_until
from tests.queues.helpers import lapse_lease
from tests.queues.receivers import QuietHandler, serve_posts

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LAPSED = 3000  # 30 reap batches
OLD_TERMINAL = 3000  # 3 retention batches, each todo with its attempt
RECENT_TERMINAL = 20
LIVE_OLD = 5
RETENTION_DAYS = 30


# ---------------------------------------------------------------------------------------
# Seeding: one todo made through the transitions, copied in SQL (a few thousand rows in a
# statement; every column copied, so the copies are whatever the transitions write).


def _columns(table: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %s"
            "   AND is_generated = 'NEVER' AND is_identity = 'NO' AND column_name <> 'id'"
            " ORDER BY ordinal_position",
            [table],
        )
        return [name for (name,) in cursor.fetchall()]


def _copy_todo(template_id: int, count: int, **overrides: str) -> list[int]:
    """``count`` copies of a todo with its attempts; ``overrides`` maps a todos column to
    an SQL expression over ``t`` (the template) and ``g`` (1..count)."""
    todo_columns = _columns("todos")
    attempt_columns = _columns("todo_attempts")
    select_todo = ", ".join(overrides.get(c, f"t.{c}") for c in todo_columns)
    select_attempt = ", ".join("new.id" if c == "todo_id" else f"a.{c}" for c in attempt_columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH new AS (
                INSERT INTO todos ({", ".join(todo_columns)})
                SELECT {select_todo} FROM todos t, generate_series(1, %(count)s) g
                 WHERE t.id = %(template)s
                RETURNING id
            ), copied AS (
                INSERT INTO todo_attempts ({", ".join(attempt_columns)})
                SELECT {select_attempt} FROM new, todo_attempts a WHERE a.todo_id = %(template)s
                RETURNING todo_id
            )
            SELECT id FROM new
            """,
            {"count": count, "template": template_id},
        )
        return [todo_id for (todo_id,) in cursor.fetchall()]


def _seed(endpoint, agent) -> dict[str, set[int]]:
    lapsed_template, _ = transitions.create_todo(Actor.agent(endpoint), title="lapsed")
    transitions.claim(agent, lapsed_template.id, lease_seconds=60)
    lapse_lease(lapsed_template.id, seconds_ago=7200)
    lapsed = _copy_todo(
        lapsed_template.id,
        LAPSED - 1,
        title="t.title || ' ' || g",
        # Distinct lapse times: the reap takes them in this order, batch after batch.
        lease_expires_at="statement_timestamp() - interval '1 hour' + g * interval '1 ms'",
    )

    done_template, _ = transitions.create_todo(Actor.agent(endpoint), title="done")
    transitions.claim(agent, done_template.id)
    transitions.complete(agent, done_template.id, result={"ok": True})
    ago = f"statement_timestamp() - make_interval(days => {RETENTION_DAYS + 10})"
    old = _copy_todo(done_template.id, OLD_TERMINAL, ended_at=ago, created_at=ago)
    recent = _copy_todo(
        done_template.id,
        RECENT_TERMINAL - 1,
        ended_at=f"statement_timestamp() - make_interval(days => {RETENTION_DAYS - 1})",
    )

    live_old = []
    for n in range(LIVE_OLD):
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title=f"waiting {n}")
        live_old.append(todo.id)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todos SET created_at = statement_timestamp() - interval '400 days'"
            " WHERE id = ANY(%s)",
            [live_old],
        )
    return {
        "lapsed": {lapsed_template.id, *lapsed},
        "old": set(old),
        "recent": {done_template.id, *recent},
        "live_old": set(live_old),
    }


# ---------------------------------------------------------------------------------------
# Observing and stopping a sweeper in the middle of a pass


def _wait_on(sweeper, condition, what: str, procs):
    """Wait (45 s at the most) until ``condition()`` is truthy while ``sweeper`` runs; return
    what it returned."""
    return wait_until(condition, seconds=45, what=what, logs=procs.logs, watch=[sweeper])


def _count(sql: str, params=None) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def _reaped() -> int:
    return TodoAttempt.objects.filter(outcome="reaped").count()


def _lapsed_left() -> int:
    return _count(
        "SELECT count(*) FROM todos WHERE state = 'claimed'"
        " AND lease_expires_at <= statement_timestamp()"
    )


def test_a_sweeper_killed_mid_reap_and_mid_retention_leaves_the_next_pass_to_finish(
    endpoint, agent, procs, crash_env, raw_db
):
    seeded = _seed(endpoint, agent)
    env = {
        **crash_env,
        "SWITCHBOARD_SWEEP_INTERVAL_SECONDS": "1",
        "SWITCHBOARD_RETENTION_DAYS": str(RETENTION_DAYS),
    }
    observer = raw_db()
    holder = raw_db(autocommit=False)

    # 1. Mid-reap: hold the attempt of the 1500th lapsed lease; the reap commits the
    # batches before it and blocks in the batch that must close it.
    [blocker] = (
        Todo.objects.filter(state="claimed")
        .order_by("lease_expires_at", "id")[LAPSED // 2 - 1 : LAPSED // 2]
        .values_list("id", flat=True)
    )
    holder.execute("SELECT 1 FROM todo_attempts WHERE todo_id = %s FOR UPDATE", [blocker])
    first = procs.switchboard("sweep-1", "sweep", env=env)
    kill_blocked(
        first, holder, observer, what="the sweeper to block on the held row lock", logs=procs.logs
    )

    reaped_before_kill = _reaped()
    assert 0 < reaped_before_kill < LAPSED, procs.logs()
    assert reaped_before_kill % 100 == 0  # whole batches: the cut-off one rolled back
    assert _lapsed_left() == LAPSED - reaped_before_kill
    assert _count("SELECT count(*) FROM todos WHERE id = ANY(%s)", [list(seeded["old"])]) == (
        OLD_TERMINAL
    )  # it never reached retention

    # 2. Mid-retention: hold the attempt of one old terminal todo; the next sweeper reaps
    # the rest, then blocks in the retention batch whose delete cascades to it.
    [victim] = sorted(seeded["old"])[OLD_TERMINAL // 2 : OLD_TERMINAL // 2 + 1]
    holder.execute("SELECT 1 FROM todo_attempts WHERE todo_id = %s FOR UPDATE", [victim])
    second = procs.switchboard("sweep-2", "sweep", env=env)
    kill_blocked(
        second, holder, observer, what="the sweeper to block on the held row lock", logs=procs.logs
    )

    assert _lapsed_left() == 0  # the reap finished before retention began
    assert _reaped() == LAPSED
    old_left = _count("SELECT count(*) FROM todos WHERE id = ANY(%s)", [list(seeded["old"])])
    assert old_left > 0 and old_left % 1000 == 0  # whole batches deleted, or none

    # 3. The next pass finishes the work.
    printed = _sweep_once(env)
    assert printed["reaped"] == "0"
    assert printed["deleted_by_age"] == str(old_left)

    # Every lapsed lease was reaped exactly once: one attempt, closed once (a second close
    # would have counted a second failure), the todo back to pending.
    lapsed = list(seeded["lapsed"])
    assert Todo.objects.filter(pk__in=lapsed, state="pending", failures=1).count() == LAPSED
    assert Todo.objects.filter(pk__in=lapsed, last_attempt_seq=1).count() == LAPSED
    assert TodoAttempt.objects.filter(todo_id__in=lapsed).count() == LAPSED
    assert (
        TodoAttempt.objects.filter(
            todo_id__in=lapsed, outcome="reaped", disposition="requeued", ended_at__isnull=False
        ).count()
        == LAPSED
    )
    assert (
        _count(
            "SELECT count(*) FROM todo_attempts a JOIN todos t ON t.id = a.todo_id"
            " WHERE a.todo_id = ANY(%s) AND a.ended_at < a.lease_expires_at",
            [lapsed],
        )
        == 0
    )  # none closed before its lease lapsed
    assert not TodoAttempt.objects.filter(ended_at__isnull=True).exists()
    # Retention is done: old terminal todos are gone with their attempts; the recent ones
    # and live todos, however old, stay.
    old = list(seeded["old"])
    assert not Todo.objects.filter(pk__in=old).exists()
    assert not TodoAttempt.objects.filter(todo_id__in=old).exists()
    assert Todo.objects.filter(pk__in=seeded["recent"]).count() == RECENT_TERMINAL
    assert Todo.objects.filter(pk__in=seeded["live_old"], state="pending").count() == LIVE_OLD


# ---------------------------------------------------------------------------------------
# The outbox: dead-letter webhooks to a receiver in the test


class Sink:
    """A dead-letter sink on 127.0.0.1. Records each POST when it arrives; once
    ``hold_after`` requests have arrived, holds the answer to every later one until
    ``release()`` (the sender is then killed with them in flight)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, bytes]] = []  # (X-Switchboard-Delivery, body)
        self.held = 0
        self.hold_after: int | None = None
        self._gate = threading.Event()
        self._lock = threading.Lock()
        self.server, self.thread = serve_posts(self._received)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/dead-letters"

    def _received(self, handler: QuietHandler, body: bytes) -> None:
        with self._lock:
            self.received.append((handler.headers["X-Switchboard-Delivery"], body))
            hold = self.hold_after is not None and len(self.received) > self.hold_after
            self.held += hold
        if hold:
            self._gate.wait(timeout=60)
        try:
            handler.answer(200, b"ok")
        except OSError:
            pass  # the sender was killed while we held its answer

    def hold_from_now_after(self, answered: int) -> None:
        with self._lock:
            self.hold_after = len(self.received) + answered

    def release(self) -> None:
        self._gate.set()

    def times_received(self) -> Counter:
        with self._lock:
            return Counter(delivery_id for delivery_id, _ in self.received)

    def bodies_of(self, delivery_id: str) -> set[bytes]:
        with self._lock:
            return {body for d, body in self.received if d == delivery_id}

    def stop(self) -> None:
        self._gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink(team, settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True  # the sink URL is on loopback
    receiver = Sink()
    teams.add_sink(team, receiver.url)
    try:
        yield receiver
    finally:
        receiver.stop()


def _lapsed_at_the_cap(endpoint, agent, count: int, title: str) -> set[int]:
    """``count`` todos whose lease lapsed on their last allowed attempt: reaping one
    dead-letters it, which writes its dead-letter delivery in the same transaction."""
    template, _ = transitions.create_todo(Actor.agent(endpoint), title=title, max_attempts=1)
    transitions.claim(agent, template.id, lease_seconds=60)
    lapse_lease(template.id, seconds_ago=60)
    copies = _copy_todo(template.id, count - 1, title="t.title || ' ' || g")
    return {template.id, *copies}


def _deliveries(todo_ids: set[int]) -> list[Delivery]:
    return list(Delivery.objects.filter(todo_id__in=todo_ids, kind="dead_letter"))


def _sweep_once(env) -> dict[str, str]:
    result = subprocess.run(
        [SWITCHBOARD, "sweep", "--once"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def test_a_sweeper_killed_between_passes_or_mid_delivery_never_resends_a_recorded_delivery(
    endpoint, agent, sink, procs, crash_env
):
    # A sweeper that passes once at start, then sleeps: it can be killed between passes.
    env = {
        **crash_env,
        "SWITCHBOARD_SWEEP_INTERVAL_SECONDS": "600",
        "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE": "1",
    }

    # 1. Killed between passes: everything it delivered stays delivered once.
    first_batch = _lapsed_at_the_cap(endpoint, agent, 20, "first")
    first = procs.switchboard("sweep-1", "sweep", env=env)
    _wait_on(
        first, lambda: "sweep pass " in first.output(), "the first sweeper's pass to finish", procs
    )
    first.kill()
    assert Todo.objects.filter(pk__in=first_batch, state="dead").count() == 20
    delivered_first = {str(d.pk) for d in _deliveries(first_batch) if d.delivered_at}
    assert len(delivered_first) == 20

    assert _sweep_once(env)["delivered"] == "0"
    assert all(sink.times_received()[d] == 1 for d in delivered_first)

    # 2. Killed mid-delivery: 60 dead letters make two batches (outbox.deliver_due takes 50
    # at a time); the first is answered and recorded, the second is held in flight.
    assert outbox.deliver_due.__kwdefaults__["batch"] == 50
    second_batch = _lapsed_at_the_cap(endpoint, agent, 60, "second")
    sink.hold_from_now_after(50)
    second = procs.switchboard("sweep-2", "sweep", env=env)
    _wait_on(
        second, lambda: sink.held == 10, "the second batch of deliveries to be in flight", procs
    )
    second.kill()
    sink.release()  # their answers now go to a dead sender

    deliveries = _deliveries(second_batch)
    assert len(deliveries) == 60  # one per dead letter, written by the reap that killed it
    recorded = {str(d.pk) for d in deliveries if d.delivered_at}
    in_flight = {str(d.pk) for d in deliveries if not d.delivered_at}
    assert (len(recorded), len(in_flight)) == (50, 10)
    assert set(sink.times_received()) >= in_flight  # they were received, never recorded

    # The next pass leaves the in-flight rows alone until their lease lapses...
    assert _sweep_once(env)["delivered"] == "0"
    # ...(a backdated row stands in for waiting out outbox.LEASE_SECONDS) and then
    # sends each of them once more.
    Delivery.objects.filter(pk__in=[int(d) for d in in_flight]).update(
        next_attempt_at="2000-01-01T00:00:00Z"
    )
    assert _sweep_once(env)["delivered"] == "10"
    assert _sweep_once(env)["delivered"] == "0"

    assert not Delivery.objects.filter(delivered_at__isnull=True).exists()
    received = sink.times_received()
    # No delivery whose 2xx was recorded was ever sent again, across two kills and three
    # more passes.
    assert {received[d] for d in delivered_first | recorded} == {1}
    # At-least-once is honest about the rest: a POST cut off by the kill is sent again,
    # the same delivery (same X-Switchboard-Delivery, same body) for the receiver to dedupe.
    for delivery_id in in_flight:
        assert received[delivery_id] == 2
        assert len(sink.bodies_of(delivery_id)) == 1
    assert set(received) == delivered_first | recorded | in_flight


def test_a_delivery_answered_2xx_is_not_sent_again_when_another_in_its_batch_was_in_flight(
    endpoint, agent, sink, procs, crash_env
):
    env = {
        **crash_env,
        "SWITCHBOARD_SWEEP_INTERVAL_SECONDS": "600",
        "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE": "1",
    }
    dead = _lapsed_at_the_cap(endpoint, agent, 10, "batch")  # one batch, one POST each thread
    sink.hold_from_now_after(9)  # nine answered at once, the tenth held
    sweeper = procs.switchboard("sweep", "sweep", env=env)
    _wait_on(
        sweeper,
        lambda: sink.held == 1 and len(sink.times_received()) == 10,
        "nine deliveries answered and one in flight",
        procs,
    )
    answered = {d for d, _ in sink.received[:9]}

    # A sender that records each answer as it comes has recorded the nine by now; give it
    # a moment on a busy machine (this one records none of them before the tenth ends).
    def answered_recorded() -> bool:
        return Delivery.objects.filter(
            pk__in=[int(d) for d in answered], delivered_at__isnull=False
        ).count() == len(answered)

    deadline = time.monotonic() + 3
    while not answered_recorded() and time.monotonic() < deadline:
        time.sleep(0.05)
    sweeper.kill()
    sink.release()

    Delivery.objects.filter(todo_id__in=dead, delivered_at__isnull=True).update(
        next_attempt_at="2000-01-01T00:00:00Z"  # stands in for waiting out the lease
    )
    _sweep_once(env)
    assert not Delivery.objects.filter(todo_id__in=dead, delivered_at__isnull=True).exists()
    received = sink.times_received()
    assert {delivery_id: received[delivery_id] for delivery_id in answered} == dict.fromkeys(
        answered, 1
    )
