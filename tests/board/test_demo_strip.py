"""The demo team's strip: its agents are simulated, and the first-run walkthrough is one click
away. Every Board page shows it (base.html, with ``demo_strip`` from the context processor);
drawn here by a page of this module's own, an empty page of the Board's layout."""

from __future__ import annotations

import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.http import HttpResponse
from django.template import engines
from django.test import Client, RequestFactory
from django.urls import include, path
from playwright.sync_api import expect

from switchboard import demo
from switchboard.board.auth import SignInBackend
from switchboard.board.demo_strip import demo_strip
from switchboard.queues import teams
from tests.board.conftest import sign_in

STRIP = "These agents are simulated — connect your own."
PAGE = engines["django"].from_string('{% extends "base.html" %}{% block content %}{% endblock %}')


def strip_page(request):
    return HttpResponse(PAGE.render({}, request))


urlpatterns = [path("strip/", strip_page), path("", include("switchboard.urls"))]
pytestmark = pytest.mark.urls(__name__)


@pytest.fixture
def demo_team(user):
    """The team ``switchboard demo`` makes, with alice as a member."""
    return demo.prepare(team_slug="demo", roles=1, members=(user.username,)).team


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_strip_says_the_demo_agents_are_simulated(user, demo_team):
    page = _signed_in(user).get("/strip/").content.decode()

    assert STRIP in page and "Demo agents" in page
    # One click to the walkthrough: the queue of alice's own team, which has no endpoint.
    assert 'action="/team/switch/"' in page
    assert f'name="team" value="{user.teams.get(personal=True).slug}"' in page
    assert 'name="next" value="/#first-run"' in page


def test_connect_your_own_opens_the_walkthrough_on_your_own_team(user, demo_team):
    client = _signed_in(user)
    own = user.teams.get(personal=True)

    answer = client.post("/team/switch/", {"team": own.slug, "next": "/#first-run"})
    queue = client.get("/").content.decode()

    assert answer.status_code == 302 and answer["Location"] == "/#first-run"
    assert 'id="first-run"' in queue and "Vend an endpoint" in queue
    assert f'name="team" value="{own.slug}"' in queue  # the endpoint is vended there
    assert STRIP not in client.get("/strip/").content.decode()  # the demo is out of view


def test_the_strip_shows_only_where_a_demo_team_is_in_view(user, make_user, demo_team):
    bob = make_user("bob")
    teams.add_member(teams.get_or_create_team("ops"), bob)  # a team, but not the demo's

    assert STRIP not in _signed_in(bob).get("/strip/").content.decode()
    client = _signed_in(user)
    assert STRIP in client.get("/strip/").content.decode()  # "All teams"
    client.post("/team/switch/", {"team": demo_team.slug})
    assert STRIP in client.get("/strip/").content.decode()  # the demo team picked


def test_a_team_is_the_demos_by_the_name_the_demo_gives_it_not_by_its_slug(user):
    teams.add_member(teams.get_or_create_team("demo"), user)  # as `adduser --team demo`

    assert STRIP not in _signed_in(user).get("/strip/").content.decode()


def test_hiding_the_strip_lasts_until_sign_out(user, demo_team):
    client = _signed_in(user)

    answer = client.post("/demo/hide/", {"next": "/strip/?q=x"})

    assert answer.status_code == 302 and answer["Location"] == "/strip/?q=x"
    assert STRIP not in client.get("/strip/").content.decode()
    assert STRIP in _signed_in(user).get("/strip/").content.decode()  # a new session


@pytest.mark.parametrize("target", ["https://elsewhere.example/", "//elsewhere.example/", ""])
def test_hiding_goes_back_to_this_site_only(user, demo_team, target):
    answer = _signed_in(user).post("/demo/hide/", {"next": target})

    assert answer.status_code == 302 and answer["Location"] == "/"


def test_hiding_is_a_post(user, demo_team):
    client = _signed_in(user)

    assert client.get("/demo/hide/").status_code == 405
    assert STRIP in client.get("/strip/").content.decode()


def test_deciding_runs_no_query(user, demo_team, django_assert_num_queries):
    request = RequestFactory().get("/")
    request.user = SignInBackend().get_user(user.pk)  # with its teams, as every request
    request.session = SessionStore()

    with django_assert_num_queries(0):
        context = demo_strip(request)

    assert context == {"team": demo_team, "own_team": user.teams.get(personal=True)}


@pytest.mark.django_db(transaction=True)
def test_in_a_browser_one_click_reaches_the_walkthrough(page, user, demo_team):
    sign_in(page, user.username)
    page.goto("/strip/")
    strip = page.locator("#demo-strip")
    expect(strip).to_contain_text(STRIP)

    strip.get_by_role("button", name="Connect your own agent").click()

    expect(page.locator("#first-run")).to_contain_text("Vend an endpoint")
    assert page.url.endswith("/#first-run") and page.js_errors == []
