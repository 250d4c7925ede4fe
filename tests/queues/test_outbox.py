"""The outbox: rows written by triggers in the dead-lettering (or ringing) transaction, and
the sender that POSTs them to receivers started here on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone

from switchboard import dburl
from switchboard.queues import endpoints, outbox, sweeper, teams, transitions
from switchboard.queues.models import DeadLetterSink, Delivery, Todo, TodoQuestion
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease, make_retry_due, run_together
from tests.queues.receivers import receivers


@pytest.fixture
def sink_to(allowed, team, user):
    """A dead-letter sink of alice's team to a receiver: returns (sink, secret)."""

    def make(server):
        return teams.add_sink(team, server.url, by=user)

    return make


def _dead_letters() -> list[Delivery]:
    return list(Delivery.objects.filter(kind="dead_letter").order_by("id"))


def _doorbells(**filters) -> list[Delivery]:
    return list(Delivery.objects.filter(kind="doorbell", **filters).order_by("id"))


def _make_due() -> None:
    """Backdate every pending delivery's next try instead of sleeping through a backoff."""
    Delivery.objects.filter(delivered_at__isnull=True).update(
        next_attempt_at=timezone.now() - timedelta(seconds=1)
    )


def _kill(endpoint, agent, make_todo, *, summary="ran out of disk", artifact="mcp://cairn/r-7"):
    """A todo dead-lettered by a fail at the cap; returns its id."""
    todo = make_todo(max_attempts=1)
    transitions.claim_next(Actor.agent(endpoint), claimant="buildbox/run-9")
    transitions.fail(agent, todo.id, summary=summary, artifact=artifact, result={"disk": 0})
    return todo.id


# --- The triggers: one outbox row per dead letter and active sink, whatever the path


def _fail_at_cap(endpoint, agent, human, make_todo):
    todo = make_todo(max_attempts=2)
    for _ in range(2):
        claim = transitions.claim_next(Actor.agent(endpoint), claimant="run-1")
        transitions.fail(
            agent, todo.id, attempt_seq=claim.attempt_seq, summary="no disk", artifact="mcp://a/1"
        )
        Todo.objects.filter(pk=todo.id, state="retry_wait").update(
            next_retry_at=timezone.now() - timedelta(seconds=1)
        )
    return todo.id, {"outcome": "failed", "summary": "no disk", "artifact": "mcp://a/1"}


def _fail_not_retryable(endpoint, agent, human, make_todo):
    todo = make_todo(max_attempts=5)
    transitions.claim_next(Actor.agent(endpoint), claimant="run-1")
    transitions.fail(agent, todo.id, summary="bad input", retryable=False)
    return todo.id, {"outcome": "failed", "summary": "bad input", "died": False}


