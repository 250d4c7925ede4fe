"""Take over from the drawer (board/views/todos.py): offered on a todo an agent holds, one
POST that ends the agent's try and opens the person's; stale, CSRF and tenancy as every
drawer action; and the button in a browser."""

from __future__ import annotations

import pytest
from django.test import Client
from playwright.sync_api import expect

from switchboard.queues import transitions
from switchboard.queues.errors import Conflict
from switchboard.queues.models import Todo, TodoEvent
from switchboard.queues.selectors import board_todo
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in
from tests.board.pages import HTMX
from tests.board.pages import seen as seen_by
from tests.queues.helpers import outcomes


def test_the_drawer_offers_take_over_only_on_an_agents_lease(signed_in, user, agent, make_todo):
    held = make_todo("held by the agent")
    transitions.claim(agent, held.id, claimant="buildbox/7")
    by_hand = make_todo("held by a person")
    transitions.claim(Actor.human(user), by_hand.id)
    waiting = make_todo("waiting")
    offered = signed_in.get(f"/todos/{held.id}/").content.decode()
    assert 'data-action="take-over"' in offered and 'data-action="release"' in offered
    for todo in (by_hand, waiting):
        assert 'data-action="take-over"' not in signed_in.get(f"/todos/{todo.id}/").content.decode()


def test_take_over_ends_their_try_and_gives_you_the_lease(signed_in, user, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id, require_fence=True)
    response = signed_in.post(
        f"/todos/{todo.id}/take-over/", {"seen": seen_by(user, todo.id)}, **HTMX
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "You hold this todo now" in body and 'data-action="complete"' not in body
    assert "Complete</summary>" in body  # the holder's forms
    assert outcomes(todo.id) == [("taken_over", "taken_over"), ("", "")]
    assert Todo.objects.get(pk=todo.id).owner == f"user:{user.pk}"
    assert TodoEvent.objects.get(todo_id=todo.id).kind == "take_over"
    assert response["HX-Trigger"] == "queue-changed"
    # The drawer's timeline says who took it from which agent, before the person's try.
    drawer = signed_in.get(f"/todos/{todo.id}/").content.decode()
    said = f"took it over from {board_todo(user, todo.id).todo.endpoint}"
    assert said in drawer
    assert drawer.index(said) < drawer.rindex("try 2")


def test_a_stale_take_over_is_409_and_takes_nothing(signed_in, user, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id)
    seen = seen_by(user, todo.id)
    transitions.release(agent, todo.id)
    transitions.claim(agent, todo.id)  # another try since the drawer was drawn
    response = signed_in.post(f"/todos/{todo.id}/take-over/", {"seen": seen}, **HTMX)
    assert response.status_code == 409 and "moved on" in response.content.decode()
    assert Todo.objects.get(pk=todo.id).owner == "agent:agent-a"
    transitions.complete(agent, todo.id)
    response = signed_in.post(
        f"/todos/{todo.id}/take-over/", {"seen": seen_by(user, todo.id)}, **HTMX
    )
    assert response.status_code == 409  # nobody holds it: nothing to take
    assert not TodoEvent.objects.filter(kind="take_over").exists()


def test_take_over_needs_csrf_and_a_visible_todo(user, make_user, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert (
        strict.post(f"/todos/{todo.id}/take-over/", {"seen": seen_by(user, todo.id)}).status_code
        == 403
    )
    stranger = Client()
    stranger.force_login(make_user("mallory"))
    foreign = stranger.post(f"/todos/{todo.id}/take-over/", {"seen": "x"})
    unknown = stranger.post(f"/todos/{todo.id + 1000}/take-over/", {"seen": "x"})
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.content == unknown.content
    assert Todo.objects.get(pk=todo.id).owner == "agent:agent-a"


@pytest.mark.django_db(transaction=True)
def test_take_over_in_a_browser(page, user, endpoint, agent, make_todo):
    todo = make_todo("stuck translation")
    claimed = transitions.claim(agent, todo.id, claimant="buildbox/3", require_fence=True)
    sign_in(page, "alice")
    page.get_by_role("link", name="stuck translation", exact=True).click()
    drawer = page.locator("#drawer #drawer-panel")
    expect(drawer.get_by_role("button", name="Release their lease")).to_be_visible()
    drawer.get_by_role("button", name="Take over").click()
    # Asked first, in the Board's own dialog (hx-confirm, static/board/board.js askFirst).
    page.get_by_role("alertdialog").get_by_role("button", name="Take over").click()
    # The news ("You hold this todo now", test_drawer_labels.py) becomes the state line at
    # the drawer's next live refresh, which the claim itself sets off: either says it.
    expect(drawer.locator(".heldby")).to_contain_text("You hold this todo")
    expect(drawer.get_by_role("button", name="Take over")).to_have_count(0)
    with pytest.raises(Conflict):  # the agent's late complete
        transitions.complete(
            agent, todo.id, attempt_seq=claimed.attempt_seq, lease_token=claimed.lease_token
        )
    assert page.js_errors == []
