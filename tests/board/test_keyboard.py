"""A whole triage by keyboard alone (static/board/board.js's shortcuts): search, move to the
row, open it, claim it, complete it from the drawer, close it, go elsewhere; focus stays in
the open drawer and comes back to the row; the tab's title names the open todo."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from switchboard.queues.models import Todo
from tests.board.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def _focused(page) -> str:
    return page.evaluate(
        "() => { const el = document.activeElement;"
        " return el ? (el.getAttribute('name') || el.textContent || el.tagName).trim() : ''; }"
    )


def _inside_drawer(page) -> bool:
    return page.evaluate("() => document.getElementById('drawer').contains(document.activeElement)")


def test_a_whole_triage_by_keyboard_alone(page, user, endpoint, make_todo):
    make_todo("Rotate the staging certificate")
    wanted = make_todo("Rebuild the API reference", priority=3)
    make_todo("Bump the lockfile")
    sign_in(page, "alice", to="/queue/")
    keys = page.keyboard

    # "/" searches; Enter sends the search.
    keys.press("/")
    assert page.evaluate("() => document.activeElement.name") == "q"
    keys.type("API reference")
    keys.press("Enter")
    page.wait_for_url(re.compile(r"q=API\+reference"), wait_until="load")
    rows = page.locator("table.queue tbody tr[data-todo]")
    expect(rows).to_have_count(1)

    # j moves to the row (its title link has focus); Enter opens its drawer.
    page.locator("body").press("j")
    expect(rows.first).to_have_class(re.compile("is-cursor"))
    assert _focused(page) == "Rebuild the API reference"
    keys.press("Enter")
    drawer = page.locator("#drawer #drawer-panel")
    expect(drawer).to_be_visible()
    expect(page).to_have_title(f"#{wanted.id} Rebuild the API reference · Queue · Switchboard")

    # c claims it; Tab goes round the drawer and never leaves it.
    keys.press("c")
    expect(drawer).to_contain_text("You hold this todo")
    for _ in range(40):
        keys.press("Tab")
        assert _inside_drawer(page)
        if _focused(page) == "summary" and page.evaluate(
            "() => document.activeElement.closest('form').action.endsWith('/complete/')"
        ):
            break
    else:
        pytest.fail("Tab never reached the Complete form's summary")
    keys.press("Shift+Tab")
    assert _inside_drawer(page)
    keys.press("Tab")
    keys.type("Rebuilt by hand.")
    keys.press("Tab")  # the result
    keys.press("Tab")  # Complete
    assert _focused(page) == "Complete"
    keys.press("Enter")
    expect(drawer).to_contain_text("Completed")
    assert Todo.objects.get(pk=wanted.id).state == "done"

    # Esc closes it: focus is back on the row, the title is the page's again.
    page.locator("#drawer-title").focus()
    keys.press("Escape")
    expect(page.locator("#drawer #drawer-panel")).to_have_count(0)
    expect(page).to_have_title("Queue · Switchboard")
    assert _focused(page) == "Rebuild the API reference"

    # "?" lists the shortcuts (focus inside it), Esc closes the list; g o goes to the overview.
    keys.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    expect(page.locator("#shortcuts")).to_contain_text("next / previous row")
    keys.press("Tab")
    assert page.evaluate(
        "() => document.getElementById('shortcuts').contains(document.activeElement)"
    )
    keys.press("Escape")
    expect(page.locator("#shortcuts")).to_have_count(0)
    page.locator("body").press("g")
    keys.press("o")
    page.wait_for_url(re.compile(r"/$"), wait_until="load")
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
    page.locator("body").press("g")
    keys.press("w")
    page.wait_for_url(re.compile(r"/queue/\?state=pending$"), wait_until="load")
    assert page.js_errors == []


def test_shortcuts_keep_out_of_typing(page, user, endpoint, make_todo):
    make_todo("Check broken links")
    sign_in(page, "alice", to="/queue/")
    search = page.locator("input[name=q]")
    search.focus()
    page.keyboard.type("jk/?go")
    expect(search).to_have_value("jk/?go")
    expect(page.locator("#shortcuts")).to_have_count(0)
    expect(page).to_have_url(re.compile(r"/queue/$"))


def test_the_keyboards_row_keeps_its_cursor_through_a_live_change(page, user, endpoint, make_todo):
    """j puts the cursor on a row; the row changes under it (an agent claims it, pushed by
    the stream and patched in place): the cursor stays, and o still opens that row."""
    from switchboard.queues import transitions
    from switchboard.queues.transitions import Actor
    from tests.board.test_live_queue import _live

    make_todo("older")
    todo = make_todo("newest")
    sign_in(page, "alice", to="/queue/")
    _live(page)
    page.locator("body").press("j")
    row = page.locator(f"#todo-{todo.id}")
    expect(row).to_have_class(re.compile("is-cursor"))
    transitions.claim(Actor.agent(endpoint), todo.id, claimant="run-1")
    expect(row.locator(".state")).to_have_text("claimed")
    expect(row).to_have_class(re.compile("is-cursor"))
    page.keyboard.press("o")
    expect(page.locator("#drawer #drawer-panel")).to_be_visible()
    expect(row).to_have_class(re.compile("is-open-drawer"))
    assert page.js_errors == []


def test_a_key_pressed_as_soon_as_the_drawer_is_swapped_in_goes_through_htmx(
    page, user, endpoint, make_todo
):
    """The drawer's forms are wired up by htmx as its content is swapped in, not a settle
    delay later: ``c`` pressed in the very next task after the swap claims through htmx (the
    drawer says so) rather than posting the form as a full page (which it did, now and then,
    on a loaded machine: htmx's default settle delay of 20 ms; base.html)."""
    todo = make_todo("Claim me at once")
    sign_in(page, "alice", to="/queue/")
    page.evaluate(
        """() => document.body.addEventListener("htmx:afterSwap", (event) => {
            if (event.detail.target.id !== "drawer") return;
            setTimeout(() => document.body.dispatchEvent(
                new KeyboardEvent("keydown", {key: "c", bubbles: true})), 0);
        }, {once: true})"""
    )
    page.locator(f'tr[data-todo="{todo.id}"] a').first.click()
    drawer = page.locator("#drawer #drawer-panel")
    expect(drawer).to_contain_text("You hold this todo")
    expect(page.locator("table.queue")).to_be_visible()  # still the queue, not a full page
    assert Todo.objects.get(pk=todo.id).state == "claimed"
