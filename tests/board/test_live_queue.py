"""The live queue in a real browser: it refreshes in place (focus, a selection and the scroll
position stay), rows hold their place while new todos wait behind a bar, and it holds still
while paused or while the pointer or focus is in it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from queues import transitions
from queues.transitions import Actor
from tests.board.conftest import pointer_away, refreshes, sign_in, wait_for_refresh

pytestmark = pytest.mark.django_db(transaction=True)


def _titles(page) -> list[str]:
    return page.locator("table.queue tbody tr .title a").all_inner_texts()


def _row_boxes(page) -> dict[str, tuple[float, float]]:
    """Each row's top edge and its state badge's left edge, by row id."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll("tbody[data-rows] tr")].map(
            (tr) => [tr.id, [tr.getBoundingClientRect().top + scrollY,
                             tr.querySelector(".col-state").getBoundingClientRect().left]]))"""
    )


def test_focus_a_selection_and_the_scroll_survive_three_refreshes(
    page, user, endpoint, make_todo, fast_refresh
):
    todos = [make_todo(f"todo number {n}") for n in range(16)]
    page.set_viewport_size({"width": 1400, "height": 640})
    sign_in(page, "alice")
    focused, selected = todos[10], todos[12]
    # Keyboard focus on a row's link, and the title of another row selected.
    page.locator(f"#todo-{focused.id} .title a").focus()
    page.evaluate(
        """([focusedId, selectedId]) => {
          document.querySelector(`#todo-${focusedId} .title a`).__mine = true;
          const title = document.querySelector(`#todo-${selectedId} .title a`);
          getSelection().selectAllChildren(title);
        }""",
        [focused.id, selected.id],
    )
    page.evaluate("window.scrollTo(0, 180)")
    scroll = page.evaluate("window.scrollY")
    assert scroll > 100
    pointer_away(page)
    # Focus in the queue holds its own refreshes...
    expect(page.locator("[data-live-status]")).to_have_text(
        "Holding still while you are in the queue"
    )
    held = refreshes(page)
    page.wait_for_timeout(2200)
    assert refreshes(page) == held
    # ...and a refresh the person's own action asks for (queue-changed) keeps it all, three
    # times, while the rows change under it.
    agent = Actor.agent(endpoint)
    changes = [
        lambda: transitions.claim(agent, todos[14].id, claimant="run-1"),
        lambda: transitions.complete(agent, todos[14].id),
        lambda: transitions.claim(agent, todos[13].id, claimant="run-2"),
    ]
    for change in changes:
        change()
        before = refreshes(page)
        page.evaluate("document.body.dispatchEvent(new Event('queue-changed', {bubbles: true}))")
        wait_for_refresh(page, after=before)
    expect(page.locator(f"#todo-{todos[14].id} .state")).to_have_text("done")
    expect(page.locator(f"#todo-{todos[13].id} .state")).to_have_text("claimed")
    assert page.evaluate("document.activeElement.__mine === true")
    assert page.evaluate("getSelection().toString()") == selected.title
    assert page.evaluate("window.scrollY") == scroll
    assert page.js_errors == []


def test_rows_hold_their_place_while_new_todos_wait_behind_the_bar(
    page, user, endpoint, make_todo, fast_refresh
):
    todos = [make_todo(f"steady {n}") for n in range(8)]
    sign_in(page, "alice")
    pointer_away(page)
    before = _row_boxes(page)
    shown = _titles(page)
    for n in range(3):
        make_todo(f"arrived {n}")
    # A state whose badge is wider than "pending": the column must not move.
    transitions.claim(Actor.agent(endpoint), todos[3].id, claimant="run-9")
    todo = transitions.create_todo(Actor.agent(endpoint), title="failing")[0]
    transitions.claim(Actor.agent(endpoint), todo.id)
    transitions.fail(Actor.agent(endpoint), todo.id)  # a retry wait, arrived too
    show = page.locator("[data-live-show]")
    expect(show).to_have_text("4 new — show")
    expect(page.locator(f"#todo-{todos[3].id} .state")).to_have_text("claimed")
    assert _titles(page) == shown  # nothing pushed in above
    assert _row_boxes(page) == before  # every row and its State column where they were
    show.click()
    expect(page.locator("table.queue tbody tr")).to_have_count(12)
    assert _titles(page)[:4] == ["failing", "arrived 2", "arrived 1", "arrived 0"]
    expect(show).to_be_hidden()
    # The state tabs count what the queue holds.
    expect(page.locator('.statetabs a[data-state="all"] .count')).to_have_text("12")
    expect(page.locator('.statetabs a[data-state="retry_wait"] .count')).to_have_text("1")
    assert page.js_errors == []


def test_pause_and_the_pointer_hold_the_queue(page, user, endpoint, make_todo, fast_refresh):
    make_todo("first")
    sign_in(page, "alice")
    pointer_away(page)
    pause = page.get_by_role("button", name="Pause")
    pause.click()
    expect(page.get_by_role("button", name="Resume")).to_have_attribute("aria-pressed", "true")
    page.locator("body").focus()
    pointer_away(page)
    expect(page.locator("[data-live-status]")).to_have_text("Paused")
    held = refreshes(page)
    make_todo("while paused")
    page.wait_for_timeout(2200)
    assert refreshes(page) == held
    expect(page.locator("[data-live-show]")).to_be_hidden()
    # The pause outlives a reload (it is the reader's choice for this tab).
    page.reload()
    expect(page.locator("table.queue tbody tr")).to_have_count(2)
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    pointer_away(page)
    make_todo("while paused, after the reload")
    page.wait_for_timeout(2200)
    expect(page.locator("[data-live-show]")).to_be_hidden()
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("[data-live-show]")).to_have_text("1 new — show")

    # The pointer over the queue holds it too, and leaving lets it go on.
    page.locator("table.queue tbody tr").first.hover()
    expect(page.locator("[data-live-status]")).to_have_text(
        "Holding still while the pointer is over the queue"
    )
    held = refreshes(page)
    make_todo("while hovered")
    page.wait_for_timeout(2200)
    assert refreshes(page) == held
    expect(page.locator("[data-live-show]")).to_have_text("1 new — show")
    pointer_away(page)
    expect(page.locator("[data-live-show]")).to_have_text("2 new — show")
    expect(page.locator("[data-live-status]")).to_contain_text("Live · updated")
    assert page.js_errors == []
