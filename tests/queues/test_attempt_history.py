"""ADR-0039's Confirmation list at the service level, plus bounds, fences, stale workers and
bad input (a precise domain error and nothing written)."""

from __future__ import annotations

import pytest
from django.db import connection

from switchboard.queues import transitions
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    get_todo_for_endpoint,
    get_todo_for_user,
    lapse_lease,
    make_retry_due,
    open_attempts,
)


def snapshot(todo_id: int) -> tuple:
    """Everything a transition could change, to assert 'nothing written'."""
    todo = Todo.objects.filter(pk=todo_id).values().get()
    attempts = list(TodoAttempt.objects.filter(todo_id=todo_id).order_by("seq").values())
    return todo, attempts


# --- ADR-0039 Confirmation --------------------------------------------------------------


def test_claim_heartbeat_fail_backoff_requeue_claim_records_two_attempts(
    settings, endpoint, agent, make_todo
):
    todo = make_todo(max_attempts=3)
    first = transitions.claim_next(Actor.agent(endpoint), claimant="relay/run-1")
    transitions.heartbeat(agent, todo.id, attempt_seq=first.attempt_seq)
    failed = transitions.fail(
        agent,
        todo.id,
        attempt_seq=first.attempt_seq,
        summary="tests still red",
        artifact="mcp://cairn/r-1",
    )
    assert failed.todo.state == "retry_wait" and failed.todo.next_retry_at is not None
    make_retry_due(todo.id)
    assert transitions.requeue_due_retries() == 1
    assert Todo.objects.get(pk=todo.id).state == "pending"

    second = transitions.claim_next(Actor.agent(endpoint), claimant="relay/run-2")

    assert [(a.seq, a.outcome) for a in attempts_of(todo.id)] == [(1, "failed"), (2, "")]
    [prior] = second.prior_attempts
    assert prior.seq == 1 and prior.outcome == "failed" and not prior.died
    assert prior.summary == "tests still red" and prior.artifact == "mcp://cairn/r-1"
    assert prior.claimant == "relay/run-1" and prior.last_heartbeat_at is not None


