"""A paused endpoint's page says "paused" once, in its banner, with one Resume (owners) or a
line saying who may resume it (members); the act of pausing adds no flash repeating it."""

from __future__ import annotations

import re

from django.test import Client
from django.urls import reverse

from switchboard.queues import endpoints, teams
from switchboard.queues.models import Membership


def _said(page: str) -> str:
    """The words of the page's main region, tags dropped."""
    main = re.search(r"<main\b.*?</main>", page, flags=re.S)[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", main))


def test_a_paused_endpoint_says_paused_once_with_one_resume(logged_in, user, endpoint):
    response = logged_in.post(reverse("endpoint-pause", args=[endpoint.pk]), follow=True)
    page = response.content.decode()
    assert len(re.findall(r"\bpaused\b", _said(page), flags=re.I)) == 1
    assert page.count('class="chip chip-paused"') == 1 and 'class="banner paused"' in page
    assert page.count(">Resume</button>") == 1
    assert "Pause claims" not in page and 'id="pause-title"' not in page
    assert 'class="flash"' not in page  # the banner is the one word on it
    assert "by alice" in _said(page)


def test_a_member_sees_it_paused_once_and_who_may_resume(user, make_user, vend):
    platform = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(platform, user, role=Membership.Role.OWNER)
    carol = make_user("carol")
    teams.add_member(platform, carol)
    endpoint, _ = vend("shared-agent", team=platform)
    endpoints.pause(endpoint, user=user)
    client = Client()
    client.force_login(carol)
    page = client.get(reverse("endpoint-detail", args=[endpoint.pk])).content.decode()
    said = _said(page)
    assert len(re.findall(r"\bpaused\b", said, flags=re.I)) == 1
    assert "Resume</button>" not in page and "Only an owner of Platform may resume it." in said


def test_resuming_leaves_the_pause_card_and_a_flash(logged_in, user, endpoint):
    endpoints.pause(endpoint, user=user)
    response = logged_in.post(reverse("endpoint-resume", args=[endpoint.pk]), follow=True)
    page = response.content.decode()
    assert "agent-a resumed" in page and 'class="banner paused"' not in page
    assert "Pause claims" in page and 'class="chip chip-active"' in page