def _fail_by_hand_at_cap(endpoint, agent, human, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim(human, todo.id)
    transitions.fail(human, todo.id, summary="gave up by hand")
    return todo.id, {"outcome": "failed", "claimer_kind": "owner", "summary": "gave up by hand"}


def _reap_at_cap(endpoint, agent, human, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(Actor.agent(endpoint), claimant="run-1")
    lapse_lease(todo.id)
    transitions.reap_lapsed()
    return todo.id, {"outcome": "reaped", "died": True, "summary": None}


def _claim_takeover_at_cap(endpoint, agent, human, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(Actor.agent(endpoint), claimant="run-1")
    lapse_lease(todo.id)
    assert transitions.claim_next(Actor.agent(endpoint), claimant="run-2") is None
    return todo.id, {"outcome": "lease_expired", "died": True, "claimant": "run-1"}


def _claimed_then_revoked(endpoint, make_todo, close=None) -> int:
    """A todo claimed, its attempt closed by ``close(todo_id)`` (if given), then its endpoint
    revoked; returns its id."""
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint), claimant="run-1")
    if close is not None:
        close(todo.id)
    transitions.revoke_endpoint(None, endpoint)
    return todo.id


def _revoke_with_open_attempt(endpoint, agent, human, make_todo):
    todo_id = _claimed_then_revoked(endpoint, make_todo)
    return todo_id, {"outcome": "revoked", "disposition": "dead_lettered"}


def _revoke_after_a_release(endpoint, agent, human, make_todo):
    todo_id = _claimed_then_revoked(
        endpoint, make_todo, lambda todo_id: transitions.release(agent, todo_id, summary="not mine")
    )
    # No attempt was open when it died: no final attempt (the released one did not kill it).
    return todo_id, None


def _revoke_while_waiting_to_retry(endpoint, agent, human, make_todo):
    todo_id = _claimed_then_revoked(
        endpoint, make_todo, lambda todo_id: transitions.fail(agent, todo_id, summary="flaky")
    )
    # Its failed attempt scheduled a retry; the revocation killed it with none open.
    return todo_id, None


def _revoke_never_claimed(endpoint, agent, human, make_todo):
    todo = make_todo()
    transitions.revoke_endpoint(None, endpoint)
    return todo.id, None


DEAD_LETTER_PATHS = [
    _fail_at_cap,
    _fail_not_retryable,
    _fail_by_hand_at_cap,
    _reap_at_cap,
    _claim_takeover_at_cap,
    _revoke_with_open_attempt,
    _revoke_after_a_release,
    _revoke_while_waiting_to_retry,
    _revoke_never_claimed,
]
REASONS = {
    "_fail_at_cap": "failed",
    "_fail_not_retryable": "failed",
    "_fail_by_hand_at_cap": "failed",
    "_reap_at_cap": "reaped",
    "_claim_takeover_at_cap": "lease_expired",
}


def _check_dead_letter_row(todo_id: int, sink, path, expected_attempt) -> None:
    todo = Todo.objects.get(pk=todo_id)
    assert todo.state == "dead"
    [row] = _dead_letters()
    assert row.todo_id == todo_id and row.sink_id == sink.pk and row.url == sink.url
    assert row.team_id == sink.team_id and row.endpoint_id == todo.endpoint_id
    assert row.delivered_at is None and row.attempts == 0
    payload = row.payload
    assert payload["event"] == "dead_letter"
    assert payload["dead_letter_reason"] == REASONS.get(path.__name__, "revoked")
    assert payload["todo"] == {
        "id": todo.pk,
        "title": "rebuild docs",
        "endpoint": "agent-a",
        "team": "alice",
        "state": "dead",
        "round": 1,
        "attempt": todo.attempt,
        "failures": todo.failures,
        "max_attempts": todo.max_attempts,
        "created_at": todo.created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "ended_at": todo.ended_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    assert payload["attempts_total"] == todo.attempts_total
    final = payload["final_attempt"]
    if expected_attempt is None:
        # No attempt was open when it died (never claimed, or back in the queue).
        assert final is None and todo.attempts_total == payload["attempts_total"]
        return
    # The attempt row closed by the very statement that killed the todo, as closed.
    assert final["seq"] == todo.last_attempt_seq and final["ended_at"] is not None
    assert final["disposition"] == expected_attempt.pop("disposition", "dead_lettered")
    for key, value in expected_attempt.items():
        assert final[key] == value, key


@pytest.mark.parametrize("path", DEAD_LETTER_PATHS, ids=lambda p: p.__name__.strip("_"))
def test_each_dead_lettering_path_writes_one_row_with_the_final_attempt(
    path, receiver, sink_to, endpoint, agent, human, make_todo
):
    sink, _secret = sink_to(receiver())
    todo_id, expected = path(endpoint, agent, human, make_todo)
    _check_dead_letter_row(todo_id, sink, path, expected)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "path", [_fail_at_cap, _claim_takeover_at_cap, _reap_at_cap], ids=lambda p: p.__name__
)
def test_dead_lettering_in_autocommit_writes_the_row_too(
    path, receiver, sink_to, endpoint, agent, human, make_todo
):
    """The agent's fast close and claim_next run as single statements in autocommit."""
    assert connection.get_autocommit()
    sink, _secret = sink_to(receiver())
    todo_id, expected = path(endpoint, agent, human, make_todo)
    _check_dead_letter_row(todo_id, sink, path, expected)


def test_one_row_per_active_sink_and_none_without(
    receiver, sink_to, endpoint, agent, make_todo, user
):
    _kill(endpoint, agent, make_todo)
    assert _dead_letters() == []  # no sink yet

    first, _ = sink_to(receiver())
    second, _ = sink_to(receiver())
    off, _ = sink_to(receiver())
    teams.set_sink_active(off, False, by=user)
    _kill(endpoint, agent, make_todo)
    assert sorted(row.sink_id for row in _dead_letters()) == [first.pk, second.pk]


def test_a_todo_of_another_team_reaches_only_its_own_sinks(
    receiver, sink_to, make_user, make_endpoint, make_todo
):
    sink_to(receiver())
    bob = make_user("bob")
    bobs = make_endpoint("bobs-agent", team=bob.teams.get())
    todo = make_todo(on=bobs, max_attempts=1)
    transitions.claim_next(Actor.agent(bobs))
    transitions.fail(Actor.agent(bobs), todo.id)
    assert _dead_letters() == []


def test_the_payload_is_the_rows_own_copy_and_survives_retention(
    receiver, sink_to, endpoint, agent, make_todo, settings, monkeypatch
):
    from switchboard.queues import counters

    monkeypatch.setattr(counters, "FOLD_LAG_SECONDS", 0.0)  # counted at once: retention may go
    server = receiver()
    sink, secret = sink_to(server)
    todo_id = _kill(endpoint, agent, make_todo)
    # Not due yet, so this pass only runs retention (0 days: every terminal todo goes).
    Delivery.objects.update(next_attempt_at=timezone.now() + timedelta(hours=1))
    settings.SWITCHBOARD_RETENTION_DAYS = 0
    report = sweeper.sweep_once()
    assert report.deleted_by_age == 1 and not Todo.objects.filter(pk=todo_id).exists()

    _make_due()
    assert outbox.deliver_due() == 1
    [request] = server.requests
    assert request.signed_by(secret)
    body = request.json
    assert body["todo"]["id"] == todo_id and body["todo"]["title"] == "rebuild docs"
    assert body["final_attempt"]["summary"] == "ran out of disk"


# --- The sender


def test_a_receiver_gets_exactly_one_signed_delivery_per_dead_letter(
    receiver, sink_to, endpoint, agent, make_todo
):
    server = receiver()
    sink, secret = sink_to(server)
    first = _kill(endpoint, agent, make_todo)
    second = _kill(endpoint, agent, make_todo, summary="again", artifact="https://ci.example/2")

    assert outbox.deliver_due() == 2

    assert len(server.requests) == 2
    by_todo = {r.json["todo"]["id"]: r for r in server.requests}
    assert set(by_todo) == {first, second}
    rows = {row.todo_id: row for row in _dead_letters()}
    for todo_id, request in by_todo.items():
        assert request.signed_by(secret)
        assert not request.signed_by("sbw_some-other-secret")
        assert request.path == "/hook"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["x-switchboard-event"] == "dead_letter"
        assert request.delivery_id == str(rows[todo_id].pk)
        assert request.headers["x-switchboard-signature"].startswith("sha256=")
        assert request.json == rows[todo_id].payload
    body = by_todo[second].json
    assert body["dead_letter_reason"] == "failed" and body["attempts_total"] == 1
    assert body["todo"]["attempt"] == 1 and body["todo"]["failures"] == 1
    final = body["final_attempt"]
    assert final["outcome"] == "failed" and final["disposition"] == "dead_lettered"
    assert final["summary"] == "again" and final["artifact"] == "https://ci.example/2"
    assert final["claimant"] == "buildbox/run-9" and final["died"] is False
    for row in Delivery.objects.all():
        assert row.delivered_at is not None and row.last_status == 200 and row.attempts == 1

    # Delivered rows are never taken again, even when their next try looks due.
    _make_due()
    Delivery.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert outbox.deliver_due() == 0
    assert len(server.requests) == 2


def test_a_failing_receiver_is_retried_with_backoff_until_it_accepts(
    receiver, sink_to, endpoint, agent, make_todo
):
    server = receiver([500, 500])
    sink, secret = sink_to(server)
    _kill(endpoint, agent, make_todo)

    assert outbox.deliver_due() == 0
    [row] = _dead_letters()
    assert row.attempts == 1 and row.last_status == 500 and row.delivered_at is None
    assert row.last_error.startswith("HTTP 500") and "receiver says no" in row.last_error
    assert row.next_attempt_at > timezone.now() + timedelta(seconds=4)  # backoff: 5-10 s
    assert outbox.deliver_due() == 0 and len(server.requests) == 1  # not due yet

    _make_due()
    assert outbox.deliver_due() == 0
    row.refresh_from_db()
    assert row.attempts == 2 and row.last_status == 500

    _make_due()
    assert outbox.deliver_due() == 1
    row.refresh_from_db()
    assert row.attempts == 3 and row.last_status == 200 and row.last_error == ""
    assert row.delivered_at is not None

    _make_due()
    assert outbox.deliver_due() == 0
    assert [r.status for r in server.requests] == [500, 500, 200]
    assert len(server.accepted) == 1
    assert {r.delivery_id for r in server.requests} == {str(row.pk)}
    assert all(r.signed_by(secret) for r in server.requests)
    assert len({r.body for r in server.requests}) == 1  # the same payload each time


@pytest.fixture
def sweep_once(tmp_path):
    """`switchboard sweep --once` in a fresh process, as a restarted sweeper would run."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DEBUG"}
    }
    env.update(
        DATABASE_URL=dburl.build(connection.settings_dict),
        SWITCHBOARD_DEV="1",
        SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE="1",
    )
    command = [str(Path(sys.executable).with_name("switchboard")), "sweep", "--once"]

    def run() -> str:
        result = subprocess.run(
            command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, result.stderr
        return result.stdout + result.stderr

    return run


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_each_try_by_a_freshly_started_sweeper_still_delivers_once(
    receiver, sink_to, endpoint, agent, make_todo, sweep_once
):
    server = receiver([500, 500])
    sink, secret = sink_to(server)
    _kill(endpoint, agent, make_todo)

    for expected in ("delivered: 0", "delivered: 0", "delivered: 1"):
        assert expected in sweep_once().splitlines()
        _make_due()
    assert "delivered: 0" in sweep_once().splitlines()  # never again after the 2xx

    [row] = _dead_letters()
    assert row.delivered_at is not None and row.last_status == 200 and row.attempts == 3
    assert [r.status for r in server.requests] == [500, 500, 200]
    assert len(server.accepted) == 1
    assert {r.delivery_id for r in server.requests} == {str(row.pk)}
    assert all(r.signed_by(secret) for r in server.requests)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_senders_at_once_send_each_row_once(receiver, sink_to, endpoint, agent, make_todo):
    server = receiver(delay=0.02)
    sink_to(server)
    for _ in range(24):
        _kill(endpoint, agent, make_todo)
    counts: list[int] = []

    def sender(_n: int) -> None:
        counts.append(outbox.deliver_due(batch=4))

    assert run_together(sender, 2, timeout=60) == []
    ids = [r.delivery_id for r in server.requests]
    assert len(ids) == 24 and len(set(ids)) == 24
    assert sum(counts) == 24
    assert all(count > 0 for count in counts)  # both took part
    assert not Delivery.objects.filter(delivered_at__isnull=True).exists()


def test_a_sender_that_died_mid_post_sends_again_after_the_lease(
    receiver, sink_to, endpoint, agent, make_todo
):
    """At least once: a row leased by a sender that never came back is taken again once
    its lease lapses (the receiver dedupes on the delivery id if the first POST arrived)."""
    server = receiver()
    sink_to(server)
    _kill(endpoint, agent, make_todo)
    jobs, _taken = outbox._lease(50)  # leased, then the sender "dies" before posting
    assert len(jobs) == 1
    assert outbox.deliver_due() == 0  # leased: nobody else takes it
    _make_due()  # the lease lapses
    assert outbox.deliver_due() == 1
    [row] = _dead_letters()
    assert row.attempts == 2 and len(server.requests) == 1


def test_a_redirect_is_not_followed(receiver, sink_to, endpoint, agent, make_todo):
    elsewhere = receiver()
    server = receiver([302], location=elsewhere.url)
    sink_to(server)
    _kill(endpoint, agent, make_todo)

    assert outbox.deliver_due() == 0

    [row] = _dead_letters()
    assert row.last_status == 302 and "redirect, not followed" in row.last_error
    assert row.delivered_at is None and row.gave_up_at is None
    assert len(server.requests) == 1 and elsewhere.requests == []


def test_a_private_target_is_refused_unless_allowed(
    receiver, endpoint, agent, make_todo, team, settings
):
    server = receiver()
    # A sink saved while private targets were allowed, sent after they no longer are.
    DeadLetterSink.objects.create(team=team, url=server.url, secret="sbw_x")
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False
    _kill(endpoint, agent, make_todo)

    assert outbox.deliver_due() == 0

    [row] = _dead_letters()
    assert row.last_status is None and row.delivered_at is None and row.attempts == 1
    assert row.last_error.startswith("refused: 127.0.0.1 is a loopback address;")
    assert "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE" in row.last_error
    assert server.requests == []

    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True
    _make_due()
    assert outbox.deliver_due() == 1 and len(server.requests) == 1


def test_an_unreachable_receiver_is_a_failure_with_the_reason(
    sink_to, endpoint, agent, make_todo, receiver
):
    server = receiver()
    sink, _ = sink_to(server)
    server.stop()  # nothing listens there any more
    _kill(endpoint, agent, make_todo)

    assert outbox.deliver_due() == 0

    [row] = _dead_letters()
    assert row.last_status is None and row.attempts == 1
    assert "ConnectionRefusedError" in row.last_error and "127.0.0.1" in row.last_error


def test_it_gives_up_after_the_last_try(receiver, sink_to, endpoint, agent, make_todo):
    server = receiver([503])
    sink_to(server)
    _kill(endpoint, agent, make_todo)
    Delivery.objects.update(attempts=outbox.MAX_TRIES - 1)

    assert outbox.deliver_due() == 0

    [row] = _dead_letters()
    assert row.gave_up_at is not None and row.attempts == outbox.MAX_TRIES
    assert row.last_error.startswith(f"gave up after {outbox.MAX_TRIES} tries: HTTP 503")
    _make_due()
    assert outbox.deliver_due() == 0 and len(server.requests) == 1


@pytest.mark.parametrize("how", ["deactivated", "deleted"])
def test_a_delivery_to_a_sink_that_went_away_is_given_up(
    how, receiver, sink_to, endpoint, agent, make_todo, user
):
    server = receiver()
    sink, _ = sink_to(server)
    _kill(endpoint, agent, make_todo)
    if how == "deleted":
        teams.remove_sink(sink, by=user)
    else:
        teams.set_sink_active(sink, False, by=user)

    assert outbox.deliver_due() == 0

    [row] = _dead_letters()
    assert row.gave_up_at is not None and row.attempts == 0
    assert row.last_error == f"not sent: its dead-letter sink was {how}"
    assert row.payload["todo"]["title"] == "rebuild docs"  # kept as a record
    assert server.requests == []


def test_backoff_doubles_from_ten_seconds_with_jitter_up_to_an_hour():
    for tries, low, high in [
        (1, 5, 10),
        (2, 10, 20),
        (4, 40, 80),
        (9, 1280, 2560),
        (12, 1800, 3600),
    ]:
        waits = [outbox.backoff_seconds(tries) for _ in range(50)]
        assert all(low <= wait <= high for wait in waits), tries
    assert outbox.backoff_seconds(1000) <= outbox.BACKOFF_MAX_SECONDS


# --- Doorbells


@pytest.fixture
def ringing(allowed, endpoint, user, receiver):
    """alice's endpoint with a notify URL (a receiver): returns (receiver, secret)."""
    server = receiver()
    secret = endpoints.set_notify_url(endpoint, server.url, user=user)
    return server, secret


def _claimed(endpoint, make_todo):
    """A new todo, claimed (a claim does not ring)."""
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    return todo


def _create_rings(endpoint, agent, human, make_todo):
    todo = make_todo()
    return todo.id


def _release_rings(endpoint, agent, human, make_todo):
    todo = make_todo()
    Delivery.objects.all().delete()
    transitions.claim_next(Actor.agent(endpoint))
    assert _doorbells() == []  # a claim does not ring
    transitions.release(agent, todo.id)
    return todo.id


def _reap_rings(endpoint, agent, human, make_todo):
    todo = _claimed(endpoint, make_todo)
    lapse_lease(todo.id)
    Delivery.objects.all().delete()
    transitions.reap_lapsed()
    return todo.id


def _requeued_retry_rings(endpoint, agent, human, make_todo):
    todo = _claimed(endpoint, make_todo)
    Delivery.objects.all().delete()
    transitions.fail(agent, todo.id)
    assert _doorbells() == []  # retry_wait is not pending yet
    make_retry_due(todo.id)
    assert transitions.requeue_due_retries() == 1
    return todo.id


def _retry_now_rings(endpoint, agent, human, make_todo):
    todo = _claimed(endpoint, make_todo)
    transitions.fail(agent, todo.id)
    Delivery.objects.all().delete()
    transitions.retry_now(Actor.human(human.user), todo.id)
    return todo.id


def _rerun_rings(endpoint, agent, human, make_todo):
    todo = _claimed(endpoint, make_todo)
    Delivery.objects.all().delete()
    transitions.complete(agent, todo.id)
    assert _doorbells() == []  # done is not claimable
    transitions.rerun(Actor.human(human.user), todo.id)
    return todo.id


RING_PATHS = [
    _create_rings,
    _release_rings,
    _reap_rings,
    _requeued_retry_rings,
    _retry_now_rings,
    _rerun_rings,
]


@pytest.mark.parametrize("path", RING_PATHS, ids=lambda p: p.__name__.strip("_"))
def test_a_todo_becoming_claimable_rings_the_notify_url_once(
    path, ringing, endpoint, agent, human, make_todo, team
):
    server, secret = ringing
    todo_id = path(endpoint, agent, human, make_todo)

    [row] = _doorbells()
    assert row.endpoint_id == endpoint.pk and row.team_id == team.pk and row.sink_id is None
    assert row.url == server.url and row.todo_id == todo_id
    assert row.payload["event"] == "doorbell" and row.payload["todo_id"] == todo_id
    assert row.payload["endpoint"] == "agent-a" and row.payload["team"] == "alice"
    assert row.payload["rung_at"].endswith("Z")

    assert outbox.deliver_due() == 1
    [request] = server.requests
    assert request.headers["x-switchboard-event"] == "doorbell"
    assert request.delivery_id == str(row.pk) and request.signed_by(secret)
    assert request.json == row.payload


@pytest.mark.parametrize("path", RING_PATHS, ids=lambda p: p.__name__.strip("_"))
def test_nothing_rings_without_a_notify_url(path, endpoint, agent, human, make_todo):
    path(endpoint, agent, human, make_todo)
    assert _doorbells() == []


def test_rings_coalesce_into_one_pending_doorbell(ringing, endpoint, make_todo):
    server, _secret = ringing
    first = make_todo("one")
    make_todo("two")
    make_todo("three")
    [row] = _doorbells()
    assert row.payload["todo_id"] == first.id

    assert outbox.deliver_due() == 1
    assert len(server.requests) == 1
    make_todo("four")  # after delivery, the next ring is a new doorbell
    assert len(_doorbells(delivered_at__isnull=True)) == 1
    assert len(_doorbells()) == 2


@pytest.mark.django_db(transaction=True)
def test_a_ring_while_the_doorbell_is_in_flight_sends_it_again(allowed, endpoint, user):
    with receivers() as start:
        later: list[int] = []

        def ring_again_once() -> None:
            # Another todo becomes claimable while the receiver is still answering.
            if not later:
                try:
                    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="later")
                    later.append(todo.id)
                finally:
                    connection.close()

        server = start(on_request=ring_again_once)
        endpoints.set_notify_url(endpoint, server.url, user=user)
        first, _ = transitions.create_todo(Actor.agent(endpoint), title="first")

        assert outbox.deliver_due() == 1
        sent, again = _doorbells()
        assert sent.delivered_at is not None and sent.payload["todo_id"] == first.id
        assert again.delivered_at is None and again.payload["todo_id"] == later[0]  # due now
        assert outbox.deliver_due() == 1

    assert all(row.delivered_at is not None for row in _doorbells())
    assert [r.json["todo_id"] for r in server.requests] == [first.id, later[0]]
    # Two deliveries: a receiver that dedupes on the delivery id still hears the second.
    assert [r.delivery_id for r in server.requests] == [str(sent.pk), str(again.pk)]


