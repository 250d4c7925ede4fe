"""Work first on a phone: at 390 × 844 the queue's first screen shows at least five whole
todos, with the demo team's strip shown (the top bar, the strip, the heading, the filters,
the tabs and the bars must leave the screen to the work)."""

from __future__ import annotations

import pytest

from switchboard.board.demo_strip import DEMO_TEAM_NAME
from switchboard.queues import endpoints, teams, transitions
from switchboard.queues.models import Membership, TodoState
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

FIRST_SCREEN = {"width": 390, "height": 844}


@pytest.fixture
def demo_work(user):
    """The demo team's queue, as `make run` shows it: agents claiming with long labels."""
    demo = teams.get_or_create_team("demo", name=DEMO_TEAM_NAME)
    teams.add_member(demo, user, role=Membership.Role.OWNER)
    endpoint = endpoints.vend(demo, "ci-fixer")[0]
    agent = Actor.agent(endpoint)
    titles = [
        "Fix the flaky integration test of the checkout's retry budget",
        "Bump the lockfile",
        "Triage the nightly OOM in the importer after yesterday's deploy",
    ]
    for n in range(12):
        todo = transitions.create_todo(agent, title=f"{titles[n % 3]} ({n})")[0]
        if n % 3 == 0:
            transitions.claim(agent, todo.id, claimant=f"harness/buildbox/ci-fixer/run-{n}")
    return demo


def _whole_rows_on_first_screen(page) -> int:
    return page.evaluate(
        """(height) => Array.from(document.querySelectorAll("table.queue tbody tr[data-todo]"))
             .filter((row) => { const box = row.getBoundingClientRect();
                                return box.height > 0 && box.bottom <= height; }).length""",
        FIRST_SCREEN["height"],
    )


def test_a_phones_first_screen_shows_five_todos_with_the_demo_strip(
    browser, live_server, user, demo_work
):
    context = browser.new_context(base_url=live_server.url, viewport=FIRST_SCREEN)
    page = context.new_page()
    try:
        sign_in(page, "alice", to="/queue/")
        assert page.locator("#demo-strip").is_visible()
        assert _whole_rows_on_first_screen(page) >= 5
        # Nothing is out of reach: the filters open from their button, every tab is there.
        assert page.locator(".statetabs a").count() == 1 + len(TodoState)  # All, then each state
    finally:
        context.close()
