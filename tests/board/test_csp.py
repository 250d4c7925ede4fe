"""The Content Security Policy in a real browser: every Board page, a drawer and its htmx
actions, and Django admin render and run under it with nothing refused."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.board.conftest import sign_in
from tests.board.history import mixed_history

pytestmark = pytest.mark.django_db(transaction=True)

# Reports every refusal to Python (across page loads), before any page script runs.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolation(
    `${location.pathname}: ${event.violatedDirective} refused ${event.blockedURI || "inline"}`
    + ` (${event.sourceFile || "?"}:${event.lineNumber})`
  );
});
"""


@pytest.fixture
def watched(page):
    """The page, with CSP refusals (event and console) collected in ``page.csp_violations``."""
    violations: list[str] = []
    page.expose_function("__cspViolation", lambda text: violations.append(text))
    page.add_init_script(REPORT_VIOLATIONS)
    page.on(
        "console",
        lambda message: (
            violations.append(f"console: {message.text}")
            if "Content Security Policy" in message.text
            else None
        ),
    )
    page.csp_violations = violations
    return page


def visit(page, path: str) -> None:
    response = page.goto(path)
    assert response.status == 200, path
    assert "script-src 'self'" in response.headers["content-security-policy"], path
    page.wait_for_load_state("load")


def settle(page) -> None:
    """Let violation events from the last action reach Python."""
    page.wait_for_timeout(300)


def test_board_and_admin_run_under_the_policy(watched, user, endpoint):
    page = watched
    user.is_staff = user.is_superuser = True
    user.save()
    mixed_history(endpoint, title="rebuild docs")
    sign_in(page, "alice")

    # The queue, then a drawer over htmx, a try in it and an action that swaps it.
    drawer = page.locator("#drawer #drawer-panel")
    page.get_by_role("link", name="rebuild docs", exact=True).click()
    expect(drawer).to_be_visible()
    drawer.locator("ol.strip").get_by_role("link", name="try 1: failed").click()
    expect(drawer.locator(".untrusted-body.prose")).to_contain_text("<script>")
    drawer.get_by_role("button", name="Release their lease").click()
    # Asked first in the Board's own dialog (hx-confirm), under the same policy.
    page.get_by_role("alertdialog").get_by_role("button", name="Release their lease").click()
    expect(drawer.locator(".notice")).to_be_visible()

    for path in ("/activity/", "/endpoints/", f"/endpoints/{endpoint.id}/", "/team/"):
        visit(page, path)
    visit(page, "/todos/new/")
    page.get_by_label("Endpoint").select_option(str(endpoint.pk))  # none is picked for you
    page.get_by_label("Title").fill("written under the policy")
    page.get_by_role("button", name="Create todo").click()
    expect(page.get_by_text("written under the policy").first).to_be_visible()

    # Django admin: the index, every changelist and add page it links to, a change page.
    visit(page, "/admin/")
    links = page.locator("#content-main th a, #content-main a.addlink")
    paths = sorted({link.get_attribute("href") for link in links.all()})
    assert "/admin/auth/user/" in paths
    for path in [*paths, f"/admin/auth/user/{user.id}/change/"]:
        visit(page, path)

    settle(page)
    assert page.csp_violations == []
    assert page.js_errors == []


def test_inline_style_and_script_are_refused_and_reported(watched, user):
    # The check above can fail: what the policy forbids is refused and seen.
    page = watched
    sign_in(page, "alice")
    page.evaluate(
        """() => {
          document.body.insertAdjacentHTML("beforeend", '<p id="styled" style="color: red">x</p>');
          const script = document.createElement("script");
          script.textContent = "window.__ran = true";
          document.body.append(script);
        }"""
    )
    settle(page)

    assert page.evaluate("window.__ran") is None
    assert page.evaluate("getComputedStyle(document.getElementById('styled')).color") != (
        "rgb(255, 0, 0)"
    )
    refused = " ".join(page.csp_violations)
    assert "style-src-attr" in refused and "script-src-elem" in refused
