"""Drawers in a real browser: an open drawer follows its todo (keeping what was typed), ✕
and Esc close it and restore the queue's URL without Back reopening it, every try of a long
run is reachable, and times read in the browser's own time zone."""

from __future__ import annotations

import re
from datetime import UTC, timedelta
from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from switchboard.queues import transitions
from switchboard.queues.models import TodoAttempt
from switchboard.queues.transitions import Actor
from tests.board.conftest import PASSWORD, refreshes, sign_in, wait_for_refresh
from tests.queues.helpers import make_retry_due

pytestmark = pytest.mark.django_db(transaction=True)

DRAWER = "#drawer #drawer-panel"


def _open(page, title: str):
    page.locator("table.queue").get_by_role("link", name=title, exact=True).click()
    drawer = page.locator(DRAWER)
    expect(drawer).to_be_visible()
    expect(drawer.locator("h1")).to_have_text(title)
    expect(page).to_have_url(re.compile(r"/todos/\d+/"))
    return drawer


def _path(page) -> str:
    url = urlparse(page.url)
    return url.path + (f"?{url.query}" if url.query else "")


def test_an_open_drawer_follows_its_todo_and_keeps_what_was_typed(
    page, user, make_user, endpoint, make_todo, fast_refresh
):
    todo = make_todo("moving target", max_attempts=3)
    agent = Actor.agent(endpoint)
    transitions.claim(agent, todo.id, claimant="run-1")
    sign_in(page, "alice")
    drawer = _open(page, "moving target")
    expect(drawer.locator(".stamp")).to_have_text(f"todo #{todo.id} · try 1 · round 1")
    expect(drawer.locator(".heldby")).to_contain_text("Held by run-1")

    # It moves on while the drawer is open: the drawer says so without being touched.
    transitions.fail(agent, todo.id, summary="exit 1")
    expect(drawer.locator(".facts .state").first).to_have_text("retry wait")
    expect(drawer.get_by_text("Next retry")).to_be_visible()
    expect(drawer.get_by_role("button", name="Retry now")).to_be_visible()
    expect(drawer.get_by_role("button", name="Release their lease")).to_have_count(0)
    make_retry_due(todo.id)
    transitions.claim(agent, todo.id, claimant="run-2")
    expect(drawer.locator(".stamp")).to_have_text(f"todo #{todo.id} · try 2 · round 1")
    expect(drawer.locator(".facts .state").first).to_have_text("claimed")
    expect(drawer.locator("ol.strip a")).to_have_count(2)
    expect(drawer.locator(".timeline .tl-row")).to_have_count(2)
    expect(drawer.get_by_role("button", name="Retry now")).to_have_count(0)

    # A person's claim, and a half-typed summary: kept through refreshes, and kept (but no
    # longer sendable) once somebody else releases the lease.
    transitions.release(agent, todo.id)
    expect(drawer.get_by_role("button", name="Claim it myself")).to_be_visible()
    drawer.get_by_role("button", name="Claim it myself").click()
    expect(drawer.locator(".heldby")).to_contain_text("You hold this todo")
    summary = drawer.locator("details", has_text="Complete").get_by_label("Summary")
    summary.fill("half of what I meant to say")
    page.locator("#drawer h1").click()  # focus leaves the form; the text stays typed
    for _ in range(2):  # the todo changes under the drawer (a heartbeat): it is read again
        before = refreshes(page, "drawer-panel")
        transitions.heartbeat(Actor.human(user), todo.id)
        wait_for_refresh(page, "drawer-panel", after=before)
    expect(summary).to_have_value("half of what I meant to say")
    bob = make_user("bob")
    bob.teams.add(endpoint.team)
    transitions.release(Actor.human(bob), todo.id)
    expect(drawer.locator(".facts .state").first).to_have_text("pending")
    expect(drawer.get_by_role("button", name="Claim it myself")).to_be_visible()
    outdated = drawer.locator("details.is-outdated")
    expect(outdated).to_contain_text("can no longer be sent")
    expect(outdated.get_by_label("Summary")).to_have_value("half of what I meant to say")
    expect(outdated.get_by_role("button", name="Complete")).to_be_disabled()
    assert page.js_errors == []


