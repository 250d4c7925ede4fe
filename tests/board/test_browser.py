"""The Board in a real browser: Playwright driving Debian's Chromium over the live server."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from switchboard.queues import transitions
from switchboard.queues.errors import Invalid
from switchboard.queues.models import TodoAttempt
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in
from tests.board.history import done_with_history, mixed_history
from tests.queues.helpers import get_todo_for_endpoint

pytestmark = pytest.mark.django_db(transaction=True)


def _open_drawer(page, title: str):
    page.get_by_role("link", name=title, exact=True).click()
    drawer = page.locator("#drawer #drawer-panel")
    expect(drawer).to_be_visible()
    return drawer


def test_sign_in_and_the_queue_lists_todos(page, user, endpoint, make_todo):
    make_todo("rebuild docs")
    make_todo("triage flaky test_login", priority=5)
    sign_in(page, "alice")
    expect(page.get_by_role("heading", name="Queue")).to_be_visible()
    rows = page.locator("table.queue tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("triage flaky test_login")
    expect(rows.first).to_contain_text("pending")
    assert page.js_errors == []


def test_drawer_opens_over_htmx_changes_the_url_and_back_closes_it(page, user, endpoint):
    todo_id = mixed_history(endpoint)
    sign_in(page, "alice")
    page.evaluate("window.__sameDocument = true")  # survives only if no full page load
    drawer = _open_drawer(page, "rebuild docs")
    expect(page).to_have_url(re.compile(rf"/todos/{todo_id}/$"))
    assert page.evaluate("window.__sameDocument") is True
    expect(drawer).to_contain_text(f"todo #{todo_id}")
    # the queue keeps refreshing underneath without closing the drawer
    page.wait_for_timeout(5600)
    expect(drawer).to_be_visible()
    page.go_back()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.locator("#drawer #drawer-panel")).to_have_count(0)
    expect(page.locator("table.queue")).to_be_visible()
    assert page.js_errors == []


def test_drawer_shows_failed_and_died_attempts(page, user, endpoint):
    mixed_history(endpoint)
    sign_in(page, "alice")
    drawer = _open_drawer(page, "rebuild docs")
    strip = drawer.locator("ol.strip")
    expect(strip.get_by_role("link", name="try 1: failed")).to_be_visible()
    expect(strip.get_by_role("link", name="try 2: died: lease lapsed, reaped")).to_be_visible()
    expect(strip.get_by_role("link", name="try 3: open: holds the lease")).to_be_visible()
    strip.get_by_role("link", name="try 2: died: lease lapsed, reaped").click()
    expect(drawer.locator(".diedline")).to_contain_text("after its last heartbeat at")
    expect(drawer.locator(".reported-nothing")).to_have_text("died — reported nothing")
    expect(page).to_have_url(re.compile(r"\?attempt=2$"))


def test_hostile_summary_is_text_and_nothing_runs(page, user, endpoint):
    todo_id = mixed_history(endpoint)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, "alice")
    page.goto(f"/todos/{todo_id}/?attempt=1")
    summary = page.locator(".untrusted-body.prose")
    expect(summary).to_contain_text("<script>window.__pwned = 1</script>")
    expect(summary).to_contain_text('<img src=x onerror="window.__pwned = 2">')
    assert page.locator(".untrusted img, .untrusted script").count() == 0
    page.goto("/queue/")
    _open_drawer(page, "rebuild docs").locator("ol.strip").get_by_role(
        "link", name="try 1: failed"
    ).click()
    expect(page.locator("#drawer .untrusted-body.prose")).to_contain_text("<script>")
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []


def test_artifacts_only_link_when_https_and_whole(page, user, endpoint):
    todo_id = mixed_history(endpoint)  # try 1 has an mcp:// handle
    agent = Actor.agent(endpoint)
    cut, _ = transitions.create_todo(Actor.agent(endpoint), title="long artifact")
    transitions.claim(agent, cut.id)
    transitions.complete(agent, cut.id, artifact="https://example.com/" + "a" * 600)
    with pytest.raises(Invalid):
        transitions.release(agent, todo_id, artifact="javascript:alert(1)")
    assert not TodoAttempt.objects.filter(artifact__startswith="javascript:").exists()
    sign_in(page, "alice")
    page.goto(f"/todos/{todo_id}/?attempt=1")
    expect(page.locator(".artifact-text")).to_have_text("mcp://cairn/r-41")
    assert page.locator('a[href^="mcp:"]').count() == 0
    page.goto(f"/todos/{cut.id}/")
    expect(page.locator(".artifact-text")).to_contain_text("https://example.com/aaa")
    assert page.locator('a[href^="https://example.com/"]').count() == 0


def test_a_human_claim_is_an_owner_attempt_and_completes_with_a_summary(
    page, user, endpoint, make_todo
):
    todo = make_todo("write release notes")
    sign_in(page, "alice")
    drawer = _open_drawer(page, "write release notes")
    drawer.get_by_role("button", name="Claim it myself").click()
    # The news ("You hold this todo now", test_drawer_labels.py) becomes the state line at
    # the drawer's next live refresh, which the claim itself sets off: either says it.
    expect(drawer.locator(".heldby")).to_contain_text("You hold this todo")
    seen_by_agent = get_todo_for_endpoint(endpoint, todo.id).as_api()["todo"]
    assert seen_by_agent["state"] == "claimed"
    assert seen_by_agent["attempts"][0]["claimer_kind"] == "owner"
    assert seen_by_agent["attempts"][0]["user"] == "alice"
    drawer.get_by_label("Summary").first.fill("Wrote them by hand; see the wiki.")
    drawer.get_by_label("Result").first.fill('{"pages": 2}')
    drawer.get_by_role("button", name="Complete", exact=True).click()
    expect(drawer.locator(".notice")).to_have_text("Completed.")
    expect(drawer.locator(".state").first).to_have_text("done")
    expect(drawer).to_contain_text("Wrote them by hand; see the wiki.")
    expect(page.locator(f"#todo-{todo.id}")).to_contain_text("done")  # the row refreshed
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    assert (attempt.claimer_kind, attempt.outcome, attempt.result) == (
        "owner",
        "completed",
        {"pages": 2},
    )


def test_rerun_starts_round_two_with_tries_counted_from_one(page, user, endpoint):
    todo_id = done_with_history(endpoint, user)
    sign_in(page, "alice")
    drawer = _open_drawer(page, "rebuild docs")
    drawer.get_by_role("button", name="Rerun (new round)").click()
    expect(drawer.locator(".notice")).to_contain_text("a new round starts")
    expect(drawer.locator(".rail")).to_contain_text("Round 2")
    drawer.get_by_role("button", name="Claim it myself").click()
    expect(drawer.locator(".stamp")).to_have_text(f"todo #{todo_id} · try 1 · round 2")
    expect(drawer.locator("ol.strip a")).to_have_count(1)
    drawer.locator(".rail").get_by_role("link", name=re.compile("Round 1")).click()
    expect(drawer.locator("ol.strip a")).to_have_count(4)


def test_a_stale_action_shows_the_message_and_the_fresh_drawer(page, user, endpoint, make_todo):
    todo = make_todo("stale one")
    sign_in(page, "alice")
    drawer = _open_drawer(page, "stale one")
    # When its stream becomes ready every region reads itself (board.js, Live.ready: what
    # changed between its drawing and the watch). On a busy machine that can come after the
    # drawer opened, and a read of it still being served when the claim below commits brings
    # the fresh drawer (seen once under five xdist workers): until the page is live and no
    # read of the drawer is in flight.
    page.wait_for_function(
        "() => document.querySelector('[data-live-status].is-live')"
        " && !document.getElementById('drawer-panel').__live.busy"
    )
    # The drawer would read itself again once the live stream tells it of the claim below,
    # and a click that lands as it does meets the fresh drawer (its "Claim it myself" gone),
    # not a stale one: held back here, so the click acts on the drawer as it was drawn.
    page.route(
        re.compile(rf"/todos/{todo.id}/(\?.*)?$"),
        lambda route: route.abort() if route.request.method == "GET" else route.fallback(),
    )
    transitions.claim(Actor.agent(endpoint), todo.id, claimant="run-7")  # meanwhile
    drawer.get_by_role("button", name="Claim it myself").click()
    notice = page.locator("#drawer .notice.stale")
    expect(notice).to_contain_text("moved on since you opened it")
    expect(notice).to_contain_text("Nothing was changed")
    expect(page.locator("#drawer .heldby")).to_contain_text("Held by run-7")
    assert TodoAttempt.objects.filter(todo_id=todo.id).count() == 1