def test_reaped_attempt_is_marked_died_and_listed_on_the_next_claim(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    transitions.heartbeat(agent, todo.id)
    lapse_lease(todo.id)
    transitions.reap_lapsed()

    claim = transitions.claim_next(Actor.agent(endpoint))

    [prior] = claim.prior_attempts
    assert prior.outcome == "reaped" and prior.died and prior.disposition == "requeued"
    assert prior.last_heartbeat_at is not None and prior.summary is None


def test_takeover_attempt_is_lease_expired_and_died(endpoint, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)

    claim = transitions.claim_next(Actor.agent(endpoint))

    [prior] = claim.prior_attempts
    assert prior.outcome == "lease_expired" and prior.died
    detail = get_todo_for_endpoint(endpoint, todo.id)
    assert [(a.seq, a.died) for a in detail.attempts] == [(2, False), (1, True)]


def test_foreign_todo_is_not_found_exactly_like_an_unknown_one(make_endpoint, make_todo):
    a, b = make_endpoint("endpoint-a"), make_endpoint("endpoint-b")
    todo = make_todo(on=a)
    transitions.claim_next(Actor.agent(a))

    with pytest.raises(NotFound) as foreign:
        get_todo_for_endpoint(b, todo.id)
    with pytest.raises(NotFound) as unknown:
        get_todo_for_endpoint(b, 987_654_321)

    assert foreign.value.as_dict() == unknown.value.as_dict()
    for verb in (
        transitions.complete,
        transitions.fail,
        transitions.release,
        transitions.heartbeat,
        transitions.claim,
    ):
        with pytest.raises(NotFound) as foreign:
            verb(Actor.agent(b), todo.id)
        with pytest.raises(NotFound) as unknown:
            verb(Actor.agent(b), 987_654_321)
        assert foreign.value.as_dict() == unknown.value.as_dict()


def test_foreign_todo_is_not_found_on_the_board_path(make_user, make_todo):
    todo = make_todo()
    outsider = make_user("mallory")
    with pytest.raises(NotFound) as foreign:
        get_todo_for_user(outsider, todo.id)
    with pytest.raises(NotFound) as unknown:
        get_todo_for_user(outsider, 987_654_321)
    assert foreign.value.as_dict() == unknown.value.as_dict()
    for act in (transitions.claim, transitions.release, transitions.cancel):
        with pytest.raises(NotFound):
            act(Actor.human(outsider), todo.id)
    for act in (transitions.retry_now, transitions.rerun):
        with pytest.raises(NotFound):
            act(Actor.human(outsider), todo.id)
    assert Todo.objects.get(pk=todo.id).state == "pending"


def test_fenced_complete_without_or_with_another_token_is_conflict(endpoint, agent, make_todo):
    old, todo = make_todo("old"), make_todo("fenced")
    other = transitions.claim(agent, old.id, require_fence=True)
    claim = transitions.claim(agent, todo.id, require_fence=True)
    assert claim.lease_token and claim.lease_token != other.lease_token
    before = snapshot(todo.id)

    with pytest.raises(Conflict):
        transitions.complete(agent, todo.id)
    with pytest.raises(Conflict):
        transitions.complete(agent, todo.id, lease_token=other.lease_token)
    with pytest.raises(Conflict):
        transitions.heartbeat(agent, todo.id)

    assert snapshot(todo.id) == before and before[0]["state"] == "claimed"
    closed = transitions.complete(agent, todo.id, lease_token=claim.lease_token)
    assert closed.todo.state == "done"


def test_lease_token_is_stored_only_as_its_hash(endpoint, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim_next(Actor.agent(endpoint), require_fence=True)
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert len(claim.lease_token) >= 22  # >= 128 bits of urlsafe base64
    assert attempt.lease_token_hash and claim.lease_token not in attempt.lease_token_hash
    assert claim.lease_token not in repr(claim)


def test_sixty_claims_keep_fifty_rows_and_count_ten_pruned(endpoint, agent, make_todo):
    todo = make_todo()
    for _ in range(60):
        transitions.claim(agent, todo.id)
        transitions.release(agent, todo.id)

    row = Todo.objects.get(pk=todo.id)
    assert TodoAttempt.objects.filter(todo_id=todo.id).count() == 50
    assert row.attempts_pruned == 10 and row.attempts_total == 50
    assert min(a.seq for a in attempts_of(todo.id)) == 11
    detail = get_todo_for_endpoint(endpoint, todo.id, attempts_limit=50)
    assert detail.todo.attempts_total == 50 and len(detail.attempts) == 50


def test_history_cap_of_one_keeps_the_invariant_through_takeovers(
    settings, endpoint, agent, make_todo
):
    settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO = 1
    todo = make_todo(max_attempts=100)
    for _ in range(5):
        transitions.claim(agent, todo.id)
        lapse_lease(todo.id)
    transitions.claim(agent, todo.id)
    row = Todo.objects.get(pk=todo.id)
    kept = TodoAttempt.objects.filter(todo_id=todo.id).count()
    assert kept == row.last_attempt_seq - row.attempts_pruned
    assert kept <= 2 and open_attempts(todo.id) == 1


def test_prior_attempts_are_the_five_newest_closed_newest_first(endpoint, agent, make_todo):
    todo = make_todo()
    for n in range(7):
        transitions.claim(agent, todo.id)
        transitions.release(agent, todo.id, summary=f"pass {n + 1}")

    claim = transitions.claim(agent, todo.id)

    assert [a.seq for a in claim.prior_attempts] == [7, 6, 5, 4, 3]
    assert claim.prior_attempts[0].summary == "pass 7"


def test_a_five_kilobyte_multibyte_summary_is_truncated_on_a_character_boundary(
    endpoint, agent, make_todo
):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint), claimant="ü" * 100)  # 200 bytes
    summary = "€" * 1707  # 3 bytes each: 5121 bytes

    transitions.complete(agent, todo.id, summary=summary, artifact="https://x.test/" + "a" * 600)

    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    stored = attempt.summary.encode("utf-8")
    assert len(stored) <= 2048 and len(stored) == 2046 and attempt.summary == "€" * 682
    assert attempt.summary_truncated and attempt.summary_bytes == 5121
    assert attempt.claimant == "ü" * 64 and attempt.claimant_truncated
    assert attempt.claimant_bytes == 200
    assert attempt.artifact_truncated and len(attempt.artifact.encode()) == 512