def test_a_revoked_endpoint_rings_no_more(ringing, endpoint, make_todo):
    todo = make_todo()
    transitions.revoke_endpoint(None, endpoint)
    Delivery.objects.all().delete()
    # The race the sweeper's leftovers pass cleans up: a todo of a revoked endpoint pending
    # again (written here directly; no transition does it).
    Todo.objects.filter(pk=todo.id).update(state="pending", dead_letter_reason="", ended_at=None)
    assert _doorbells() == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ("clear", "not sent: the endpoint's notify URL was removed"),
        ("revoke", "not sent: the endpoint was revoked"),
    ],
)
def test_a_doorbell_whose_endpoint_stopped_listening_is_given_up(
    change, error, ringing, endpoint, make_todo, user
):
    server, _secret = ringing
    make_todo()
    if change == "clear":
        endpoints.set_notify_url(endpoint, "", user=user)
    else:
        transitions.revoke_endpoint(None, endpoint)

    assert outbox.deliver_due() == 0

    [row] = _doorbells()
    assert row.gave_up_at is not None and row.last_error == error
    assert server.requests == []


def test_a_rotated_notify_secret_signs_the_doorbells_not_yet_sent(
    ringing, endpoint, make_todo, user
):
    server, old = ringing
    make_todo()
    new = endpoints.rotate_notify_secret(endpoint, user=user)
    assert outbox.deliver_due() == 1
    [request] = server.requests
    assert request.signed_by(new) and not request.signed_by(old)


