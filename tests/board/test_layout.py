"""The Board's layout in a real browser: at 720 px nothing overlaps or is clipped, typed
text is not bold, an empty feed reads as a sentence, and dark mode keeps untrusted data
framed (screenshots of it are written to the test's temporary folder)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from switchboard.queues import teams, transitions
from switchboard.queues.models import Membership
from switchboard.queues.transitions import Actor
from tests.board.conftest import PASSWORD, sign_in
from tests.board.history import mixed_history
from tests.queues.helpers import lapse_lease

pytestmark = pytest.mark.django_db(transaction=True)

OVERLAPS = """(selectors) => {
  const boxes = [];
  for (const selector of selectors) {
    for (const el of document.querySelectorAll(selector)) {
      const r = el.getBoundingClientRect();
      if (r.width && r.height) boxes.push({selector, text: el.textContent.trim().slice(0, 30), r});
    }
  }
  const hits = [];
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const a = boxes[i].r, b = boxes[j].r;
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
      hits.push(`${boxes[i].text} / ${boxes[j].text}`);
  }
  const outside = boxes.filter((b) => b.r.left < -0.5 || b.r.right > innerWidth + 0.5).map((b) => b.text);
  return {hits, outside};
}"""

CLIPPED = """(selector) => [...document.querySelectorAll(selector)]
  .filter((el) => el.getBoundingClientRect().width > 0 && el.scrollWidth > el.clientWidth + 1)
  .map((el) => el.textContent.trim())"""


@pytest.fixture
def busy_board(user, make_user, endpoint):
    """Several teams (so the team switcher shows), a died try in every outcome column."""
    other = teams.get_or_create_team("platform-infrastructure", name="Platform infrastructure")
    Membership.objects.create(team=other, user=user, role=Membership.Role.OWNER)
    for n in range(3):
        mixed_history(endpoint, title=f"a todo whose title is long enough to be cut {n}")
    todo = transitions.create_todo(Actor.agent(endpoint), title="taken over")[0]
    agent = Actor.agent(endpoint)
    transitions.claim(agent, todo.id, claimant="harness/buildbox/ci-fixer/run-1")
    lapse_lease(todo.id)
    transitions.claim(agent, todo.id, claimant="harness/buildbox/ci-fixer/run-2")  # took over
    return endpoint


def test_at_720_px_nothing_overlaps_and_the_queue_fits(browser, live_server, busy_board):
    context = browser.new_context(base_url=live_server.url, viewport={"width": 720, "height": 900})
    page = context.new_page()
    try:
        sign_in(page, "alice", PASSWORD)
        expect(page.locator("#team-switch-select")).to_be_visible()
        top = page.evaluate(
            OVERLAPS,
            [
                ".topbar .brand",
                ".topnav a",
                ".teamswitch select",
                ".topright .who",
                ".topright form:not(.teamswitch)",
            ],
        )
        assert top == {"hits": [], "outside": []}
        new = page.get_by_role("link", name="+ New todo")
        nav = page.locator(".topnav").bounding_box()
        box = new.bounding_box()
        assert box["x"] >= nav["x"] and box["x"] + box["width"] <= nav["x"] + nav["width"] + 0.5
        switch = page.locator("#team-switch-select").bounding_box()
        assert switch["y"] + switch["height"] <= box["y"] or box["y"] + box["height"] <= switch["y"]

        table = page.locator("table.queue").bounding_box()
        assert table["x"] + table["width"] <= 720
        cells = page.evaluate(OVERLAPS, ["table.queue thead th"])
        assert cells == {"hits": [], "outside": []}
        # The last outcome, the state and the tries read whole; only titles may be cut.
        assert page.evaluate(CLIPPED, "table.queue .lastout") == []
        assert page.evaluate(CLIPPED, "table.queue .state") == []
        assert page.evaluate(CLIPPED, "table.queue td.col-tries") == []
        expect(page.locator("table.queue .lastout").first).to_contain_text("DIED")
    finally:
        context.close()


def test_typed_text_is_not_bold_and_an_empty_feed_is_one_sentence(page, user, make_user):
    sign_in(page, "alice")
    # A fresh account: the ticker says nothing happened yet, on one line, not a word a line.
    empty = page.locator(".ticker .feed-empty")
    expect(empty).to_contain_text("Nothing has happened yet.")
    line = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('.ticker .feed-empty')).lineHeight)"
    )
    assert empty.bounding_box()["height"] < line * 4  # a few lines in 280 px, not thirteen
    page.goto("/activity/")
    assert page.locator(".feed-empty").bounding_box()["height"] < line * 2.5
    page.goto("/todos/new/")  # no endpoint yet: the form says to vend one
    page.goto("/endpoints/")
    agent_id = page.get_by_label("Agent id")
    agent_id.fill("typed")
    assert agent_id.evaluate("el => getComputedStyle(el).fontWeight") == "400"
    label = page.locator("label", has=agent_id)
    assert label.evaluate("el => getComputedStyle(el).fontWeight") == "600"


def test_dark_mode_keeps_untrusted_data_framed(browser, live_server, user, endpoint, tmp_path):
    todo_id = mixed_history(endpoint)
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1440, "height": 900}, color_scheme="dark"
    )
    page = context.new_page()
    try:
        sign_in(page, "alice", PASSWORD)
        page.screenshot(path=tmp_path / "queue-dark.png")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert _luminance(background) < 0.1  # dark
        page.locator("table.queue").get_by_role("link", name="rebuild docs").click()
        drawer = page.locator("#drawer #drawer-panel")
        drawer.locator("ol.strip").get_by_role("link", name="try 1: failed").click()
        frame = drawer.locator("figure.untrusted").first
        expect(frame).to_contain_text("Untrusted data")
        page.screenshot(path=tmp_path / "drawer-dark.png")
        style = frame.evaluate(
            """el => { const s = getComputedStyle(el);
                 return [s.borderTopStyle, s.borderTopColor, s.backgroundColor,
                         getComputedStyle(el.closest('.drawer-host')).backgroundColor]; }"""
        )
        border_style, border, fill, drawer_bg = style
        assert border_style == "dashed"
        # The frame stands out from the drawer around it: an amber border, a tinted ground.
        assert _luminance(border) - _luminance(drawer_bg) > 0.3
        assert fill != drawer_bg
        assert (tmp_path / "drawer-dark.png").stat().st_size > 10_000
        assert todo_id
    finally:
        context.close()


def _luminance(css: str) -> float:
    """Relative luminance of an ``rgb(...)`` or ``rgba(...)`` colour."""
    parts = [float(p) for p in css[css.index("(") + 1 : css.index(")")].split(",")[:3]]

    def channel(c: float) -> float:
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in parts)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def test_a_body_too_large_is_stopped_in_the_browser_with_the_text_kept(page, user, endpoint):
    sign_in(page, "alice")
    page.goto("/todos/new/")
    page.get_by_label("Endpoint").select_option(str(endpoint.pk))  # none is picked for you
    page.get_by_label("Title").fill("too much")
    body = page.locator("textarea[name=body]")
    body.evaluate(
        "(el) => { el.value = 'x'.repeat(1024 * 1024); el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    expect(page.locator("#body-bytes")).to_contain_text("too long")
    page.get_by_role("button", name="Create todo").click()
    page.wait_for_timeout(300)
    assert page.url.endswith("/todos/new/")
    assert body.evaluate("(el) => el.value.length") == 1024 * 1024
    assert body.evaluate("(el) => el.validity.customError") is True
    body.evaluate(
        "(el) => { el.value = 'fits'; el.dispatchEvent(new Event('input', {bubbles: true})); }"
    )
    expect(page.locator("#body-bytes")).to_have_text("4 bytes of 64 KiB")
    page.get_by_role("button", name="Create todo").click()
    expect(page.locator("#drawer-panel h1")).to_have_text("too much")
