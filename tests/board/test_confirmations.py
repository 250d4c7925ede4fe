"""Cancel, Take over and Release their lease are asked first (board/views/todos.py
``_confirm``): without JavaScript the drawer's button opens a confirmation page (a GET that
changes nothing) whose POST carries the drawer's stamp and the CSRF token; with JavaScript
htmx asks and posts. Stale stamps, acts no longer offered, and foreign ids answer as every
drawer action does."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import expect

from switchboard.board.drawer import CONFIRMATIONS
from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoEvent
from tests.board.conftest import sign_in
from tests.board.pages import seen as seen_by
from tests.queues.helpers import outcomes

ASKED = ("cancel", "take-over", "release")


def _ledger(todo_id: int):
    todo = Todo.objects.get(pk=todo_id)
    events = TodoEvent.objects.filter(todo_id=todo_id).count()
    return todo.state, todo.owner, todo.last_attempt_seq, outcomes(todo_id), events


def _form_of(page: str, action: str) -> str:
    """The drawer's form whose button is ``action``."""
    forms = re.findall(r"<form\b.*?</form>", page, flags=re.S)
    return next(f for f in forms if f'data-action="{action}"' in f)


def _confirm_url(user, todo_id: int, action: str, *, seen: str | None = None) -> str:
    seen = seen or seen_by(user, todo_id)
    return f"/todos/{todo_id}/{action}/?seen={seen}&round=1"


def test_the_drawer_asks_before_cancel_take_over_and_release(signed_in, user, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id, claimant="buildbox/3")
    page = signed_in.get(f"/todos/{todo.id}/").content.decode()
    for action in ASKED:
        form = _form_of(page, action)
        # Without JavaScript: a GET of the confirmation page, no CSRF token in its URL.
        assert 'method="get"' in form and f'action="/todos/{todo.id}/{action}/"' in form
        assert "csrfmiddlewaretoken" not in form
        # With it: htmx asks, then posts the same fields.
        assert f'hx-post="/todos/{todo.id}/{action}/"' in form and "hx-confirm=" in form
    # The acts that are not asked post at once, with the token.
    claimable = make_todo("waiting")
    form = _form_of(signed_in.get(f"/todos/{claimable.id}/").content.decode(), "claim")
    assert 'method="post"' in form and "csrfmiddlewaretoken" in form and "hx-confirm" not in form


@pytest.mark.parametrize(
    ("action", "question", "button", "said"),
    [
        (
            "cancel",
            "Cancel this todo for good?",
            "Cancel the todo",
            "ends <strong>canceled</strong>",
        ),
        (
            "take-over",
            "Take this todo over from the agent holding it?",
            "Take it over",
            "You hold the lease at once",
        ),
        (
            "release",
            "Release the lease held by the current holder?",
            "Release their lease",
            "goes back to pending",
        ),
    ],
)
def test_the_confirmation_page_says_what_will_happen_and_changes_nothing(
    signed_in, user, agent, make_todo, action, question, button, said
):
    todo = make_todo("rebuild <docs>")
    transitions.claim(agent, todo.id, claimant="buildbox/3")
    before = _ledger(todo.id)
    response = signed_in.get(_confirm_url(user, todo.id, action))
    page = response.content.decode()
    assert response.status_code == 200
    assert f"<h1>{question}</h1>" in page and said in page
    assert "rebuild &lt;docs&gt;" in page and "rebuild <docs>" not in page  # autoescaped
    assert "held by buildbox/3 (endpoint agent-a)" in page
    form = re.search(rf'<form method="post" action="/todos/{todo.id}/.*?</form>', page, re.S)[0]
    assert f'action="/todos/{todo.id}/{action}/"' in form and "csrfmiddlewaretoken" in form
    assert f'name="seen" value="{seen_by(user, todo.id)}"' in form
    assert f">{button}</button>" in form
    assert f'href="/todos/{todo.id}/">Back, change nothing</a>' in form
    assert _ledger(todo.id) == before