# --- Keeping the outbox small


def test_finished_deliveries_go_after_the_retention_period(team):
    old = timezone.now() - timedelta(days=31)
    young = timezone.now() - timedelta(days=29)

    def row(created_at, **state) -> int:
        return Delivery.objects.create(
            kind="dead_letter",
            team=team,
            url="https://x.example/",
            payload={},
            created_at=created_at,
            **state,
        ).pk

    still_to_send = row(old)  # never deleted while it may still be sent
    delivered = row(old, delivered_at=old, last_status=200)
    gave_up = row(old, gave_up_at=old, last_error="gave up")
    recent = row(young, delivered_at=young, last_status=200)
    beyond_the_head = row(old, delivered_at=old, last_status=200)

    assert outbox.prune_finished(days=30, batch=4) == 2
    left = set(Delivery.objects.values_list("pk", flat=True))
    assert left == {still_to_send, recent, beyond_the_head}
    assert outbox.prune_finished(days=30, batch=4) == 1  # the next pass reaches further
    assert set(Delivery.objects.values_list("pk", flat=True)) == {still_to_send, recent}
    assert {delivered, gave_up}.isdisjoint(left)


# --- Questions: todo.waiting, when an agent asks a person


def _waiting(**filters) -> list[Delivery]:
    return list(Delivery.objects.filter(kind="todo.waiting", **filters).order_by("id"))


