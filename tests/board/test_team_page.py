"""The team page (members; owners add and remove them) and the team switcher."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from board.scope import SESSION_KEY
from queues import teams
from queues.models import Membership, TodoEvent

OWNER, MEMBER = Membership.Role.OWNER, Membership.Role.MEMBER


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def platform(user, team):
    """A team alice owns (her personal ``team`` resolved first: that fixture wants one)."""
    platform = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(platform, user, role=OWNER)
    return platform


@pytest.fixture
def carol(make_user, platform):
    carol = make_user("carol")
    teams.add_member(platform, carol)
    return carol


def _messages(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def _url(team) -> str:
    return f"{reverse('team-detail')}?team={team.slug}"


def _roles(team) -> dict[str, str]:
    return dict(
        Membership.objects.filter(team=team).values_list("user__username", "role").order_by()
    )


# --- The page


def test_team_page_shows_the_home_team_with_members_roles_and_dates(logged_in, team):
    response = logged_in.get(reverse("team-detail"))
    assert response.status_code == 200 and response.context["team"] == team
    body = response.content.decode()
    assert "alice" in body and "owner" in body
    assert Membership.objects.get(team=team).created_at.strftime("%Y-%m-%d") in body
    assert "Dead-letter sinks: coming with the operators work." in body


def test_team_page_lists_owners_first(logged_in, platform, carol):
    response = logged_in.get(_url(platform))
    names = [m.user.username for m in response.context["memberships"]]
    assert names == ["alice", "carol"]
    assert response.context["is_owner"] is True


def test_foreign_and_unknown_team_slugs_are_the_same_404(logged_in, make_user):
    make_user("bob")  # bob's personal team has the slug "bob"
    foreign = logged_in.get(f"{reverse('team-detail')}?team=bob")
    unknown = logged_in.get(f"{reverse('team-detail')}?team=no-such-team")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.content == unknown.content


def test_a_post_to_a_foreign_team_is_404_and_changes_nothing(logged_in, make_user):
    bob = make_user("bob")
    response = logged_in.post(
        f"{reverse('team-detail')}?team=bob", {"op": "add", "username": "alice"}
    )
    assert response.status_code == 404
    assert _roles(bob.teams.get()) == {"bob": OWNER}


# --- Adding and removing


def test_owner_adds_a_member_by_username_audited(logged_in, user, platform, make_user):
    dave = make_user("dave")
    response = logged_in.post(_url(platform), {"op": "add", "username": "dave", "role": MEMBER})
    assert response.status_code == 302 and response["Location"] == _url(platform)
    assert _roles(platform)["dave"] == MEMBER
    event = TodoEvent.objects.filter(team=platform, kind="member_add").latest("id")
    assert event.actor_user == user and event.detail == {"user_id": dave.pk, "role": MEMBER}


def test_owner_promotes_a_member_to_owner(logged_in, platform, carol):
    logged_in.post(_url(platform), {"op": "add", "username": "carol", "role": OWNER})
    assert _roles(platform)["carol"] == OWNER


def test_adding_an_existing_member_again_changes_nothing(logged_in, platform, carol):
    before = TodoEvent.objects.count()
    response = logged_in.post(_url(platform), {"op": "add", "username": "carol", "role": MEMBER})
    assert any("already a member" in m for m in _messages(response))
    assert TodoEvent.objects.count() == before


def test_unknown_username_is_a_form_error(logged_in, platform):
    before = (Membership.objects.count(), TodoEvent.objects.count())
    response = logged_in.post(_url(platform), {"op": "add", "username": "nobody", "role": MEMBER})
    assert response.status_code == 400
    assert "no user named" in str(response.context["form"].errors["username"])
    assert (Membership.objects.count(), TodoEvent.objects.count()) == before


def test_owner_removes_a_member_audited(logged_in, user, platform, carol):
    response = logged_in.post(_url(platform), {"op": "remove", "user": carol.pk})
    assert response.status_code == 302
    assert "carol" not in _roles(platform)
    event = TodoEvent.objects.get(team=platform, kind="member_remove")
    assert event.actor_user == user and event.detail == {"user_id": carol.pk}


def test_removing_someone_outside_the_team_is_a_message(logged_in, platform, make_user):
    outsider = make_user("erin")
    response = logged_in.post(_url(platform), {"op": "remove", "user": outsider.pk})
    assert any("not a member" in m for m in _messages(response))
    assert not TodoEvent.objects.filter(kind="member_remove").exists()


def test_the_last_owner_cannot_be_removed(logged_in, user, platform, carol):
    response = logged_in.post(_url(platform), {"op": "remove", "user": user.pk})
    assert response.status_code == 302
    assert any("keeps at least one owner" in m for m in _messages(response))
    assert _roles(platform) == {"alice": OWNER, "carol": MEMBER}
    assert not TodoEvent.objects.filter(kind="member_remove").exists()


def test_an_owner_may_leave_when_another_owner_remains(logged_in, user, platform, carol):
    teams.add_member(platform, carol, role=OWNER)
    response = logged_in.post(_url(platform), {"op": "remove", "user": user.pk})
    assert response.status_code == 302 and response["Location"] == reverse("board-home")
    assert _roles(platform) == {"carol": OWNER}


def test_a_plain_member_is_refused(client, user, platform, carol, make_user):
    make_user("dave")
    client.force_login(carol)
    page = client.get(_url(platform))
    assert page.context["is_owner"] is False
    assert "Only the owners of Platform add and remove members." in page.content.decode()
    before = TodoEvent.objects.count()
    for data in [
        {"op": "add", "username": "dave", "role": OWNER},
        {"op": "remove", "user": user.pk},
    ]:
        response = client.post(_url(platform), data)
        assert response.status_code == 403
        assert "Only an owner of Platform may change its members." in response.content.decode()
    assert _roles(platform) == {"alice": OWNER, "carol": MEMBER}
    assert TodoEvent.objects.count() == before


# --- The team switcher


def test_switch_stores_the_slug_and_empty_means_all_teams(logged_in, platform):
    response = logged_in.post(reverse("team-switch"), {"team": "platform", "next": "/endpoints/"})
    assert response.status_code == 302 and response["Location"] == "/endpoints/"
    assert logged_in.session[SESSION_KEY] == "platform"
    logged_in.post(reverse("team-switch"), {"team": ""})
    assert SESSION_KEY not in logged_in.session


@pytest.mark.parametrize("slug", ["bob", "no-such-team"])
def test_switch_to_a_foreign_or_unknown_slug_shows_all_teams(logged_in, platform, make_user, slug):
    make_user("bob")
    logged_in.post(reverse("team-switch"), {"team": "platform"})
    response = logged_in.post(reverse("team-switch"), {"team": slug})
    assert response.status_code == 302 and response["Location"] == reverse("board-home")
    assert SESSION_KEY not in logged_in.session
    assert _messages(response) == ["That is not one of your teams; showing all teams."]


@pytest.mark.parametrize(
    "target",
    ["https://evil.example/", "//evil.example/", "http://evil.example/x", "javascript:alert(1)"],
)
def test_switch_refuses_an_off_site_next(logged_in, platform, target):
    response = logged_in.post(reverse("team-switch"), {"team": "platform", "next": target})
    assert response.status_code == 302 and response["Location"] == reverse("board-home")
    assert logged_in.session[SESSION_KEY] == "platform"


def test_switch_is_post_only(logged_in, platform):
    assert logged_in.get(reverse("team-switch") + "?team=platform").status_code == 405
    assert SESSION_KEY not in logged_in.session


# --- CSRF


def test_every_post_without_a_csrf_token_is_refused(user, platform, carol, make_user):
    make_user("dave")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    before = TodoEvent.objects.count()
    for url, data in [
        (_url(platform), {"op": "add", "username": "dave", "role": MEMBER}),
        (_url(platform), {"op": "remove", "user": carol.pk}),
        (reverse("team-switch"), {"team": "platform"}),
    ]:
        assert strict.post(url, data).status_code == 403, data
    assert _roles(platform) == {"alice": OWNER, "carol": MEMBER}
    assert TodoEvent.objects.count() == before
    assert SESSION_KEY not in strict.session