def test_close_and_escape_restore_the_queue_and_back_does_not_reopen(
    page, user, make_todo, fast_refresh
):
    for n in range(4):
        make_todo(f"todo {n}")
    sign_in(page, "alice")
    page.goto("/queue/?state=pending")
    page.evaluate("window.__sameDocument = true")
    for n in range(4):  # four drawers in turn: one history entry over the queue
        _open(page, f"todo {n}")
    assert re.fullmatch(r"/todos/\d+/", _path(page))
    page.locator(DRAWER).get_by_role("link", name="Close the drawer").click()
    expect(page.locator(DRAWER)).to_have_count(0)
    expect(page).to_have_url(re.compile(r"/\?state=pending$"))
    assert page.evaluate("window.__sameDocument") is True  # closed in place, no page load
    page.go_back()  # the page before the queue, not an earlier drawer
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator(DRAWER)).to_have_count(0)

    page.goto("/queue/?state=pending")
    _open(page, "todo 1")
    drawer = _open(page, "todo 2")
    # A try picked in the drawer is kept in its URL, still one entry.
    drawer.locator(".rail a").first.click()
    expect(page).to_have_url(re.compile(r"/todos/\d+/\?round=1$"))
    page.keyboard.press("Escape")
    expect(page.locator(DRAWER)).to_have_count(0)
    expect(page).to_have_url(re.compile(r"/\?state=pending$"))
    page.go_back()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator(DRAWER)).to_have_count(0)
    # Back while a drawer is open closes it (and Forward opens it again).
    page.goto("/queue/?state=pending")
    _open(page, "todo 3")
    page.go_back()
    expect(page.locator(DRAWER)).to_have_count(0)
    expect(page).to_have_url(re.compile(r"/\?state=pending$"))
    page.go_forward()
    expect(page.locator(DRAWER)).to_be_visible()
    expect(page.locator(DRAWER).locator("h1")).to_have_text("todo 3")
    assert page.js_errors == []


def test_every_try_of_a_twelve_try_run_is_reachable(page, user, endpoint, make_todo):
    todo = make_todo("twelve releases")
    agent = Actor.agent(endpoint)
    for n in range(12):
        transitions.claim(agent, todo.id, claimant=f"run-{n + 1}")
        transitions.release(agent, todo.id)
    sign_in(page, "alice")
    drawer = _open(page, "twelve releases")
    strip = drawer.locator("ol.strip")
    expect(strip.locator("a[aria-current]")).to_have_count(2)  # try 1, try 12
    more = strip.get_by_role("link", name="show tries 2 to 11: 10 more released")
    expect(more).to_have_text("+10 more released")
    more.focus()
    page.keyboard.press("Enter")
    for n in range(1, 13):
        expect(strip.get_by_role("link", name=f"try {n}: released", exact=True)).to_be_visible()
    strip.get_by_role("link", name="try 6: released", exact=True).click()
    expect(drawer.locator("#attempt-title")).to_have_text("Try 6 of round 1")
    expect(drawer.locator(".attempt")).to_contain_text("run-6")
    expect(strip.get_by_role("link")).to_have_count(12)  # the run stays open
    expect(drawer.locator(".timeline .tl-row")).to_have_count(12)
    assert page.js_errors == []


def test_times_read_in_the_browsers_zone_with_utc_on_hover(browser, live_server, user, endpoint):
    agent = Actor.agent(endpoint)
    todo = transitions.create_todo(Actor.agent(endpoint), title="when was it")[0]
    transitions.claim(agent, todo.id, claimant="run-1")
    transitions.complete(agent, todo.id)
    user.is_staff = user.is_superuser = True
    user.save()
    claimed_at = TodoAttempt.objects.get(todo_id=todo.id).claimed_at
    local = claimed_at.astimezone(UTC) - timedelta(hours=8)  # PST in December
    context = browser.new_context(base_url=live_server.url, timezone_id="America/Los_Angeles")
    page = context.new_page()
    try:
        sign_in(page, "alice", PASSWORD)
        page.goto(f"/todos/{todo.id}/")
        claimed = page.locator(".attempt .facts div", has_text="Claimed").locator("time")
        expect(claimed).to_have_text(local.strftime("%Y-%m-%d %H:%M:%S PST"))
        expect(claimed).to_have_attribute(
            "title", claimed_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        )
        # The same format in admin.
        page.goto(f"/admin/queues/todo/{todo.id}/change/")
        created = page.locator(".field-created_at_when time")
        expect(created).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d PST$"))
        expect(created).to_have_attribute("title", re.compile(r" UTC$"))
        # Activity no longer says "Times in UTC" while showing relative times.
        page.goto("/activity/")
        expect(page.locator(".pagehead .sub")).to_contain_text("your browser's time zone")
        expect(page.locator(".feed time[data-when=full]").first).to_have_text(re.compile(r"PST$"))
    finally:
        context.close()