def _ask(endpoint, make_todo, requester=None, **question):
    """A todo its agent claimed and asked about; returns the todo's id."""
    todo = make_todo("migrate billing", requester=requester)
    transitions.claim_next(Actor.agent(endpoint), claimant="harness/buildbox/run-7")
    transitions.release(Actor.agent(endpoint), todo.id, **{"question": "Drop it?", **question})
    return todo.id


def test_an_ask_sends_each_active_sink_one_signed_todo_waiting(
    receiver, sink_to, endpoint, make_todo, user, team
):
    server = receiver()
    sink, secret = sink_to(server)
    off, _ = sink_to(receiver())
    teams.set_sink_active(off, False, by=user)
    question = "The migration drops a column with data in it: go ahead?\n<b>ok</b>"

    todo_id = _ask(
        endpoint,
        make_todo,
        question=question,
        choices=["yes", "no"],
        answer_within_seconds=3600,
        on_no_answer="dead_letter",
    )

    [row] = _waiting()  # the active sink's; the asking endpoint's queue rings nothing
    assert row.sink_id == sink.pk and row.endpoint_id is None and row.url == sink.url
    assert row.team_id == team.pk and row.todo_id == todo_id
    assert _doorbells() == [] and _dead_letters() == []
    todo = Todo.objects.get(pk=todo_id)
    asked = TodoQuestion.objects.get(todo_id=todo_id)
    utc = "%Y-%m-%dT%H:%M:%S.%fZ"
    assert row.payload == {
        "event": "todo.waiting",
        "todo": {
            "id": todo_id,
            "title": "migrate billing",
            "endpoint": "agent-a",
            "team": "alice",
            "state": "waiting",
            "waiting_for": "people",
            "round": 1,
            "attempt": 1,
            "failures": 0,
            "max_attempts": todo.max_attempts,
            "requester": None,
            "created_at": todo.created_at.strftime(utc),
        },
        "question": {
            "attempt_seq": 1,
            "text": question,
            "text_truncated": False,
            "text_bytes": len(question.encode()),
            "choices": ["yes", "no"],
            "answer_schema": None,
            "asked_at": asked.asked_at.strftime(utc),
            "answer_within_seconds": 3600,
            "expires_at": asked.expires_at.strftime(utc),
            "on_no_answer": "dead_letter",
            "claimant": "harness/buildbox/run-7",
            "endpoint": "agent-a",
        },
    }

    assert outbox.deliver_due() == 1
    [request] = server.requests
    assert request.signed_by(secret) and not request.signed_by("sbw_another")
    assert request.headers["x-switchboard-event"] == "todo.waiting"
    assert request.delivery_id == str(row.pk)
    assert request.json == row.payload  # the question as the agent wrote it: data, unrendered
    row.refresh_from_db()
    assert row.delivered_at is not None and row.last_status == 200


