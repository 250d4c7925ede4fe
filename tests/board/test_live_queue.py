"""The live queue in a real browser, pushed by the stream (board/live.py): a row changes where
it is within a second of the commit, under the pointer, under the keyboard focus and after a
drawer closes, while focus, a selection and the scroll stay; new todos wait behind a bar; only
the reader's Pause holds it; without the stream it reads itself on a timer, and without
JavaScript it says it does not refresh."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
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


def _live(page) -> None:
    """Until the stream holds (its first event came)."""
    expect(page.locator("[data-live-status]")).to_contain_text("Live")


def test_rows_change_under_focus_a_selection_and_the_scroll_and_keep_them(
    page, user, endpoint, make_todo
):
    todos = [make_todo(f"todo number {n}") for n in range(16)]
    page.set_viewport_size({"width": 1400, "height": 640})
    sign_in(page, "alice")
    _live(page)
    focused, selected = todos[10], todos[12]
    page.locator(f"#todo-{focused.id} .title a").focus()
    page.evaluate(
        """([focusedId, selectedId]) => {
          document.querySelector(`#todo-${focusedId} .title a`).__mine = true;
          getSelection().selectAllChildren(document.querySelector(`#todo-${selectedId} .title a`));
        }""",
        [focused.id, selected.id],
    )
    page.evaluate("window.scrollTo(0, 180)")
    scroll = page.evaluate("window.scrollY")
    assert scroll > 100
    agent = Actor.agent(endpoint)
    # The focused row itself changes, and two others: pushed, no read of the page.
    transitions.claim(agent, focused.id, claimant="run-1")
    expect(page.locator(f"#todo-{focused.id} .state")).to_have_text("claimed")
    expect(page.locator(f"#todo-{focused.id} .holder")).to_contain_text("run-1")
    transitions.claim(agent, todos[14].id, claimant="run-2")
    transitions.complete(agent, todos[14].id)
    expect(page.locator(f"#todo-{todos[14].id} .state")).to_have_text("done")
    assert page.evaluate("document.activeElement.__mine === true")
    assert page.evaluate("getSelection().toString()") == selected.title
    assert page.evaluate("window.scrollY") == scroll
    # The selected row waits while selected, and changes once the reader lets go.
    transitions.claim(agent, selected.id, claimant="run-3")
    page.wait_for_timeout(1500)
    expect(page.locator(f"#todo-{selected.id} .state")).to_have_text("pending")
    page.evaluate("getSelection().removeAllRanges()")
    expect(page.locator(f"#todo-{selected.id} .state")).to_have_text("claimed")
    assert page.js_errors == []


def test_live_under_the_pointer_and_after_a_drawer_closes(page, user, endpoint, make_todo):
    first, second = make_todo("under the pointer"), make_todo("after the drawer")
    sign_in(page, "alice")
    _live(page)
    agent = Actor.agent(endpoint)
    page.locator(f"#todo-{first.id}").hover()
    transitions.claim(agent, first.id, claimant="hovered")
    expect(page.locator(f"#todo-{first.id} .state")).to_have_text("claimed")
    # A drawer opened with the mouse and closed with its ✕: focus goes back to the row's
    # link, and the queue and the ticker go on.
    page.locator(f"#todo-{second.id} .title a").click()
    expect(page.locator("#drawer-panel")).to_be_visible()
    page.locator("#drawer [data-drawer-close]").first.click()
    expect(page.locator("#drawer-panel")).to_have_count(0)
    assert page.evaluate("document.activeElement.closest('tr').id") == f"todo-{second.id}"
    transitions.claim(agent, second.id, claimant="after-close")
    transitions.complete(agent, second.id)
    expect(page.locator(f"#todo-{second.id} .state")).to_have_text("done")
    expect(page.locator("#ticker li").first).to_contain_text("after the drawer")
    expect(page.locator("#ticker li").first).to_contain_text("completed")
    expect(page.locator('.statetabs a[data-state="done"] .count')).to_have_text("1")
    assert page.js_errors == []


def test_rows_hold_their_place_while_new_todos_wait_behind_the_bar(page, user, endpoint, make_todo):
    todos = [make_todo(f"steady {n}") for n in range(8)]
    sign_in(page, "alice")
    _live(page)
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
    # The tabs count what the queue holds as the changes come.
    expect(page.locator('.statetabs a[data-state="all"] .count')).to_have_text("12")
    expect(page.locator('.statetabs a[data-state="retry_wait"] .count')).to_have_text("1")
    show.click()
    expect(page.locator("table.queue tbody tr")).to_have_count(12)
    assert _titles(page)[:4] == ["failing", "arrived 2", "arrived 1", "arrived 0"]
    expect(show).to_be_hidden()
    assert page.js_errors == []


def test_a_row_that_leaves_the_tab_is_marked_where_it_stands(page, user, endpoint, make_todo):
    todo = make_todo("leaves the pending tab")
    make_todo("stays")
    sign_in(page, "alice", to="/queue/?state=pending")
    _live(page)
    transitions.claim(Actor.agent(endpoint), todo.id)
    row = page.locator(f"#todo-{todo.id}")
    expect(row).to_have_class("is-moved")
    expect(row.locator(".moved-note")).to_be_visible()
    expect(page.locator("[data-live-show]")).to_have_text("1 moved on — show")
    expect(page.locator('.statetabs a[data-state="pending"] .count')).to_have_text("1")


def test_only_pause_holds_it_and_says_so(page, user, endpoint, make_todo):
    todo = make_todo("first")
    sign_in(page, "alice")
    _live(page)
    page.get_by_role("button", name="Pause").click()
    resume = page.get_by_role("button", name="Resume")
    expect(resume).to_have_attribute("aria-pressed", "true")
    expect(page.locator("[data-live-status]")).to_have_text("Paused")
    held = refreshes(page)
    transitions.claim(Actor.agent(endpoint), todo.id)
    make_todo("while paused")
    page.wait_for_timeout(1500)
    assert refreshes(page) == held
    expect(page.locator(f"#todo-{todo.id} .state")).to_have_text("pending")
    # The pause outlives a reload (the reader's choice for this tab).
    page.reload()
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    page.get_by_role("button", name="Resume").click()
    expect(page.locator("[data-live-status]")).to_contain_text("Live")
    make_todo("after the pause")
    expect(page.locator("[data-live-show]")).to_have_text("1 new — show")
    assert page.js_errors == []


def test_without_the_stream_the_queue_reads_itself_on_a_timer(
    page, user, endpoint, make_todo, settings
):
    settings.SWITCHBOARD_BOARD_REFRESH_SECONDS = 1
    todo = make_todo("polled")
    page.route("**/live/**", lambda route: route.abort())  # a proxy that will not hold it
    sign_in(page, "alice")
    expect(page.locator("[data-live-status]")).to_contain_text("Refreshes every 1 s")
    before = refreshes(page)
    transitions.claim(Actor.agent(endpoint), todo.id)
    wait_for_refresh(page, after=before)
    expect(page.locator(f"#todo-{todo.id} .state")).to_have_text("claimed")
    assert page.js_errors == []


def test_without_javascript_the_page_says_it_does_not_refresh(browser, live_server, user):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    try:
        sign_in(page, "alice")
        expect(page.locator("[data-live-status]")).to_have_text(
            "As of loading: this page does not refresh by itself."
        )
        expect(page.get_by_role("link", name="Reload")).to_be_visible()
        assert "Refreshes every" not in page.content()
    finally:
        context.close()