def test_confirming_posts_with_csrf_and_acts(user, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    page = strict.get(_confirm_url(user, todo.id, "cancel")).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    seen = re.search(r'name="seen" value="([^"]+)"', page).group(1)
    before = _ledger(todo.id)
    refused = strict.post(f"/todos/{todo.id}/cancel/", {"seen": seen, "round": "1"})
    assert refused.status_code == 403 and _ledger(todo.id) == before
    done = strict.post(
        f"/todos/{todo.id}/cancel/", {"seen": seen, "round": "1", "csrfmiddlewaretoken": token}
    )
    assert done.status_code == 302 and done["Location"] == f"/todos/{todo.id}/"
    assert Todo.objects.get(pk=todo.id).state == "canceled"
    assert outcomes(todo.id) == [("canceled", "canceled")]


def test_a_stale_stamp_is_the_moved_on_message_on_the_page_and_on_its_post(
    signed_in, user, agent, make_todo
):
    todo = make_todo()
    transitions.claim(agent, todo.id)
    seen = seen_by(user, todo.id)
    transitions.release(agent, todo.id)
    transitions.claim(agent, todo.id)  # another try since the drawer was drawn
    before = _ledger(todo.id)
    for action in ASKED:
        response = signed_in.get(_confirm_url(user, todo.id, action, seen=seen))
        page = response.content.decode()
        assert response.status_code == 409
        assert "This todo moved on since you opened it. Nothing was changed." in page
        assert "Back, change nothing" not in page  # the drawer, not the confirmation
        posted = signed_in.post(f"/todos/{todo.id}/{action}/", {"seen": seen, "round": "1"})
        assert posted.status_code == 409 and "moved on" in posted.content.decode()
    assert _ledger(todo.id) == before


def test_a_confirmation_of_an_act_not_offered_now_is_stale(signed_in, user, make_todo):
    todo = make_todo()  # pending: nobody holds it
    for action, label in (("take-over", "Take over"), ("release", "Release their lease")):
        response = signed_in.get(_confirm_url(user, todo.id, action))
        assert response.status_code == 409
        assert f"{label} is not offered now. Nothing was changed." in response.content.decode()
    past = signed_in.get(f"/todos/{todo.id}/cancel/?seen={seen_by(user, todo.id)}&round=7")
    assert past.status_code == 409 and "Round 7 is a past round" in past.content.decode()
    assert Todo.objects.get(pk=todo.id).state == "pending"


def test_only_the_asked_acts_have_a_page(signed_in, user, make_todo):
    todo = make_todo()
    for action in ("claim", "rerun", "retry-now", "complete"):
        assert signed_in.get(f"/todos/{todo.id}/{action}/").status_code == 405
    assert signed_in.get(f"/todos/{todo.id}/explode/").status_code == 404


def test_unknown_and_foreign_confirmations_are_the_same_404(make_user, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id)
    stranger = Client()
    stranger.force_login(make_user("mallory"))
    unknown = stranger.get(f"/todos/{todo.id + 1000}/cancel/?seen=x")
    for action in ASKED:
        foreign = stranger.get(f"/todos/{todo.id}/{action}/?seen=x")
        assert foreign.status_code == unknown.status_code == 404
        assert foreign.content == unknown.content
    assert Todo.objects.get(pk=todo.id).owner == "agent:agent-a"


# --- In a browser without JavaScript


@pytest.fixture
def no_js_page(browser, live_server):
    expect.set_options(timeout=10_000)
    context = browser.new_context(
        base_url=live_server.url, java_script_enabled=False, viewport={"width": 1400, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


@pytest.mark.django_db(transaction=True)
def test_without_javascript_each_asked_act_goes_through_its_page(
    no_js_page, user, endpoint, agent, make_todo
):
    page = no_js_page
    todo = make_todo("stuck translation")
    transitions.claim(agent, todo.id, claimant="buildbox/3", require_fence=True)
    sign_in(page, "alice")
    page.goto(f"/todos/{todo.id}/")

    # Take over: the page, back without acting, then again and confirmed.
    page.get_by_role("button", name="Take over").click()
    expect(page).to_have_url(re.compile(rf"/todos/{todo.id}/take-over/\?seen="))
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Take this todo over from the agent holding it?"
    )
    assert Todo.objects.get(pk=todo.id).owner == "agent:agent-a"
    page.get_by_role("link", name="Back, change nothing").click()
    expect(page).to_have_url(re.compile(rf"/todos/{todo.id}/$"))
    assert Todo.objects.get(pk=todo.id).owner == "agent:agent-a"
    page.get_by_role("button", name="Take over").click()
    page.get_by_role("button", name="Take it over").click()
    expect(page).to_have_url(re.compile(rf"/todos/{todo.id}/$"))
    expect(page.locator(".heldby")).to_contain_text("You hold this todo")
    expect(page.locator(".flash")).to_have_count(0)  # one banner: the drawer's own line
    assert Todo.objects.get(pk=todo.id).owner == f"user:{user.pk}"

    # Cancel, confirmed.
    page.get_by_role("button", name="Cancel", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Cancel this todo for good?")
    assert Todo.objects.get(pk=todo.id).state == "claimed"
    page.get_by_role("button", name="Cancel the todo").click()
    expect(page.locator(".flash")).to_have_text("Canceled.")
    assert Todo.objects.get(pk=todo.id).state == "canceled"

    # Release their lease, with the todo moving on while the page is open: nothing changes.
    other = make_todo("flaky upload")
    transitions.claim(agent, other.id, claimant="buildbox/4")
    page.goto(f"/todos/{other.id}/")
    page.get_by_role("button", name="Release their lease").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(
        "Release the lease held by the current holder?"
    )
    transitions.release(agent, other.id)
    transitions.claim(agent, other.id, claimant="buildbox/5")
    page.get_by_role("button", name="Release their lease").click()
    expect(page.locator(".notice.stale")).to_contain_text(
        "This todo moved on since you opened it. Nothing was changed."
    )
    assert Todo.objects.get(pk=other.id).state == "claimed"
    assert outcomes(other.id) == [("released", "requeued"), ("", "")]


# --- With JavaScript: the Board asks in a dialog of its own and posts, no page is opened


@pytest.mark.django_db(transaction=True)
def test_with_javascript_the_board_asks_in_its_own_dialog_and_posts_in_place(
    page, user, agent, make_todo
):
    todo = make_todo("stuck translation")
    transitions.claim(agent, todo.id, claimant="buildbox/3")
    sign_in(page, "alice")
    page.goto(f"/todos/{todo.id}/")
    page.wait_for_function("() => window.htmx !== undefined")
    drawer = page.locator("#drawer-panel")
    native = []
    page.on("dialog", lambda dialog: (native.append(dialog.message), dialog.dismiss()))

    drawer.get_by_role("button", name="Cancel", exact=True).click()
    asked = page.get_by_role("alertdialog", name="Cancel?")
    expect(asked).to_contain_text(CONFIRMATIONS.get("cancel").dialog)
    # Focus starts on the way back; Esc leaves it, and nothing is done.
    assert page.evaluate("() => document.activeElement.textContent") == "Back, change nothing"
    page.keyboard.press("Escape")
    expect(asked).to_have_count(0)
    assert Todo.objects.get(pk=todo.id).state == "claimed"

    drawer.get_by_role("button", name="Cancel", exact=True).click()
    page.get_by_role("alertdialog").get_by_role("button", name="Cancel", exact=True).click()
    expect(drawer.locator(".notice.good")).to_have_text("Canceled.")
    expect(page).to_have_url(re.compile(rf"/todos/{todo.id}/$"))  # no confirmation page
    assert Todo.objects.get(pk=todo.id).state == "canceled"
    assert native == []  # never the browser's confirm()
    assert page.js_errors == []