def test_a_long_question_arrives_truncated_and_marked(receiver, sink_to, endpoint, make_todo):
    sink_to(receiver())
    _ask(endpoint, make_todo, question="é" * 3000, answer_schema=None)

    [row] = _waiting()
    told = row.payload["question"]
    assert told["text_truncated"] is True and told["text_bytes"] == 6000
    assert len(told["text"].encode()) <= 2048 and told["choices"] is None


def test_an_ordinary_release_or_fail_sends_no_todo_waiting(
    receiver, sink_to, ringing, endpoint, agent, make_todo
):
    server = receiver()
    sink_to(server)
    todo = make_todo()
    transitions.claim_next(agent)
    transitions.release(agent, todo.id, summary="not mine")
    transitions.claim_next(agent)
    transitions.fail(agent, todo.id, summary="flaky")

    assert _waiting() == []
    outbox.deliver_due()
    assert server.requests == []  # the sink hears of no release (nor a retry)
    doorbell, _ = ringing
    assert {r.headers["x-switchboard-event"] for r in doorbell.requests} == {"doorbell"}


def test_the_requester_that_may_answer_hears_at_its_notify_url(
    allowed, receiver, vend, endpoint, make_todo, user
):
    orchestrator, _ = vend("orchestrator")
    server = receiver()
    secret = endpoints.set_notify_url(orchestrator, server.url, user=user)
    asking_doorbell = receiver()
    endpoints.set_notify_url(endpoint, asking_doorbell.url, user=user)

    todo_id = _ask(
        endpoint,
        make_todo,
        requester=orchestrator,
        answer_schema={"type": "object", "properties": {"refund": {"type": "boolean"}}},
    )

    [row] = _waiting()  # no sink: the requester's only
    assert row.endpoint_id == orchestrator.pk and row.sink_id is None
    assert row.payload["todo"]["requester"] == "orchestrator"
    assert row.payload["question"]["answer_schema"]["properties"] == {"refund": {"type": "boolean"}}
    assert outbox.deliver_due() == 2  # and the create's doorbell of the asking queue
    [request] = server.requests
    assert request.signed_by(secret) and request.json["todo"]["id"] == todo_id
    assert request.headers["x-switchboard-event"] == "todo.waiting"
    # The asking queue's agents can neither claim nor answer it: its doorbell rang only for
    # the create.
    assert [r.headers["x-switchboard-event"] for r in asking_doorbell.requests] == ["doorbell"]


