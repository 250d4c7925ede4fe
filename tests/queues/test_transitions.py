"""Each row of SPEC's state table: the todo's state, the attempt's outcome and disposition."""

from __future__ import annotations

from datetime import timedelta

import pytest

from queues import transitions
from queues.errors import Conflict, NotFound, Unauthorized
from queues.models import Todo, TodoAttempt
from queues.transitions import Actor
from tests.queues.helpers import (
    attempts_of,
    events_of,
    lapse_lease,
    make_retry_due,
    open_attempts,
    outcomes,
)


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 10
    settings.SWITCHBOARD_RETRY_MAX_SECONDS = 3600
    settings.SWITCHBOARD_LEASE_SECONDS = 300
    settings.SWITCHBOARD_OWNER_LEASE_SECONDS = 1800


def test_claim_opens_an_attempt_and_leases_by_the_database_clock(endpoint, make_todo):
    todo = make_todo()
    assert Todo.objects.get(pk=todo.id).state == "pending"

    claim = transitions.claim_next(endpoint=endpoint, lease_seconds=120, claimant="run-1")

    assert claim.todo.state == "claimed" and claim.todo.attempt == 1
    assert claim.todo.owner == "agent:agent-a"
    assert claim.todo.lease_expires_at - claim.todo.claimed_at == timedelta(seconds=120)
    [attempt] = attempts_of(todo.id)
    assert attempt.seq == 1 and attempt.round == 1 and attempt.attempt == 1
    assert attempt.claimer_kind == "endpoint" and attempt.endpoint_id == endpoint.pk
    assert attempt.claimant == "run-1" and attempt.ended_at is None
    assert attempt.outcome == "" and attempt.disposition == ""