def test_oversize_result_is_stored_as_a_marked_prefix(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    transitions.complete(agent, todo.id, result={"log": "x" * 100_000})
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert attempt.result["truncated"] is True and attempt.result["bytes"] > 100_000
    assert attempt.result["prefix"].startswith('{"log":"xxx')


def test_summary_from_result_is_off_by_default_and_derived_when_on(
    settings, endpoint, agent, make_todo
):
    first, second = make_todo("one"), make_todo("two")
    transitions.claim(agent, first.id)
    transitions.complete(agent, first.id, result={"a": 1})
    settings.SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT = True
    transitions.claim(agent, second.id)
    transitions.complete(agent, second.id, result={"a": 1})
    assert TodoAttempt.objects.get(todo_id=first.id).summary is None
    assert TodoAttempt.objects.get(todo_id=second.id).summary == '{"a":1}'


# --- Stale workers and which attempt a call means ------------------------------------------


def test_stale_unfenced_worker_with_its_seq_cannot_fail_the_new_attempt(endpoint, agent, make_todo):
    todo = make_todo()
    a = transitions.claim_next(Actor.agent(endpoint), claimant="worker-a")
    lapse_lease(todo.id)
    b = transitions.claim_next(Actor.agent(endpoint), claimant="worker-b")
    before = snapshot(todo.id)

    with pytest.raises(Conflict):
        transitions.fail(agent, todo.id, attempt_seq=a.attempt_seq, summary="late")

    assert snapshot(todo.id) == before
    assert open_attempts(todo.id) == 1
    assert TodoAttempt.objects.get(todo_id=todo.id, seq=b.attempt_seq).ended_at is None


def test_stale_fenced_worker_is_refused(endpoint, agent, make_todo):
    todo = make_todo()
    a = transitions.claim_next(Actor.agent(endpoint), require_fence=True)
    lapse_lease(todo.id)
    b = transitions.claim_next(Actor.agent(endpoint), require_fence=True)

    with pytest.raises(Conflict):
        transitions.complete(agent, todo.id, lease_token=a.lease_token)
    with pytest.raises(Conflict):
        transitions.heartbeat(agent, todo.id, lease_token=a.lease_token)

    assert transitions.complete(agent, todo.id, lease_token=b.lease_token).todo.state == "done"


def test_repeating_a_close_returns_the_recorded_result_and_writes_nothing(
    endpoint, agent, make_todo
):
    todo = make_todo()
    claim = transitions.claim_next(Actor.agent(endpoint), require_fence=True)
    fence = {"attempt_seq": claim.attempt_seq, "lease_token": claim.lease_token}
    first = transitions.complete(agent, todo.id, **fence, result={"n": 1})
    before = snapshot(todo.id)

    again = transitions.complete(agent, todo.id, **fence, result={"n": 2})

    assert again.replayed and not first.replayed
    assert again.attempt.outcome == "completed" and again.todo.result == {"n": 1}
    assert snapshot(todo.id) == before
    with pytest.raises(Conflict):  # a different verb is not a repeat
        transitions.fail(agent, todo.id, **fence)
    with pytest.raises(Conflict):  # nor is the same verb without the fence
        transitions.complete(agent, todo.id, attempt_seq=claim.attempt_seq)


def test_repeat_without_seq_replays_the_latest_closed_attempt(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    transitions.release(agent, todo.id)
    again = transitions.release(agent, todo.id)
    assert again.replayed and again.attempt.seq == 1


def test_closing_a_todo_nobody_holds_is_conflict(endpoint, agent, make_todo):
    todo = make_todo()
    before = snapshot(todo.id)
    for verb in (transitions.complete, transitions.fail, transitions.release):
        with pytest.raises(Conflict):
            verb(agent, todo.id)
    with pytest.raises(Conflict):
        transitions.heartbeat(agent, todo.id)
    assert snapshot(todo.id) == before


def test_claiming_a_claimed_todo_is_conflict(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    with pytest.raises(Conflict):
        transitions.claim(agent, todo.id)
    assert open_attempts(todo.id) == 1


# --- Bad input: a precise domain error and nothing written ---------------------------------


@pytest.mark.parametrize(
    "artifact",
    [
        "ftp://files/x",
        "http://insecure.test/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "",
        "cairn/r-1",
    ],
)
def test_artifact_with_another_scheme_is_invalid_and_nothing_is_written(
    endpoint, agent, make_todo, artifact
):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    before = snapshot(todo.id)
    with pytest.raises(Invalid):
        transitions.complete(agent, todo.id, summary="x", artifact=artifact)
    assert snapshot(todo.id) == before


@pytest.mark.parametrize("lease_seconds", [0, -5, 86_401, "60", 1.5, True])
def test_lease_seconds_out_of_range_is_invalid(endpoint, agent, make_todo, lease_seconds):
    todo = make_todo()
    before = snapshot(todo.id)
    with pytest.raises(Invalid):
        transitions.claim_next(Actor.agent(endpoint), lease_seconds=lease_seconds)
    with pytest.raises(Invalid):
        transitions.claim(agent, todo.id, lease_seconds=lease_seconds)
    assert snapshot(todo.id) == before


def test_wrong_types_are_invalid(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    before = snapshot(todo.id)
    bad_calls = [
        lambda: transitions.complete(agent, "1"),
        lambda: transitions.complete(agent, todo.id, attempt_seq="1"),
        lambda: transitions.complete(agent, todo.id, attempt_seq=0),
        lambda: transitions.complete(agent, todo.id, lease_token=123),
        lambda: transitions.complete(agent, todo.id, summary=["not", "text"]),
        lambda: transitions.complete(agent, todo.id, result={"bad": float("nan")}),
        lambda: transitions.fail(agent, todo.id, retryable="no"),
        lambda: transitions.claim_next(Actor.agent(endpoint), require_fence="yes"),
        lambda: transitions.claim_next(Actor.agent(endpoint), claimant=42),
    ]
    for call in bad_calls:
        with pytest.raises(Invalid):
            call()
    assert snapshot(todo.id) == before


def test_a_stale_attempt_seq_is_conflict(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    transitions.release(agent, todo.id)
    transitions.claim_next(Actor.agent(endpoint))
    before = snapshot(todo.id)
    with pytest.raises(Conflict):
        transitions.complete(agent, todo.id, attempt_seq=1)
    with pytest.raises(Conflict):
        transitions.heartbeat(agent, todo.id, attempt_seq=1)
    with pytest.raises(Conflict):
        transitions.complete(agent, todo.id, attempt_seq=99)
    assert snapshot(todo.id) == before


def test_create_todo_validates_and_writes_nothing_on_bad_input(endpoint):
    from datetime import datetime

    bad = [
        {"title": ""},
        {"title": "   "},
        {"title": "x" * 501},
        {"title": 5},
        {"title": "ok", "priority": 101},
        {"title": "ok", "priority": "high"},
        {"title": "ok", "max_attempts": 0},
        {"title": "ok", "not_before": datetime(2030, 1, 1)},  # noqa: DTZ001 (naive on purpose)
        {"title": "ok", "idempotency_key": ""},
        {"title": "ok", "body": None},
    ]
    for kwargs in bad:
        with pytest.raises(Invalid):
            transitions.create_todo(Actor.agent(endpoint), **kwargs)
    assert Todo.objects.count() == 0


def test_idempotency_key_returns_the_existing_todo(endpoint, make_endpoint):
    first, created = transitions.create_todo(Actor.agent(endpoint), title="a", idempotency_key="k1")
    again, created_again = transitions.create_todo(
        Actor.agent(endpoint),
        title="b",
        idempotency_key="k1",
    )
    other, _ = transitions.create_todo(
        Actor.agent(make_endpoint("elsewhere")),
        title="c",
        idempotency_key="k1",
    )
    assert created and not created_again and again.id == first.id and again.title == "a"
    assert other.id != first.id


def test_not_before_holds_a_todo_back(endpoint):
    from datetime import timedelta

    from django.utils import timezone

    later, _ = transitions.create_todo(
        Actor.agent(endpoint),
        title="later",
        not_before=timezone.now() + timedelta(hours=1),
    )
    assert transitions.claim_next(Actor.agent(endpoint)) is None
    with pytest.raises(Conflict):
        transitions.claim(Actor.agent(endpoint), later.id)


def test_claim_next_takes_highest_priority_then_oldest(endpoint, make_todo):
    low = make_todo("low", priority=-1)
    old = make_todo("old")
    new = make_todo("new")
    high = make_todo("high", priority=50)
    order = [transitions.claim_next(Actor.agent(endpoint)).todo.id for _ in range(4)]
    assert order == [high.id, old.id, new.id, low.id]
    assert transitions.claim_next(Actor.agent(endpoint)) is None


def test_one_open_attempt_is_enforced_by_the_database(endpoint, make_todo):
    from django.db import IntegrityError, transaction

    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    with pytest.raises(IntegrityError), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO todo_attempts (todo_id, seq, round, attempt, claimer_kind,"
                " endpoint_id, mcp_session_id, owner, claimant, claimant_truncated,"
                " claimant_bytes, claimed_at, lease_expires_at, outcome, disposition,"
                " summary_truncated, summary_bytes, artifact_truncated, artifact_bytes)"
                " VALUES (%s, 2, 1, 2, 'endpoint', %s, '', 'agent:x', '', false, 0, now(),"
                " now(), '', '', false, 0, false, 0)",
                [todo.id, endpoint.pk],
            )
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    assert open_attempts(todo.id) == 1


def test_a_long_mcp_session_id_is_truncated_and_marked_not_cut_silently(endpoint):
    transitions.create_todo(Actor.agent(endpoint), title="via mcp")
    session = "s" * 120 + "é" * 50  # 220 bytes
    claim = transitions.claim_next(Actor.agent(endpoint), mcp_session_id=session)
    attempt = TodoAttempt.objects.get(todo_id=claim.todo.id)
    assert attempt.mcp_session_id_truncated and attempt.mcp_session_id_bytes == 220
    assert len(attempt.mcp_session_id.encode()) <= 128
    assert attempt.mcp_session_id == session.encode()[:128].decode(errors="ignore")
