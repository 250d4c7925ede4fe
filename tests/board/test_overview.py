"""The team overview (board/overview.py): the landing page once a team has an endpoint; each
endpoint's numbers true to the ledger, only the reader's teams, Pause and Resume on the row
for owners (CSRF, back to the overview), a fixed number of statements; and in a browser,
live from the stream, at 390 px as cards."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from playwright.sync_api import expect

from switchboard.queues import endpoints, teams, transitions
from switchboard.queues.models import Membership
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in

pytestmark = pytest.mark.django_db


def _row(page: str, endpoint) -> str:
    start = page.index(f'<tr id="ov-e{endpoint.pk}"')
    return page[start : page.index("</tr>", start)]


def _cell(row: str, label: str) -> str:
    found = re.search(rf'data-label="{label}"><a [^>]*>([^<]*)</a>', row)
    assert found, f"no {label} cell"
    return found.group(1)


def test_each_endpoint_says_what_waits_is_held_retries_and_died(
    signed_in, endpoint, make_endpoint, make_todo
):
    other = make_endpoint("quiet-one")
    agent = Actor.agent(endpoint)
    waiting = [make_todo(f"waiting {n}") for n in range(3)]
    held = make_todo("held")
    transitions.claim(agent, held.id, claimant="harness/run-7")
    failing = make_todo("failing", max_attempts=2)
    transitions.claim(agent, failing.id, claimant="harness/run-8")
    transitions.fail(agent, failing.id)  # a retry wait
    dying = make_todo("dying", max_attempts=1)
    transitions.claim(agent, dying.id)
    transitions.fail(agent, dying.id)  # a dead letter
    done = make_todo("done")
    transitions.claim(agent, done.id)
    transitions.complete(agent, done.id)
    page = signed_in.get("/").content.decode()
    row = _row(page, endpoint)
    assert _cell(row, "Waiting") == str(len(waiting))
    assert _cell(row, "Claimed") == "1" and _cell(row, "Retry wait") == "1"
    assert _cell(row, "Dead") == "1"
    assert "1 completed · 2 failed" in row  # the last hour: every try that ended
    assert "harness/run-7" in row and "harness/run-8" in row  # agents seen
    assert "the oldest waiting for" in row
    quiet = _row(page, other)
    assert _cell(quiet, "Waiting") == "0" and "nothing ended" in quiet
    assert "nothing waiting" in quiet


def test_only_the_readers_teams_and_the_landing_before_any_endpoint(client, user, make_user, vend):
    mallory = make_user("mallory")
    theirs, _ = vend("mallorys-agent", team=mallory.teams.get())
    client.force_login(user)
    page = client.get("/").content.decode()
    assert (
        "mallorys-agent" not in page and "first-run" in page
    )  # alice has no endpoint yet: the walkthrough
    mine, _ = vend("mine")
    page = client.get("/").content.decode()
    assert f'id="ov-e{mine.pk}"' in page and f'id="ov-e{theirs.pk}"' not in page
    # A link from before the queue moved keeps its filters.
    response = client.get("/?state=dead&endpoint=3")
    assert response.status_code == 302 and response["Location"] == "/queue/?state=dead&endpoint=3"


def test_owners_pause_and_resume_from_the_row_and_come_back(
    client, user, make_user, vend, endpoint
):
    platform = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(platform, user, role=Membership.Role.OWNER)
    carol = make_user("carol")
    teams.add_member(platform, carol)
    shared, _ = vend("shared", team=platform)
    client.force_login(user)
    row = _row(client.get("/").content.decode(), shared)
    assert f'action="/endpoints/{shared.pk}/pause/"' in row and "data-paused" not in row
    response = client.post(f"/endpoints/{shared.pk}/pause/", {"next": "/"})
    assert response.status_code == 302 and response["Location"] == "/"
    row = _row(client.get("/").content.decode(), shared)
    assert "data-paused" in row and "paused" in row
    # An address elsewhere is not followed; the endpoint's page instead.
    response = client.post(f"/endpoints/{shared.pk}/resume/", {"next": "https://evil.example/"})
    assert response["Location"] == f"/endpoints/{shared.pk}/"
    # A member sees the row, not the buttons; CSRF is enforced.
    member = Client()
    member.force_login(carol)
    assert "/pause/" not in _row(member.get("/").content.decode(), shared)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(f"/endpoints/{shared.pk}/pause/", {"next": "/"}).status_code == 403


def test_the_overview_reads_a_fixed_number_of_statements(
    signed_in, endpoint, make_endpoint, make_todo, django_assert_num_queries
):
    for n in range(3):
        make_endpoint(f"more-{n}")
    for n in range(5):
        todo = make_todo(f"t{n}")
        transitions.claim(Actor.agent(endpoint), todo.id, claimant=f"run-{n}")
        transitions.complete(Actor.agent(endpoint), todo.id)
    # session, user (with their teams), every endpoint's queue now, every endpoint's last
    # hour (with the agents seen), the teams the reader owns, the ticker
    with django_assert_num_queries(6):
        signed_in.get("/")


@pytest.mark.django_db(transaction=True)
def test_live_in_a_browser_and_cards_at_390_px(page, user, endpoint, make_user, make_todo):
    sign_in(page, "alice", to="/")
    expect(page.locator("[data-live-status]")).to_contain_text("Live")
    row = page.locator(f"#ov-e{endpoint.pk}")
    expect(row.locator('[data-label="Waiting"]')).to_contain_text("0")
    make_todo("arrives while watched")
    expect(row.locator('[data-label="Waiting"]')).to_contain_text("1")
    # Paused by someone else: the row says so, and this owner's button is Resume.
    endpoints.pause(endpoint, user=user)
    expect(row.locator(".chip-paused")).to_be_visible()
    expect(row.get_by_role("button", name="Resume")).to_be_visible()
    expect(row.get_by_role("button", name="Pause")).to_be_hidden()
    row.get_by_role("button", name="Resume").click()
    page.wait_for_url(lambda url: url.endswith("/"))
    expect(page.locator(f"#ov-e{endpoint.pk} .chip-paused")).to_have_count(0)

    # A phone: the queue as cards, each with its title, opened and acted on.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/queue/")
    card = page.locator("table.queue tbody tr").first
    title = card.locator(".title a")
    expect(title).to_have_text("arrives while watched")
    box = title.bounding_box()
    assert box["width"] > 200 and box["x"] + box["width"] <= 390
    # Its state, tries and lease on one line (the holder and the rest are in its drawer).
    for cell in (".col-state", ".col-tries", ".col-lease"):
        assert card.locator(cell).is_visible()
    title.click()
    drawer = page.locator("#drawer-panel")
    expect(drawer.locator("h1")).to_have_text("arrives while watched")
    drawer.get_by_role("button", name="Claim it myself").click()
    expect(drawer.locator(".heldby")).to_contain_text("You hold this todo")
    assert page.js_errors == []