def test_complete_is_done_completed_done(endpoint, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim_next(endpoint=endpoint)

    closed = transitions.complete(
        agent, todo.id, attempt_seq=claim.attempt_seq, result={"pages": 12}, summary="rebuilt"
    )

    assert closed.todo.state == "done" and closed.todo.result == {"pages": 12}
    assert closed.todo.ended_at is not None and closed.todo.owner == ""
    assert outcomes(todo.id) == [("completed", "done")]
    attempt = attempts_of(todo.id)[0]
    assert attempt.result == {"pages": 12} and attempt.summary == "rebuilt"


def test_fail_below_cap_waits_to_retry_with_backoff(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=3)
    transitions.claim_next(endpoint=endpoint)

    closed = transitions.fail(agent, todo.id, result={"err": "flaky"}, summary="timed out")

    assert closed.todo.state == "retry_wait" and closed.todo.failures == 1
    # full jitter: between now and base * 2**0 seconds from now
    delay = closed.todo.next_retry_at - closed.attempt.ended_at
    assert timedelta(0) <= delay <= timedelta(seconds=10)
    assert outcomes(todo.id) == [("failed", "retry_scheduled")]


def test_backoff_grows_with_failures_and_respects_the_max(settings, endpoint, agent, make_todo):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 100
    settings.SWITCHBOARD_RETRY_MAX_SECONDS = 150
    todo = make_todo(max_attempts=10)
    delays = []
    for _ in range(4):
        transitions.claim(agent, todo.id) if delays else transitions.claim_next(endpoint=endpoint)
        closed = transitions.fail(agent, todo.id)
        delays.append((closed.todo.next_retry_at - closed.attempt.ended_at).total_seconds())
        make_retry_due(todo.id)
    assert all(0 <= d <= 150 for d in delays)
    assert delays[0] <= 100


def test_fail_at_cap_is_dead_lettered(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=2)
    for _ in range(2):
        transitions.claim(agent, todo.id)
        closed = transitions.fail(agent, todo.id, summary="nope")
        if closed.todo.state == "retry_wait":
            make_retry_due(todo.id)

    assert closed.todo.state == "dead" and closed.todo.dead_letter
    assert closed.todo.dead_letter_reason == "failed" and closed.todo.failures == 2
    assert outcomes(todo.id) == [("failed", "retry_scheduled"), ("failed", "dead_lettered")]


def test_fail_not_retryable_dead_letters_at_once(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=5)
    transitions.claim_next(endpoint=endpoint)

    closed = transitions.fail(agent, todo.id, retryable=False)

    assert closed.todo.state == "dead" and closed.todo.dead_letter_reason == "failed"
    assert outcomes(todo.id) == [("failed", "dead_lettered")]


def test_due_retry_is_claimable_before_the_sweeper_runs(settings, endpoint, agent, make_todo):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    todo = make_todo()
    transitions.claim_next(endpoint=endpoint)
    assert transitions.fail(agent, todo.id).todo.state == "retry_wait"

    again = transitions.claim_next(endpoint=endpoint)

    assert again.todo.id == todo.id and again.attempt_seq == 2 and again.todo.attempt == 2


def test_release_requeues_without_spending_the_budget(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(endpoint=endpoint)

    closed = transitions.release(agent, todo.id, summary="shutting down")

    assert closed.todo.state == "pending" and closed.todo.failures == 0
    assert outcomes(todo.id) == [("released", "requeued")]
    # max_attempts=1 and still claimable: a release passes no verdict
    assert transitions.claim_next(endpoint=endpoint).todo.id == todo.id


def test_takeover_of_a_lapsed_lease_closes_it_as_lease_expired(endpoint, make_todo):
    todo = make_todo(max_attempts=3)
    first = transitions.claim_next(endpoint=endpoint, claimant="worker-1")
    lapse_lease(todo.id)

    second = transitions.claim_next(endpoint=endpoint, claimant="worker-2")

    assert second.todo.id == todo.id and second.attempt_seq == 2
    assert second.todo.failures == 1 and second.todo.attempt == 2
    assert outcomes(todo.id) == [("lease_expired", "requeued"), ("", "")]
    [prior] = second.prior_attempts
    assert prior.seq == first.attempt_seq and prior.died and prior.outcome == "lease_expired"
    assert prior.claimant == "worker-1"
    assert open_attempts(todo.id) == 1


def test_takeover_at_cap_dead_letters_and_claim_next_moves_on(endpoint, make_todo):
    doomed = make_todo("doomed", max_attempts=1, priority=5)
    other = make_todo("other")
    transitions.claim_next(endpoint=endpoint)
    lapse_lease(doomed.id)

    claim = transitions.claim_next(endpoint=endpoint)

    assert claim.todo.id == other.id
    dead = Todo.objects.get(pk=doomed.id)
    assert dead.state == "dead" and dead.dead_letter_reason == "lease_expired"
    assert outcomes(doomed.id) == [("lease_expired", "dead_lettered")]


def test_takeover_at_cap_by_id_is_conflict_and_the_dead_letter_stays(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(endpoint=endpoint)
    lapse_lease(todo.id)

    with pytest.raises(Conflict):
        transitions.claim(agent, todo.id)

    assert Todo.objects.get(pk=todo.id).state == "dead"
    assert outcomes(todo.id) == [("lease_expired", "dead_lettered")]


def test_reap_below_cap_requeues_and_marks_the_attempt_died(endpoint, make_todo):
    todo = make_todo(max_attempts=2)
    transitions.claim_next(endpoint=endpoint)
    lapse_lease(todo.id)

    [reaped] = transitions.reap_lapsed()

    assert reaped.todo.state == "pending" and reaped.todo.failures == 1
    assert reaped.attempt.outcome == "reaped" and reaped.attempt.died
    assert outcomes(todo.id) == [("reaped", "requeued")]


def test_reap_at_cap_dead_letters(endpoint, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(endpoint=endpoint)
    lapse_lease(todo.id)

    [reaped] = transitions.reap_lapsed()

    assert reaped.todo.state == "dead" and reaped.todo.dead_letter_reason == "reaped"
    assert outcomes(todo.id) == [("reaped", "dead_lettered")]


def test_reap_leaves_live_leases_alone(endpoint, make_todo):
    make_todo()
    transitions.claim_next(endpoint=endpoint)
    assert transitions.reap_lapsed() == []


def test_cancel_by_holder(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(endpoint=endpoint)

    closed = transitions.cancel(agent, todo.id)

    assert closed.todo.state == "canceled" and closed.todo.ended_at is not None
    assert outcomes(todo.id) == [("canceled", "canceled")]


def test_cancel_of_a_pending_todo_writes_an_event_not_an_attempt(endpoint, agent, make_todo):
    todo = make_todo()

    closed = transitions.cancel(agent, todo.id)

    assert closed.todo.state == "canceled" and closed.attempt is None
    assert attempts_of(todo.id) == [] and events_of(todo.id) == ["cancel"]


def test_cancel_by_the_requester_of_a_claimed_todo(make_endpoint, make_todo):
    worker, sender = make_endpoint("worker"), make_endpoint("sender")
    todo = make_todo(on=worker, requester=sender)
    transitions.claim_next(endpoint=worker, require_fence=True)

    closed = transitions.cancel(Actor.agent(sender), todo.id)

    assert closed.todo.state == "canceled"
    assert outcomes(todo.id) == [("canceled", "canceled")]
    assert events_of(todo.id) == ["cancel"]


def test_another_endpoint_cannot_cancel(make_endpoint, make_todo):
    worker, stranger = make_endpoint("worker"), make_endpoint("stranger")
    todo = make_todo(on=worker)
    with pytest.raises(NotFound):
        transitions.cancel(Actor.agent(stranger), todo.id)
    assert Todo.objects.get(pk=todo.id).state == "pending"


def test_revoking_an_endpoint_dead_letters_its_live_todos(user, endpoint, agent, make_todo):
    held, waiting, done = make_todo("held"), make_todo("waiting"), make_todo("done")
    transitions.claim(agent, done.id)
    transitions.complete(agent, done.id)
    transitions.claim(agent, held.id)

    assert transitions.revoke_endpoint(endpoint, user=user) == 2

    assert Todo.objects.get(pk=held.id).state == "dead"
    assert Todo.objects.get(pk=held.id).dead_letter_reason == "revoked"
    assert outcomes(held.id) == [("revoked", "dead_lettered")]
    assert Todo.objects.get(pk=waiting.id).dead_letter_reason == "revoked"
    assert attempts_of(waiting.id) == [] and events_of(waiting.id) == ["revoked"]
    assert Todo.objects.get(pk=done.id).state == "done"
    with pytest.raises(Unauthorized):
        transitions.claim_next(endpoint=endpoint)


def test_retry_now_is_pending_at_once_same_round(user, endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(endpoint=endpoint)
    transitions.fail(agent, todo.id)

    again = transitions.retry_now(user, todo.id)

    assert again.state == "pending" and again.next_retry_at is None
    assert (again.round, again.attempt, again.failures) == (1, 1, 1)
    assert events_of(todo.id) == ["retry_now"]
    with pytest.raises(Conflict):
        transitions.retry_now(user, todo.id)


def test_rerun_opens_a_new_round_and_clears_the_result(user, endpoint, agent, make_todo):
    todo = make_todo(max_attempts=1)
    transitions.claim_next(endpoint=endpoint)
    transitions.fail(agent, todo.id, result={"err": 1})
    assert Todo.objects.get(pk=todo.id).state == "dead"

    rerun = transitions.rerun(user, todo.id)

    assert rerun.state == "pending" and rerun.round == 2
    assert (rerun.attempt, rerun.failures, rerun.result) == (0, 0, None)
    assert rerun.dead_letter_reason == "" and rerun.ended_at is None
    claim = transitions.claim_next(endpoint=endpoint)
    assert claim.attempt_seq == 2 and claim.todo.attempt == 1 and claim.todo.round == 2
    new = attempts_of(todo.id)[-1]
    assert (new.seq, new.round, new.attempt) == (2, 2, 1)
    assert attempts_of(todo.id)[0].result == {"err": 1}  # each attempt keeps its own
    [prior] = claim.prior_attempts
    assert prior.round == 1 and prior.outcome == "failed"


def test_rerun_refuses_a_live_todo(user, make_todo):
    todo = make_todo()
    with pytest.raises(Conflict):
        transitions.rerun(user, todo.id)


def test_human_claim_is_an_owner_attempt(user, human, endpoint, make_todo):
    todo = make_todo()

    claim = transitions.claim(human, todo.id)

    assert claim.todo.owner == f"user:{user.pk}"
    assert claim.todo.lease_expires_at - claim.todo.claimed_at == timedelta(seconds=1800)
    [attempt] = attempts_of(todo.id)
    assert attempt.claimer_kind == "owner" and attempt.user_id == user.pk
    assert attempt.endpoint_id is None
    closed = transitions.complete(human, todo.id, summary="did it by hand", result={"x": 1})
    assert closed.todo.state == "done"
    assert events_of(todo.id) == ["claim", "complete"]


def test_human_claim_does_not_spend_the_budget_and_agents_cannot_close_it(
    human, endpoint, agent, make_todo
):
    todo = make_todo(max_attempts=1)
    transitions.claim(human, todo.id)
    with pytest.raises(Conflict):
        transitions.complete(agent, todo.id)
    transitions.release(human, todo.id)
    assert Todo.objects.get(pk=todo.id).failures == 0


def test_human_release_of_an_agents_fenced_lease_is_recorded(user, human, endpoint, make_todo):
    todo = make_todo()
    transitions.claim_next(endpoint=endpoint, require_fence=True)

    closed = transitions.release(human, todo.id)

    assert closed.todo.state == "pending"
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert attempt.outcome == "released" and attempt.ended_by_id == user.pk
    assert events_of(todo.id) == ["release"]


def test_human_cannot_complete_an_agents_lease(human, endpoint, make_todo):
    todo = make_todo()
    transitions.claim_next(endpoint=endpoint)
    with pytest.raises(Conflict):
        transitions.complete(human, todo.id)
    assert Todo.objects.get(pk=todo.id).state == "claimed"


def test_heartbeat_extends_and_works_past_expiry_while_open(endpoint, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim_next(endpoint=endpoint, lease_seconds=30)
    lapse_lease(todo.id)

    lease = transitions.heartbeat(agent, todo.id, attempt_seq=claim.attempt_seq, lease_seconds=600)

    row = Todo.objects.get(pk=todo.id)
    assert row.lease_expires_at == lease.lease_expires_at
    assert lease.attempt_seq == claim.attempt_seq
    assert row.lease_expires_at - row.last_heartbeat_at == timedelta(seconds=600)
    # closing copies the live lease onto the attempt
    transitions.complete(agent, todo.id)
    attempt = attempts_of(todo.id)[0]
    assert attempt.last_heartbeat_at == row.last_heartbeat_at
    assert attempt.lease_expires_at == row.lease_expires_at


def test_human_extend_keeps_their_own_lease_alive_and_is_audited(user, human, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim(human, todo.id)

    lease = transitions.heartbeat(human, todo.id, lease_seconds=3600)

    assert lease.attempt_seq == claim.attempt_seq
    assert lease.lease_expires_at > claim.todo.lease_expires_at
    assert events_of(todo.id) == ["claim", "extend"]
    with pytest.raises(Conflict):  # the agent does not hold the human's lease
        transitions.heartbeat(agent, todo.id)


def test_human_cancel_of_an_agents_fenced_lease_is_recorded(user, human, endpoint, make_todo):
    todo = make_todo()
    transitions.claim_next(endpoint=endpoint, require_fence=True)

    closed = transitions.cancel(human, todo.id)

    assert closed.todo.state == "canceled"
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.outcome, attempt.disposition) == ("canceled", "canceled")
    assert attempt.ended_by_id == user.pk and events_of(todo.id) == ["cancel"]


def test_a_human_cannot_extend_someone_elses_lease_or_a_foreign_todo(
    make_user, human, endpoint, make_todo
):
    todo = make_todo()
    transitions.claim_next(endpoint=endpoint)
    with pytest.raises(Conflict):
        transitions.heartbeat(human, todo.id)
    outsider = Actor.human(make_user("mallory"))
    with pytest.raises(NotFound):
        transitions.heartbeat(outsider, todo.id)


def test_deleting_a_user_keeps_their_owner_attempts_in_the_history(make_user, team, make_todo):
    from queues import teams
    from queues.selectors import get_todo_for_user

    bob = make_user("bob")
    teams.add_member(team, bob)
    todo = make_todo()
    transitions.claim(Actor.human(bob), todo.id)
    transitions.complete(Actor.human(bob), todo.id, summary="by hand")
    bob_id = bob.pk
    bob.delete()
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.claimer_kind, attempt.user_id, attempt.owner) == (
        "owner",
        None,
        f"user:{bob_id}",
    )
    seen = get_todo_for_user(team.memberships.get().user, todo.id).as_api()
    assert seen["todo"]["attempts"][0]["user"] is None