def test_an_endpoint_that_cannot_answer_is_not_told(
    allowed, receiver, vend, endpoint, make_todo, user
):
    sender, _ = vend("sender", verbs=["create_todo", "get_todo"])
    endpoints.set_notify_url(sender, receiver().url, user=user)

    _ask(endpoint, make_todo, requester=sender)

    assert _waiting() == []


def test_an_agent_asking_about_its_own_todo_is_told_itself(
    allowed, receiver, endpoint, make_todo, user
):
    """A todo an endpoint made on its own queue: that endpoint may answer (``answer``)."""
    server = receiver()
    endpoints.set_notify_url(endpoint, server.url, user=user)

    _ask(endpoint, make_todo)

    [row] = _waiting()
    assert row.endpoint_id == endpoint.pk and row.url == server.url


def test_a_todo_waiting_to_a_deleted_sink_is_given_up(receiver, sink_to, endpoint, make_todo, user):
    server = receiver()
    sink, _ = sink_to(server)
    _ask(endpoint, make_todo)
    teams.remove_sink(sink, by=user)

    assert outbox.deliver_due() == 0
    [row] = _waiting()
    assert row.sink_id is None and row.endpoint_id is None
    assert row.gave_up_at is not None
    assert row.last_error == "not sent: its dead-letter sink was deleted"
    assert server.requests == []


def test_a_todo_waiting_row_names_one_target(receiver, sink_to, endpoint, make_todo, team):
    from django.db import IntegrityError

    sink, _ = sink_to(receiver())
    with pytest.raises(IntegrityError), transaction.atomic():
        Delivery.objects.create(
            kind="todo.waiting",
            team=team,
            sink=sink,
            endpoint=endpoint,
            url=sink.url,
            payload={},
        )
