"""The live bar says one thing at a time ("Connecting…", then "Live"; never "Refreshes every
5 s" on the way), its dot is grey when the page does not keep itself up to date, and
"Auto-show new" (remembered for the tab) brings new todos in while nobody is reading the
list."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_overview_says_connecting_then_live(page, user, endpoint, make_todo):
    make_todo()
    page.add_init_script(
        "document.addEventListener('DOMContentLoaded', () => {"
        " const status = document.querySelector('[data-live-status]');"
        " window.__said = [status.textContent];"
        " new MutationObserver(() => window.__said.push(status.textContent))"
        " .observe(status, {childList: true, characterData: true, subtree: true}); });"
    )
    sign_in(page, "alice", to="/")
    expect(page.locator("[data-live-status]")).to_contain_text("Live")
    said = page.evaluate("window.__said")
    assert not any(s.startswith("Refreshes every") for s in said), said
    assert "Connecting…" in said, said
    dot = page.evaluate(
        "() => getComputedStyle(document.querySelector('[data-live-status]'), '::before')"
        ".backgroundColor"
    )
    assert dot == "rgb(25, 107, 66)"  # --ok: live


def test_without_javascript_the_dot_is_grey(browser, live_server, user, endpoint):
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    page = context.new_page()
    try:
        sign_in(page, "alice", to="/queue/")
        status = page.locator("[data-live-status]")
        expect(status).to_have_text("As of loading: this page does not refresh by itself.")
        dot = page.evaluate(
            "() => getComputedStyle(document.querySelector('[data-live-status]'), '::before')"
            ".backgroundColor"
        )
        assert dot == "rgb(95, 106, 125)"  # --faint
    finally:
        context.close()


def test_auto_show_new_brings_new_todos_in_while_nobody_reads_the_list(
    page, user, endpoint, make_todo
):
    make_todo("first")
    sign_in(page, "alice", to="/queue/")
    expect(page.locator("[data-live-status]")).to_contain_text("Live")
    page.mouse.move(5, 5)  # the pointer away from the list
    page.get_by_role("button", name="Auto-show new").click()
    expect(page.get_by_role("button", name="Auto-show new")).to_have_attribute(
        "aria-pressed", "true"
    )
    page.locator("body").focus()
    page.evaluate("() => document.activeElement.blur()")
    transitions.create_todo(Actor.agent(endpoint), title="arrived while away")
    rows = page.locator("table.queue tbody tr[data-todo]")
    expect(rows.first).to_contain_text("arrived while away", timeout=15_000)
    expect(page.locator("[data-live-show]")).to_be_hidden()
    # Remembered for the tab.
    page.reload()
    expect(page.get_by_role("button", name="Auto-show new")).to_have_attribute(
        "aria-pressed", "true"
    )
    assert page.js_errors == []
