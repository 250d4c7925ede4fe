"""Retake the Board screenshots in this folder, against a running Switchboard.

    make run                      # on an empty database: the demo agents start with it
    .venv/bin/python docs/screenshots/take.py --password <the printed one>

Give the demo a few minutes first, so drawers have history. Uses Debian's Chromium
(/usr/bin/chromium) through Playwright, like the browser tests. Every page at 1440 and 390 px
in light and dark (720 px too for the queue, the drawer and Activity); a stalled endpoint
shows once an endpoint's work has waited five minutes with no agent seen (vend one and put
todos on it without running its agent).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password", required=True)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"]
        )
        sizes = (
            (1440, "light"),
            (1440, "dark"),
            (720, "light"),
            (720, "dark"),
            (390, "light"),
            (390, "dark"),
        )
        for width, scheme in sizes:
            suffix = ("" if width == 1440 else f"-{width}") + ("" if scheme == "light" else "-dark")
            context = browser.new_context(
                base_url=args.url,
                viewport={"width": width, "height": 844 if width == 390 else 900},
                color_scheme=scheme,
                timezone_id="Europe/Berlin",  # times read in the browser's zone
            )
            take(context.new_page(), args, suffix)
            context.close()
        browser.close()
    print("wrote", ", ".join(p.name for p in sorted(HERE.glob("*.png"))))


def take(page, args, suffix: str) -> None:
    page.goto("/login/")
    if suffix == "":
        page.screenshot(path=HERE / "sign-in.png")
    page.get_by_label("Username").fill(args.user)
    page.get_by_label("Password").fill(args.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{args.url}/", wait_until="load")
    hide = page.get_by_role("button", name="Hide")  # the demo's strip, read once is enough
    if hide.count():
        hide.click()
        page.wait_for_load_state("load")
    page.wait_for_timeout(1500)  # the stream's first update
    if "720" not in suffix:
        page.screenshot(path=HERE / f"board-overview{suffix}.png")
    page.goto("/queue/")
    page.wait_for_timeout(1500)
    page.screenshot(path=HERE / f"board-queue{suffix}.png")
    # A search that explains itself: where each hit matched, the words marked.
    if "720" not in suffix:
        page.goto("/queue/?q=failed")
        page.wait_for_timeout(800)
        page.screenshot(path=HERE / f"board-search{suffix}.png")
    if "390" in suffix:
        return  # a phone: the overview, the queue as cards, a search

    # A drawer with a mixed history: of the todos with a death, the one with most tries.
    page.goto("/queue/?died=1")
    links = page.locator("table.queue tbody tr .title a")
    hrefs = [links.nth(i).get_attribute("href") for i in range(min(links.count(), 15))]
    if hrefs:
        tries = {}
        for href in hrefs:
            page.goto(href)
            tries[href] = page.locator("ol.strip a").count()
        page.goto("/queue/?died=1")
        best = max(hrefs, key=lambda href: tries[href])
        page.locator(f"table.queue a[href='{best}']").click()
        drawer = page.locator("#drawer #drawer-panel")
        drawer.wait_for()
        died = drawer.locator("ol.strip a[aria-label*='died']").first
        died.click()
        page.wait_for_timeout(500)
        page.screenshot(path=HERE / f"board-drawer{suffix}.png")
        if suffix in ("", "-dark"):  # the keyboard's shortcuts, over the drawer
            page.keyboard.press("Escape")
            page.locator("body").press("?")
            page.wait_for_timeout(200)
            page.screenshot(path=HERE / f"board-shortcuts{suffix}.png")
            page.keyboard.press("Escape")

    page.goto("/activity/")
    page.screenshot(path=HERE / f"board-activity{suffix}.png")

    if "720" not in suffix:  # Waiting on people: whatever the demo's agents asked
        page.goto("/waiting/")
        page.wait_for_timeout(300)
        page.screenshot(path=HERE / f"board-waiting{suffix}.png", full_page="390" not in suffix)

    if suffix == "":
        # Dead-letter triage: the tab with each dead letter's reason and last summary, three
        # rows ticked, and the confirmation of "all matching" (nothing is rerun: not confirmed).
        page.goto("/queue/?state=dead")
        picks = page.locator("tbody[data-rows] [data-pick]")
        for i in range(min(picks.count(), 4)):
            if i != 1:
                picks.nth(i).check()
        page.mouse.move(5, 5)
        page.screenshot(path=HERE / "dead-letters.png")
        if picks.count():
            page.locator("#bulk input[name=all]").check()
            page.get_by_role("button", name="Rerun…").click()
            page.wait_for_load_state("load")
            page.screenshot(path=HERE / "dead-letters-confirm.png")
        # The same dead letters grouped by reason and last error, each with its actions.
        page.goto("/queue/dead/")
        page.screenshot(path=HERE / "dead-letters-by-reason.png", full_page=True)

    if suffix == "":
        # The team page (members, invitations, dead-letter sinks), then the endpoints list and
        # an endpoint's health at a glance: the busiest endpoint (most live todos) of the list.
        page.goto("/team/")
        page.screenshot(path=HERE / "team.png")
        page.goto("/endpoints/")
        page.screenshot(path=HERE / "endpoints.png")
        rows = page.locator("table.list.endpoints tbody tr")
        busiest, most = None, -1
        for i in range(rows.count()):
            row = rows.nth(i)
            live = row.locator("td.num strong")
            count = int(live.inner_text()) if live.count() else 0
            if count > most:
                busiest, most = row.locator("a[href^='/endpoints/']").first, count
        if busiest is not None:
            busiest.click()
            page.wait_for_load_state("load")
            page.screenshot(path=HERE / "endpoint.png", full_page=True)
        # A stalled endpoint's page, when one is (the overview marks its row).
        page.goto("/")
        stalled = page.locator("tr[data-stalled] td.col-ep a")
        if stalled.count():
            stalled.first.click()
            page.wait_for_load_state("load")
            page.screenshot(path=HERE / "endpoint-stalled.png")


if __name__ == "__main__":
    main()
