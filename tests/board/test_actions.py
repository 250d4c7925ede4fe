"""Human actions from the drawer, over Django's test client: each goes through the
transitions, is audited, refuses stale and malformed input, and needs CSRF."""

from __future__ import annotations

import pytest
from django.test import Client

from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoAttempt, TodoEvent
from switchboard.queues.transitions import Actor
from tests.board.pages import HTMX
from tests.board.pages import seen as seen_by
from tests.queues.helpers import events_of, make_retry_due, outcomes


def _post(client, user, todo_id, action, **data):
    data.setdefault("seen", seen_by(user, todo_id))
    return client.post(f"/todos/{todo_id}/{action}/", data, **HTMX)


def _ledger(todo_id: int):
    todo = Todo.objects.get(pk=todo_id)
    return (
        todo.state,
        todo.last_attempt_seq,
        todo.result,
        outcomes(todo_id),
        TodoEvent.objects.filter(todo_id=todo_id).count(),
    )


def test_claim_then_complete_with_summary_and_json_result(signed_in, user, make_todo):
    todo = make_todo()
    response = _post(signed_in, user, todo.id, "claim")
    assert response.status_code == 200 and "You hold this todo now" in response.content.decode()
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.claimer_kind, attempt.user_id, attempt.ended_at) == ("owner", user.pk, None)
    response = _post(signed_in, user, todo.id, "complete", summary="did it", result='{"ok": true}')
    assert response.status_code == 200 and response["HX-Trigger"] == "queue-changed"
    attempt.refresh_from_db()
    assert (attempt.outcome, attempt.summary, attempt.result) == (
        "completed",
        "did it",
        {"ok": True},
    )
    assert events_of(todo.id) == ["claim", "complete"]


def test_fail_not_retryable_dead_letters(signed_in, user, make_todo):
    todo = make_todo()
    _post(signed_in, user, todo.id, "claim")
    _post(signed_in, user, todo.id, "fail", summary="cannot", retryable="no")
    assert Todo.objects.get(pk=todo.id).state == "dead"
    assert outcomes(todo.id) == [("failed", "dead_lettered")]


def test_bad_json_result_is_a_message_and_writes_nothing(signed_in, user, make_todo):
    todo = make_todo()
    _post(signed_in, user, todo.id, "claim")
    before = _ledger(todo.id)
    response = _post(signed_in, user, todo.id, "complete", summary="x", result="{not json")
    assert response.status_code == 400
    assert "The result is not valid JSON" in response.content.decode()
    assert _ledger(todo.id) == before


def test_oversize_summary_is_refused_and_writes_nothing(signed_in, user, make_todo):
    todo = make_todo()
    _post(signed_in, user, todo.id, "claim")
    before = _ledger(todo.id)
    response = _post(signed_in, user, todo.id, "release", summary="x" * 9000)
    assert response.status_code == 400 and "too long" in response.content.decode()
    assert _ledger(todo.id) == before


def test_a_person_releases_an_agents_fenced_lease(signed_in, user, endpoint, make_todo):
    todo = make_todo()
    transitions.claim(Actor.agent(endpoint), todo.id, require_fence=True)
    response = _post(signed_in, user, todo.id, "release")
    assert response.status_code == 200
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.outcome, attempt.ended_by_id) == ("released", user.pk)
    assert Todo.objects.get(pk=todo.id).state == "pending"


def test_cancel_retry_now_and_rerun(signed_in, user, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    todo = make_todo()
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, summary="flaky")
    make_retry_due(todo.id)
    assert _post(signed_in, user, todo.id, "retry-now").status_code == 200
    assert Todo.objects.get(pk=todo.id).state == "pending"
    assert _post(signed_in, user, todo.id, "cancel").status_code == 200
    assert Todo.objects.get(pk=todo.id).state == "canceled"
    assert _post(signed_in, user, todo.id, "rerun").status_code == 200
    rerun = Todo.objects.get(pk=todo.id)
    assert (rerun.state, rerun.round, rerun.attempt, rerun.failures) == ("pending", 2, 0, 0)
    assert events_of(todo.id)[-3:] == ["retry_now", "cancel", "rerun"]


def test_extend_is_audited_and_the_keepalive_is_not(signed_in, user, make_todo):
    todo = make_todo()
    _post(signed_in, user, todo.id, "claim")
    assert _post(signed_in, user, todo.id, "keepalive").status_code == 204
    assert _post(signed_in, user, todo.id, "extend").status_code == 200
    assert events_of(todo.id)[-2:] == ["claim", "extend"]


def test_stale_action_answers_409_with_the_fresh_drawer(signed_in, user, endpoint, make_todo):
    todo = make_todo()
    seen = seen_by(user, todo.id)
    transitions.claim(Actor.agent(endpoint), todo.id, claimant="run-9")
    before = _ledger(todo.id)
    for action in ("claim", "cancel", "rerun"):
        response = _post(signed_in, user, todo.id, action, seen=seen)
        page = response.content.decode()
        assert response.status_code == 409
        assert "moved on since you opened it" in page and "Held by run-9" in page
    assert _ledger(todo.id) == before
    # without htmx the same message comes as a whole page
    page = signed_in.post(f"/todos/{todo.id}/claim/", {"seen": seen})
    assert page.status_code == 409 and "<html" in page.content.decode()


def test_an_action_the_state_does_not_allow_is_stale_not_an_error(signed_in, user, make_todo):
    todo = make_todo()
    response = _post(signed_in, user, todo.id, "retry-now")  # pending, not retry_wait
    assert response.status_code == 409 and "Nothing was changed" in response.content.decode()
    response = _post(signed_in, user, todo.id, "complete")  # nobody holds it
    assert response.status_code == 409


def test_unknown_action_and_get_are_refused(signed_in, user, make_todo):
    todo = make_todo()
    assert _post(signed_in, user, todo.id, "explode").status_code == 404
    assert signed_in.get(f"/todos/{todo.id}/claim/").status_code == 405


@pytest.mark.parametrize(
    "action",
    ["claim", "extend", "keepalive", "complete", "fail", "release", "cancel", "retry-now", "rerun"],
)
def test_every_action_needs_csrf(user, make_todo, action):
    todo = make_todo()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    before = _ledger(todo.id)
    response = strict.post(f"/todos/{todo.id}/{action}/", {"seen": seen_by(user, todo.id)})
    assert response.status_code == 403
    assert _ledger(todo.id) == before


def test_no_js_action_redirects_back_to_the_drawer_page(signed_in, user, make_todo):
    todo = make_todo()
    response = signed_in.post(f"/todos/{todo.id}/claim/", {"seen": seen_by(user, todo.id)})
    assert response.status_code == 302 and response["Location"] == f"/todos/{todo.id}/"
    page = signed_in.get(response["Location"]).content.decode()
    # One banner for the act: the drawer's own line, no flash above it saying it again.
    assert page.count("You hold this todo") == 1 and 'class="flash"' not in page
