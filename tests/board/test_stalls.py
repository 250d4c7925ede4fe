"""A stalled endpoint (claimable work has waited past its threshold and no agent of it was
seen: queues/endpoint_health.py ``stall``) is said in words and colour on the overview, on
its page, in the nav and in the tab's title, live; /metrics has each endpoint's oldest
claimable wait."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect
from prometheus_client.parser import text_string_to_metric_families

from switchboard.board import overview
from switchboard.queues import endpoints, transitions
from switchboard.queues.endpoint_health import team_last_hour, team_now
from switchboard.queues.selectors import TAB_COUNT_CAP
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in
from tests.queues.helpers import backdate


def _waiting(endpoint, n: int = 3, *, minutes: int = 20) -> list[int]:
    """``n`` todos on the endpoint, claimable for ``minutes``."""
    ids = [
        transitions.create_todo(Actor.agent(endpoint), title=f"export part {i}")[0].id
        for i in range(n)
    ]
    backdate(
        "UPDATE todos SET created_at = statement_timestamp() - make_interval(mins => %s)"
        " WHERE id = ANY(%s)",
        [minutes, ids],
        rows=n,
    )
    return ids


@pytest.fixture
def three(make_endpoint):
    """A stalled endpoint, one whose agent is working (work as old, but seen just now), and
    a paused one (held back on purpose: not stalled)."""
    stalled, busy, paused = (make_endpoint(n) for n in ("nightly", "busy", "held"))
    _waiting(stalled)
    first, *_ = _waiting(busy)
    transitions.claim(Actor.agent(busy), first)
    _waiting(paused)
    endpoints.pause(paused)
    return stalled, busy, paused


@pytest.mark.django_db
def test_the_overview_says_which_endpoint_is_stalled_in_words_and_colour(signed_in, three):
    stalled, busy, paused = three
    page = signed_in.get("/").content.decode()
    row = _row(page, stalled.pk)
    assert 'class="is-stalled"' in row and 'data-stalled="nightly"' in row
    assert (
        "stalled</span>" in row and "work has waited 20m and no agent seen in the last hour" in row
    )
    for other in (busy, paused):
        assert "is-stalled" not in _row(page, other.pk)
        assert "stalled</span>" not in _row(page, other.pk)
    # The team's banner names it, the nav counts it, and so does the tab's title.
    assert 'class="banner stalled"' in page and ">nightly</a>: work has waited 20m" in page
    assert "<title>(1 stalled) Overview · Switchboard</title>" in page
    assert '<span aria-hidden="true">⚠</span> 1 stalled</span>' in page


@pytest.mark.django_db
def test_an_agent_seen_within_the_threshold_or_a_longer_threshold_is_not_a_stall(
    signed_in, three, settings
):
    stalled, _, _ = three
    settings.SWITCHBOARD_STALL_SECONDS_BY_ENDPOINT = {"nightly": 1800}  # 30 minutes
    assert "is-stalled" not in _row(signed_in.get("/").content.decode(), stalled.pk)
    settings.SWITCHBOARD_STALL_SECONDS_BY_ENDPOINT = {}
    # Its agent completes a try: seen now, so no longer stalled (its other work still waits).
    todo = transitions.claim_next(Actor.agent(stalled))
    transitions.complete(Actor.agent(stalled), todo.todo.id)
    page = signed_in.get("/").content.decode()
    assert "is-stalled" not in _row(page, stalled.pk)
    assert "stalled)" not in page.split("</title>")[0]


@pytest.mark.django_db
def test_the_endpoint_page_says_it_is_stalled(signed_in, three):
    stalled, busy, _ = three
    page = signed_in.get(f"/endpoints/{stalled.pk}/").content.decode()
    assert 'class="banner stalled"' in page
    assert "Work has waited 20m and no agent seen in the last hour (stalled after 5 min)" in page
    assert 'class="banner stalled"' not in signed_in.get(f"/endpoints/{busy.pk}/").content.decode()


@pytest.mark.django_db
def test_the_live_streams_overview_rows_carry_the_stall(user, three):
    """board/live.py draws the overview's rows with ``overview.rows_html`` from the same two
    reads, for every viewer of the team: the stall is in what it sends."""
    stalled, busy, _ = three
    team = user.teams.get()
    drawn = overview.rows_html(team_now(team.pk, cap=TAB_COUNT_CAP), team_last_hour(team.pk))
    assert 'data-stalled="nightly"' in drawn[f"ov-e{stalled.pk}"]
    assert "data-stalled" not in drawn[f"ov-e{busy.pk}"]
    assert ">nightly</a>: work has waited" in drawn[f"ov-t{team.pk}"]


@pytest.mark.django_db
def test_stalls_answers_the_stalled_endpoints_of_the_readers_teams_only(
    signed_in, three, make_user
):
    stalled, _, _ = three
    answer = signed_in.get("/stalls/")
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    [only] = answer.json()["stalled"]
    assert only["endpoint"] == stalled.pk and only["agent_id"] == "nightly"
    assert only["words"].startswith("work has waited 20m")
    stranger = make_user("mallory")
    signed_in.force_login(stranger)
    assert signed_in.get("/stalls/").json() == {"stalled": [], "people": 0}


@pytest.mark.django_db(transaction=True)
def test_metrics_has_each_endpoints_oldest_claimable_wait(live_server, settings, three):
    stalled, busy, paused = three
    settings.SWITCHBOARD_METRICS_TOKEN = "metrics-token-for-stall-tests"
    gone = endpoints.vend(stalled.team, "gone")[0]
    transitions.revoke_endpoint(None, gone)
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        response = client.get(
            "/metrics", headers={"Authorization": "Bearer metrics-token-for-stall-tests"}
        )
    assert response.status_code == 200
    [family] = [
        f
        for f in text_string_to_metric_families(response.text)
        if f.name == "switchboard_oldest_claimable_seconds"
    ]
    waits = {s.labels["endpoint"]: s.value for s in family.samples}
    assert set(waits) == {"nightly", "busy", "held"}  # not the revoked one
    assert 20 * 60 <= waits["nightly"] < 21 * 60
    assert 20 * 60 <= waits["held"] < 21 * 60  # paused: its work waits all the same
    assert {s.labels["team"] for s in family.samples} == {stalled.team.slug}


@pytest.mark.django_db(transaction=True)
def test_the_nav_shows_the_stall_on_every_page(page, user, three):
    sign_in(page, "alice", to="/queue/")
    badge = page.locator("[data-nav-stalls]")
    expect(badge).to_have_text("⚠ 1 stalled")
    expect(page).to_have_title("(1 stalled) Queue · Switchboard")
    assert "nightly: work has waited" in badge.get_attribute("title")
    assert page.js_errors == []


def _row(page: str, endpoint_id: int) -> str:
    start = page.index(f'id="ov-e{endpoint_id}"')
    return page[page.rindex("<tr", 0, start) : page.index("</tr>", start)]
