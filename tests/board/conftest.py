"""Browser fixtures: Playwright driving Debian's Chromium against pytest-django's live
server (a real HTTP server in a thread, on the real test database).

Browser tests skip, with the reason, only when no Chromium is installed; `.ci/run` installs
the `chromium` package. A downloaded browser is never used."""

from __future__ import annotations

import os
import shutil
from urllib.parse import urlparse

import pytest


@pytest.fixture
def signed_in(logged_in):
    """Django's test client, signed in as alice (the root conftest's ``logged_in``)."""
    return logged_in


# Debian's headless shell (`apt-get install chromium-headless-shell`: the same Chromium, built
# without the browser's windowing layer, what Playwright itself drives headless) when it is
# there: a third less CPU over the browser tests than the full browser in headless mode.
CHROMIUM = os.environ.get("SWITCHBOARD_CHROMIUM") or next(
    (
        path
        for path in ("/usr/bin/chromium-headless-shell", "/usr/bin/chromium")
        if os.path.exists(path)
    ),
    "/usr/bin/chromium",
)
PASSWORD = "pw-for-tests"


def _chromium_missing() -> str | None:
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium-headless-shell or chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


# One Playwright driver and one Chromium per worker, kept from one browser test module to the
# next (a launch is 0.8 s of CPU; the suite made some thirty five), and stopped before any
# test that does not use them (tests/conftest.py, ``_browsers_stopped``): while it runs,
# Playwright's sync API keeps an event loop running in this thread, and a test that calls
# ``asyncio.run`` (an MCP client) or Django's ORM without the async-unsafe switch needs the
# thread without one.
_running: dict = {}


def running_browser():
    if "browser" not in _running:
        # The ORM calls the tests make alongside the browser are plain synchronous calls;
        # Django only sees the event loop Playwright keeps in this thread.
        _running["previous"] = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
        os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
        from playwright.sync_api import sync_playwright

        _running["playwright"] = playwright = sync_playwright().start()
        _running["browser"] = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
    return _running["browser"]


def stop_browser() -> None:
    if "browser" not in _running:
        return
    try:
        _running["browser"].close()
    finally:
        _running["playwright"].stop()
        previous = _running["previous"]
        _running.clear()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def browser():
    """This worker's Chromium (``running_browser``), started by the first test that needs it."""
    reason = _chromium_missing()
    if reason:
        pytest.skip(reason)
    return running_browser()


@pytest.fixture
def page(browser, live_server):
    from playwright.sync_api import expect

    # Two CPU cores run the server, the browser and the test: give assertions some room.
    expect.set_options(timeout=10_000)
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.js_errors = errors
    yield page
    context.close()


@pytest.fixture(autouse=True)
def _streams_ended(request):
    """After each test, until the server has let go of its closed pages' Board streams
    (board/live.py) and their reads, and has answered every request the page had sent
    before it closed (a click's, a stream's patch): the test database is emptied next
    (pytest-django's fixture, set up before this one, is torn down after it), and a read
    still running would wait on its TRUNCATE, or it on the read (PostgreSQL then ends one
    of them as a deadlock: the flush failed, and the next test on that worker found the
    last one's rows)."""
    yield
    import time

    from switchboard.board import live

    server = (
        request.getfixturevalue("live_server") if "live_server" in request.fixturenames else None
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        streaming = any(hub.viewers or hub.flushing for hub in list(live.hubs.all()))
        if not streaming and (server is None or server.in_flight == 0):
            return
        time.sleep(0.02)


def sign_in(page, username: str, password: str = PASSWORD, *, to: str = "/queue/") -> None:
    """Sign in and land on ``to`` (the queue; ``/`` is the landing page, the overview)."""
    page.goto(f"/login/?next={to}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    # The page, loaded (htmx initialises on load; a click before that is a plain link).
    page.wait_for_url(lambda url: urlparse(url).path == urlparse(to).path, wait_until="load")


@pytest.fixture
def fast_refresh(settings):
    """The live queue and drawers refresh every second (5 by default), so a test sees three
    refreshes in seconds."""
    settings.SWITCHBOARD_BOARD_REFRESH_SECONDS = 1
    return 1


def refreshes(page, region: str = "queue") -> int:
    """How many refreshes the live region ``#region`` has applied so far."""
    return page.evaluate(
        "(id) => { const el = document.getElementById(id); return el && el.__live ? el.__live.count : -1; }",
        region,
    )


def wait_for_refresh(page, region: str = "queue", *, after: int | None = None) -> int:
    """Until ``#region`` has applied one more refresh than ``after`` (default: now)."""
    start = refreshes(page, region) if after is None else after
    page.wait_for_function(
        "([id, n]) => { const el = document.getElementById(id); return el && el.__live && el.__live.count > n; }",
        arg=[region, start],
    )
    return refreshes(page, region)


def pointer_away(page) -> None:
    """Park the pointer on the page heading, outside every live region."""
    box = page.locator(".pagehead h1").bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + 2)
