"""Every Board page, in light and dark, at 1440 and 390 px: no serious or critical axe-core
finding, and none of the moderate ones the third review listed (landmark-unique,
heading-order, region). axe-core comes from the npm registry (tests/board/axe/package.json,
installed on first run like the TypeScript MCP SDK's test) and is injected into Debian's
Chromium over the pages, drawn over realistic data (tests/board/board_data.py).

Kept fast: one browser context, each page visited once per width, both schemes checked on
the same page by emulating ``prefers-color-scheme``, axe limited to the WCAG 2 A/AA and
best-practice rules, all of them once a page and the rules a scheme or a width can change
otherwise (RUN_AXE's rule sets)."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.board.board_data import board_data
from tests.board.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).with_name("axe")
# Every serious or critical finding fails; so do these moderate ones (the review's).
ALSO_REFUSED = {"landmark-unique", "heading-order", "region", "scrollable-region-focusable"}
WIDTHS = ((1440, 900), (390, 844))

# Every rule once a page (light, 1440 px); otherwise only the rules a scheme or a width can
# change: the server draws the same document at every width, so what differs is what is
# shown and how (colours, sizes, what scrolls), which halves the test's time.
ALL_RULES = {"type": "tag", "values": ["wcag2a", "wcag2aa", "best-practice"]}
SCHEME_RULES = {"type": "rule", "values": ["color-contrast", "link-in-text-block"]}
WIDTH_RULES = {
    "type": "rule",
    "values": [
        "color-contrast",
        "link-in-text-block",
        "scrollable-region-focusable",
        "region",
        "landmark-unique",
        "heading-order",
        "label-content-name-mismatch",
    ],
}
RUN_AXE = """async (only) => {
  const found = await window.axe.run(document, {
    runOnly: only, resultTypes: ["violations"], preload: false, iframes: false,
  });
  return found.violations.map((v) => ({
    id: v.id, impact: v.impact,
    nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ") + " :: " + n.failureSummary),
    count: v.nodes.length,
  }));
}"""


@pytest.fixture(scope="session")
def axe_source() -> str:
    """axe-core from the npm registry into tests/board/axe (once: npm ci under a lock, so
    parallel workers install it once)."""
    npm = shutil.which("npm")
    assert npm, "npm is needed (.ci/run installs it: apt-get install nodejs npm)"
    script = AXE / "node_modules" / "axe-core" / "axe.min.js"
    with open(AXE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not script.is_file():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=AXE,
                check=True,
                timeout=300,
            )
    return script.read_text()


def _pages(data) -> list[tuple[str, str, str | None]]:
    """(name, path, what to do there first: a row's drawer, the shortcut overlay)."""
    return [
        ("overview", "/", None),
        ("queue", "/queue/", None),
        ("drawer", "/queue/", "drawer"),
        ("shortcuts", "/queue/", "shortcuts"),
        ("dead letters", "/queue/?state=dead", None),
        ("dead letters by reason", "/queue/dead/", None),
        ("search", "/queue/?q=customer_id", None),
        ("todo page", f"/todos/{data.done_id}/", None),
        ("waiting on people", "/waiting/", None),
        ("a question in the drawer", f"/todos/{data.asked_id}/", None),
        ("an answered question", f"/todos/{data.answered_id}/?attempt=1", None),
        ("asked first", f"/todos/{data.claimed_id}/", "ask"),
        ("cancel confirmation", f"/todos/{data.claimed_id}/cancel/", None),
        ("triage confirmation", "/triage/?state=dead&all=1&do=rerun", None),
        ("activity", "/activity/", None),
        ("activity of an endpoint", f"/activity/?endpoint={data.ci.pk}", None),
        ("failures in activity", "/activity/?kind=failures", None),
        ("endpoints", "/endpoints/", None),
        ("endpoint", f"/endpoints/{data.ci.pk}/", None),
        ("paused endpoint", f"/endpoints/{data.load.pk}/", None),
        ("stalled endpoint", f"/endpoints/{data.stalled.pk}/", None),
        ("rotate confirmation", f"/endpoints/{data.ci.pk}/rotate/", None),
        ("revoke confirmation", f"/endpoints/{data.ci.pk}/revoke/", None),
        ("team", "/team/", None),
        ("new todo", "/todos/new/", None),
        ("not found", "/todos/999999/", None),
    ]


def _check(page, axe_run: str, where: str, found: list[str], *, wide: bool = True) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme, reduced_motion="reduce")
        rules = SCHEME_RULES if scheme == "dark" else ALL_RULES if wide else WIDTH_RULES
        for v in page.evaluate(axe_run, rules):
            if v["impact"] in ("serious", "critical") or v["id"] in ALSO_REFUSED:
                found.append(
                    f"{where} {scheme}: {v['id']} ({v['impact']}, {v['count']}) {v['nodes']}"
                )


def test_no_serious_axe_finding_on_any_board_page_in_either_theme_at_1440_and_390(
    browser, live_server, user, axe_source
):
    data = board_data(user)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    # An init script runs before the page's own and is not the page's script: the Board's
    # CSP (no inline script) holds while axe is there.
    context.add_init_script(axe_source)
    page = context.new_page()
    page.set_default_timeout(15_000)
    found: list[str] = []
    try:
        page.goto(f"{live_server.url}/login/")
        _check(page, RUN_AXE, "sign-in 1440", found)
        sign_in(page, "alice", to="/")
        for width, height in WIDTHS:
            page.set_viewport_size({"width": width, "height": height})
            for name, path, first in _pages(data):
                page.goto(path, wait_until="load")
                if first == "drawer":
                    page.get_by_role("link", name=data.pending_title, exact=True).click()
                    page.locator("#drawer #drawer-panel").wait_for()
                elif first == "ask":
                    page.get_by_role("button", name="Cancel", exact=True).click()
                    page.locator("#confirm").wait_for()
                elif first == "shortcuts":
                    page.locator("body").press("?")
                    page.locator("#shortcuts").wait_for()
                _check(page, RUN_AXE, f"{name} {width}", found, wide=width == WIDTHS[0][0])
    finally:
        context.close()
    assert not found, "\n".join(found)
