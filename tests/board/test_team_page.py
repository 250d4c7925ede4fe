"""The team page (members and dead-letter sinks; owners change them) and the team switcher."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from switchboard.board.scope import SESSION_KEY
from switchboard.queues import teams
from switchboard.queues.models import (
    DeadLetterSink,
    Delivery,
    Membership,
    TeamInvitation,
    TodoEvent,
)
from tests.board.pages import assert_shown_once, messages, signed_in

OWNER, MEMBER = Membership.Role.OWNER, Membership.Role.MEMBER


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


def _url(team) -> str:
    return f"{reverse('team-detail')}?team={team.slug}"


def _as(make_user, name: str) -> Client:
    return signed_in(make_user(name))


def _pending(team) -> dict[str, str]:
    return dict(TeamInvitation.objects.pending().filter(team=team).values_list("username", "role"))


def _kinds(team) -> list[str]:
    return list(TodoEvent.objects.filter(team=team).order_by("id").values_list("kind", flat=True))


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
    assert "No sinks: dead letters of this team are kept on the Board only." in body


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
        f"{reverse('team-detail')}?team=bob", {"op": "invite", "username": "alice"}
    )
    assert response.status_code == 404
    assert _roles(bob.teams.get()) == {"bob": OWNER}
    assert not TeamInvitation.objects.exists()


# --- Inviting (owners invite a name; its user joins by accepting)


def test_owner_invites_a_name_and_nobody_joins_until_it_is_accepted(
    logged_in, user, platform, make_user
):
    make_user("dave")
    response = logged_in.post(_url(platform), {"op": "invite", "username": "dave", "role": MEMBER})
    assert response.status_code == 302 and response["Location"] == _url(platform)
    assert messages(response) == [
        "Invited dave as member. If dave has an account, they will see the invitation on "
        "their Team page."
    ]
    assert "dave" not in _roles(platform)
    invitation = TeamInvitation.objects.get(team=platform)
    assert (invitation.username, invitation.role, invitation.invited_by) == ("dave", MEMBER, user)
    assert invitation.accepted_at is None and invitation.declined_at is None
    event = TodoEvent.objects.get(team=platform, kind="member_invite")
    assert event.actor_user == user
    assert event.detail == {"invitation_id": invitation.pk, "username": "dave", "role": MEMBER}
    page = logged_in.get(_url(platform)).content.decode()
    assert "Waiting for an answer" in page and "Withdraw the invitation of dave" in page


def _comparable(body: str, name: str) -> str:
    body = body.replace(name, "NAME")
    body = re.sub(r'(csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"', r"\1TOKEN", body)
    body = re.sub(r"<time [^>]*>[^<]*</time>", "<time>WHEN</time>", body)  # made a moment apart
    return re.sub(r'name="invitation" value="\d+"', 'name="invitation" value="ID"', body)


def test_an_unknown_name_and_an_existing_one_get_the_same_answer(logged_in, platform, make_user):
    make_user("dave")
    answers = []
    for name in ("dave", "zelda"):  # zelda has no account
        with CaptureQueriesContext(connection) as queries:
            response = logged_in.post(
                _url(platform), {"op": "invite", "username": name, "role": MEMBER}
            )
        said = [m.replace(name, "NAME") for m in messages(response)]
        page = logged_in.get(_url(platform)).content.decode()
        answers.append(
            (
                response.status_code,
                response["Location"],
                response.content,
                len(queries),
                said,
                _comparable(page, name),
            )
        )
        teams.revoke_invitation(platform, TeamInvitation.objects.get(username=name).pk, by=None)
    assert answers[0] == answers[1]
    assert answers[0][4] == [
        "Invited NAME as member. If NAME has an account, they will see the invitation on "
        "their Team page."
    ]


def test_the_invitee_sees_it_on_the_team_and_queue_pages_and_accepts(
    logged_in, user, platform, make_user
):
    dave = make_user("dave")
    teams.invite(platform, "dave", role=MEMBER, by=user)
    invitation = TeamInvitation.objects.get()
    client = signed_in(dave)
    for path in (reverse("team-detail"), "/"):
        page = client.get(path).content.decode()
        assert "<strong>Platform</strong> invites you to join as member" in page, path
        assert f'name="invitation" value="{invitation.pk}"' in page, path

    response = client.post(
        reverse("team-detail"), {"op": "invite_accept", "invitation": invitation.pk, "next": "/"}
    )
    assert response.status_code == 302 and response["Location"] == "/"
    assert messages(response) == ["You joined Platform as member."]
    assert _roles(platform) == {"alice": OWNER, "dave": MEMBER}
    invitation.refresh_from_db()
    assert invitation.accepted_at is not None and invitation.answered_by == dave
    assert _kinds(platform)[-3:] == ["member_invite", "invite_accept", "member_add"]
    accept, add = TodoEvent.objects.filter(team=platform).order_by("-id")[:2][::-1]
    assert accept.actor_user == dave and accept.detail["user_id"] == dave.pk
    # The membership is credited to the owner who invited; the answer to the invitee.
    assert add.actor_user == user and add.detail == {"user_id": dave.pk, "role": MEMBER}
    assert "invites you" not in client.get("/").content.decode()  # the banner is gone
    assert not logged_in.get(_url(platform)).context["invitations"]

    activity = logged_in.get(reverse("activity-list")).content.decode()
    assert "alice invited dave to the team as member" in activity
    assert "dave accepted an invitation and joined the team as member" in activity


def test_accepting_an_invitation_as_owner_makes_an_owner(user, platform, make_user):
    dave = make_user("dave")
    invitation = teams.invite(platform, "dave", role=OWNER, by=user)
    client = signed_in(dave)
    response = client.post(
        reverse("team-detail"), {"op": "invite_accept", "invitation": invitation.pk}
    )
    assert response.status_code == 302 and response["Location"] == _url(platform)
    assert _roles(platform)["dave"] == OWNER


def test_the_invitee_declines(logged_in, user, platform, make_user):
    dave = make_user("dave")
    invitation = teams.invite(platform, "dave", role=MEMBER, by=user)
    client = signed_in(dave)
    response = client.post(
        reverse("team-detail"), {"op": "invite_decline", "invitation": invitation.pk}
    )
    assert response.status_code == 302 and response["Location"] == reverse("team-detail")
    assert messages(response) == ["You declined the invitation to Platform."]
    assert "dave" not in _roles(platform)
    invitation.refresh_from_db()
    assert invitation.declined_at is not None and invitation.answered_by == dave
    event = TodoEvent.objects.filter(team=platform).latest("id")
    assert (event.kind, event.actor_user) == ("invite_decline", dave)
    assert "invites you" not in client.get(reverse("team-detail")).content.decode()
    assert not logged_in.get(_url(platform)).context["invitations"]
    # Answered: it cannot be accepted afterwards.
    again = client.post(
        reverse("team-detail"), {"op": "invite_accept", "invitation": invitation.pk}
    )
    assert again.status_code == 404 and "dave" not in _roles(platform)


def test_an_invitation_matches_its_name_in_any_letter_case(user, platform, make_user):
    dave = make_user("dave")
    invitation = teams.invite(platform, "DaVe", role=MEMBER, by=user)
    client = signed_in(dave)
    assert "invites you" in client.get("/").content.decode()
    client.post(reverse("team-detail"), {"op": "invite_accept", "invitation": invitation.pk})
    assert _roles(platform)["dave"] == MEMBER


def test_someone_elses_invitation_is_the_same_404_as_an_unknown_one(user, platform, make_user):
    make_user("dave")
    invitation = teams.invite(platform, "dave", role=MEMBER, by=user)
    erin = _as(make_user, "erin")
    before = (_kinds(platform), _pending(platform))
    for op in ("invite_accept", "invite_decline"):
        answers = [
            erin.post(reverse("team-detail"), {"op": op, "invitation": value})
            for value in (invitation.pk, invitation.pk + 1000, "1 OR 1=1", "9" * 30, "")
        ]
        assert {a.status_code for a in answers} == {404}, op
        assert len({a.content for a in answers}) == 1, op
    assert (_kinds(platform), _pending(platform)) == before
    assert "erin" not in _roles(platform)


def test_inviting_a_name_again_keeps_one_invitation_with_the_new_role(logged_in, platform):
    for role in (MEMBER, OWNER, OWNER):
        logged_in.post(_url(platform), {"op": "invite", "username": "dave", "role": role})
    assert _pending(platform) == {"dave": OWNER}
    assert _kinds(platform).count("member_invite") == 2  # the third changed nothing


def test_owner_promotes_a_member_to_owner(logged_in, platform, carol):
    # carol is on the page already: inviting her as owner promotes her at once.
    response = logged_in.post(_url(platform), {"op": "invite", "username": "carol", "role": OWNER})
    assert messages(response) == ["carol is now an owner of Platform."]
    assert _roles(platform)["carol"] == OWNER
    assert not TeamInvitation.objects.exists()


def test_inviting_an_existing_member_again_changes_nothing(logged_in, platform, carol):
    before = TodoEvent.objects.count()
    response = logged_in.post(_url(platform), {"op": "invite", "username": "Carol", "role": MEMBER})
    assert any("already a member" in m for m in messages(response))
    assert TodoEvent.objects.count() == before and not TeamInvitation.objects.exists()


def test_a_name_no_account_could_have_is_a_form_error(logged_in, platform):
    before = (Membership.objects.count(), TodoEvent.objects.count())
    for name in ("no spaces allowed", "", "x" * 151):
        response = logged_in.post(
            _url(platform), {"op": "invite", "username": name, "role": MEMBER}
        )
        assert response.status_code == 400, name
        assert response.context["form"].errors["username"], name
    assert (Membership.objects.count(), TodoEvent.objects.count()) == before
    assert not TeamInvitation.objects.exists()


def test_owner_withdraws_an_invitation_audited(logged_in, user, platform, make_user):
    dave = make_user("dave")
    invitation = teams.invite(platform, "dave", role=MEMBER, by=user)
    response = logged_in.post(_url(platform), {"op": "invite_revoke", "invitation": invitation.pk})
    assert response.status_code == 302 and response["Location"] == _url(platform)
    assert messages(response) == ["Withdrew the invitation of dave."]
    assert not TeamInvitation.objects.exists()
    event = TodoEvent.objects.filter(team=platform).latest("id")
    assert (event.kind, event.actor_user) == ("invite_revoke", user)
    assert event.detail == {"invitation_id": invitation.pk, "username": "dave", "role": MEMBER}
    client = signed_in(dave)
    assert "invites you" not in client.get("/").content.decode()
    answer = client.post(
        reverse("team-detail"), {"op": "invite_accept", "invitation": invitation.pk}
    )
    assert answer.status_code == 404 and "dave" not in _roles(platform)


def test_another_teams_invitation_cannot_be_withdrawn(logged_in, platform, make_user):
    bob = make_user("bob")
    bobs = teams.invite(bob.teams.get(), "dave", role=MEMBER, by=bob)
    foreign = logged_in.post(_url(platform), {"op": "invite_revoke", "invitation": bobs.pk})
    unknown = logged_in.post(_url(platform), {"op": "invite_revoke", "invitation": bobs.pk + 9})
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.content == unknown.content
    assert TeamInvitation.objects.pending().filter(pk=bobs.pk).exists()


def test_activity_tells_each_invitation_event(logged_in, user, platform, make_user):
    dave, erin = make_user("dave"), make_user("erin")
    declined = teams.invite(platform, "dave", role=MEMBER, by=user)
    teams.decline_invitation(dave, declined.pk)
    withdrawn = teams.invite(platform, "erin", role=OWNER, by=user)
    teams.revoke_invitation(platform, withdrawn.pk, by=user)
    accepted = teams.invite(platform, "erin", role=MEMBER, by=user)
    teams.accept_invitation(erin, accepted.pk)
    page = logged_in.get(reverse("activity-list")).content.decode()
    for sentence in [
        "alice invited dave to the team as member",
        "dave declined an invitation to the team",
        "alice invited erin to the team as owner",
        "alice withdrew the invitation of erin",
        "erin accepted an invitation and joined the team as member",
        "alice added a member (member) to the team",
    ]:
        assert sentence in page, sentence


def test_invitations_for_you_cost_no_query(user, platform, make_user, django_assert_num_queries):
    dave = _as(make_user, "dave")
    # session, user (with the invitations waiting for them and their teams), endpoints
    # (filter), the state counts, ticker: attempt endings, ticker: events; no page of todos:
    # dave's team has no endpoints, so there are none to read
    with django_assert_num_queries(6):
        dave.get("/")
    teams.invite(platform, "dave", role=MEMBER, by=user)
    with django_assert_num_queries(6):
        page = dave.get("/").content.decode()
    assert "<strong>Platform</strong> invites you" in page


def test_owner_removes_a_member_audited(logged_in, user, platform, carol):
    response = logged_in.post(_url(platform), {"op": "remove", "user": carol.pk})
    assert response.status_code == 302
    assert "carol" not in _roles(platform)
    event = TodoEvent.objects.get(team=platform, kind="member_remove")
    assert event.actor_user == user and event.detail == {"user_id": carol.pk}


def test_removing_someone_outside_the_team_is_a_message(logged_in, platform, make_user):
    outsider = make_user("erin")
    response = logged_in.post(_url(platform), {"op": "remove", "user": outsider.pk})
    assert any("not a member" in m for m in messages(response))
    assert not TodoEvent.objects.filter(kind="member_remove").exists()


def test_the_last_owner_cannot_be_removed(logged_in, user, platform, carol):
    response = logged_in.post(_url(platform), {"op": "remove", "user": user.pk})
    assert response.status_code == 302
    assert any("keeps at least one owner" in m for m in messages(response))
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
    assert "Only the owners of Platform invite and remove members." in page.content.decode()
    invitation = teams.invite(platform, "erin", role=MEMBER, by=user)
    before = TodoEvent.objects.count()
    for data in [
        {"op": "invite", "username": "dave", "role": OWNER},
        {"op": "invite_revoke", "invitation": invitation.pk},
        {"op": "remove", "user": user.pk},
    ]:
        response = client.post(_url(platform), data)
        assert response.status_code == 403
        assert "Only an owner of Platform may change its members." in response.content.decode()
    assert _roles(platform) == {"alice": OWNER, "carol": MEMBER}
    assert TodoEvent.objects.count() == before
    assert _pending(platform) == {"erin": MEMBER}


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
    assert messages(response) == ["That is not one of your teams; showing all teams."]


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
    dave = make_user("dave")
    for_dave = teams.invite(platform, "dave", role=MEMBER, by=user)
    for_erin = teams.invite(platform, "erin", role=MEMBER, by=user)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    strict_dave = Client(enforce_csrf_checks=True)
    strict_dave.force_login(dave)
    before = TodoEvent.objects.count()
    for client, url, data in [
        (strict, _url(platform), {"op": "invite", "username": "frank", "role": MEMBER}),
        (strict, _url(platform), {"op": "invite_revoke", "invitation": for_erin.pk}),
        (strict, _url(platform), {"op": "remove", "user": carol.pk}),
        (strict, reverse("team-switch"), {"team": "platform"}),
        (strict_dave, reverse("team-detail"), {"op": "invite_accept", "invitation": for_dave.pk}),
        (strict_dave, reverse("team-detail"), {"op": "invite_decline", "invitation": for_dave.pk}),
    ]:
        assert client.post(url, data).status_code == 403, data
    assert _roles(platform) == {"alice": OWNER, "carol": MEMBER}
    assert _pending(platform) == {"dave": MEMBER, "erin": MEMBER}
    assert TodoEvent.objects.count() == before
    assert SESSION_KEY not in strict.session


# --- Dead-letter sinks

SINK_URL = "https://hooks.example/dead?key=rcv-s3cret"  # the key is the receiver's own


def _sink_ops(sink) -> list[dict]:
    return [
        {"op": op, "sink": sink.pk} for op in ("sink_deactivate", "sink_activate", "sink_delete")
    ]


def test_owner_adds_a_sink_and_sees_its_secret_once(logged_in, user, platform):
    response = logged_in.post(_url(platform), {"op": "sink_add", "url": SINK_URL})

    assert response.status_code == 200
    assert [t.name for t in response.templates][0] == "board/webhook_secret.html"
    sink = DeadLetterSink.objects.get(team=platform)
    assert sink.url == SINK_URL and sink.active and sink.created_by == user
    secret = response.context["secret"]
    assert secret == sink.secret and len(secret) >= 40
    # Nowhere else: not in the session, a message, a cookie, the event log or the page later.
    assert_shown_once(response, logged_in, secret, "webhook-secret")
    event = TodoEvent.objects.get(team=platform, kind="sink_add")
    assert event.actor_user == user
    assert event.detail == {"sink_id": sink.pk, "host": "hooks.example"}  # not the URL's key
    page = logged_in.get(_url(platform)).content.decode()
    assert SINK_URL.replace("&", "&amp;") in page and secret not in page


def test_a_sink_to_an_internal_address_is_refused_unless_allowed(logged_in, platform, settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False
    for url, words in [
        ("http://127.0.0.1:8000/dead", "127.0.0.1 is a loopback address"),
        ("http://169.254.169.254/latest", "link-local"),
        ("http://[::1]/x", "loopback"),
        ("ftp://files.example/x", "Enter an http:// or https:// URL."),
    ]:
        response = logged_in.post(_url(platform), {"op": "sink_add", "url": url})
        assert response.status_code == 400, url
        assert words in str(response.context["sink_form"].errors["url"]), url
    assert not DeadLetterSink.objects.exists()
    assert not TodoEvent.objects.filter(kind="sink_add").exists()

    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True
    response = logged_in.post(_url(platform), {"op": "sink_add", "url": "http://127.0.0.1:8000/d"})
    assert response.status_code == 200 and DeadLetterSink.objects.count() == 1


def test_owner_deactivates_activates_and_deletes_a_sink_audited(logged_in, user, platform):
    sink, _secret = teams.add_sink(platform, SINK_URL, by=user)
    deactivate, activate, delete = _sink_ops(sink)

    response = logged_in.post(_url(platform), deactivate)
    assert response.status_code == 302 and response["Location"] == _url(platform)
    sink.refresh_from_db()
    assert not sink.active
    assert any("hooks.example deactivated" in m for m in messages(response))
    assert all("rcv-s3cret" not in m for m in messages(response))  # host only
    logged_in.post(_url(platform), deactivate)  # again: nothing changes, nothing audited
    logged_in.post(_url(platform), activate)
    sink.refresh_from_db()
    assert sink.active

    logged_in.post(_url(platform), delete)
    assert not DeadLetterSink.objects.exists()
    kinds = TodoEvent.objects.filter(team=platform).order_by("id").values_list("kind", "detail")
    assert [k for k, _ in kinds if k.startswith("sink")] == [
        "sink_add",
        "sink_deactivate",
        "sink_activate",
        "sink_remove",
    ]
    assert all(d == {"sink_id": sink.pk, "host": "hooks.example"} for k, d in kinds if "sink" in k)


def test_the_sink_list_shows_each_sinks_last_delivery(
    logged_in, user, platform, django_assert_num_queries
):
    quiet, _ = teams.add_sink(platform, "https://quiet.example/", by=user)
    fine, _ = teams.add_sink(platform, "https://fine.example/", by=user)
    failing, _ = teams.add_sink(platform, "https://failing.example/", by=user)
    dropped, _ = teams.add_sink(platform, "https://dropped.example/", by=user)
    teams.set_sink_active(dropped, False, by=user)

    def deliveries(sink, *rows):
        for row in rows:
            Delivery.objects.create(
                kind="dead_letter", team=platform, sink=sink, url=sink.url, payload={}, **row
            )

    now = timezone.now()
    deliveries(fine, {"delivered_at": now, "last_status": 200, "attempts": 1})
    deliveries(
        failing,
        {"delivered_at": now, "last_status": 204, "attempts": 1},
        {"attempts": 2, "last_status": 500, "last_error": "HTTP 500 <b>oops</b>"},
        {},
    )
    deliveries(dropped, {"gave_up_at": now, "last_error": "not sent: its sink was deactivated"})

    # session, user (with invitations waiting for them and their teams), members, the team's
    # pending invitations (owners see them), sinks with their last delivery
    with django_assert_num_queries(5):
        response = logged_in.get(_url(platform))
    sinks = {s.url: s for s in response.context["sinks"]}
    assert sinks["https://quiet.example/"].last is None
    assert sinks["https://fine.example/"].last.state == "delivered"
    assert sinks["https://failing.example/"].last.state == "waiting"  # the newest row
    assert sinks["https://failing.example/"].waiting == 2
    assert sinks["https://dropped.example/"].last.state == "gave up"
    assert [s.url for s in response.context["sinks"]][-1] == "https://dropped.example/"
    body = response.content.decode()
    assert "No dead letter sent yet." in body and "HTTP 200" in body
    assert "2 waiting" in body and "gave up" in body and "inactive" in body
    assert quiet.secret not in body and fine.secret not in body

    Delivery.objects.filter(sink=failing, attempts=0).delete()
    body = logged_in.get(_url(platform)).content.decode()
    assert "after 2 tries" in body
    assert "HTTP 500 &lt;b&gt;oops&lt;/b&gt;" in body  # a receiver's words, escaped


def test_a_plain_member_sees_the_sinks_without_controls_and_is_refused(
    client, user, platform, carol
):
    sink, secret = teams.add_sink(platform, SINK_URL, by=user)
    client.force_login(carol)
    page = client.get(_url(platform)).content.decode()
    assert "hooks.example/dead" in page and secret not in page
    assert "Add sink" not in page and "Deactivate" not in page
    assert "Only the owners of Platform add, deactivate and delete sinks." in page
    before = TodoEvent.objects.count()
    for data in [{"op": "sink_add", "url": "https://other.example/"}, *_sink_ops(sink)]:
        response = client.post(_url(platform), data)
        assert response.status_code == 403, data
        assert "Only an owner of Platform may change its dead-letter sinks." in (
            response.content.decode()
        )
    sink.refresh_from_db()
    assert sink.active and DeadLetterSink.objects.count() == 1
    assert TodoEvent.objects.count() == before


def test_foreign_and_unknown_sink_ids_are_the_same_404(logged_in, platform, make_user):
    bob = make_user("bob")
    bobs_sink, _ = teams.add_sink(bob.teams.get(), SINK_URL, by=bob)
    for op in ("sink_deactivate", "sink_activate", "sink_delete"):
        foreign = logged_in.post(_url(platform), {"op": op, "sink": bobs_sink.pk})
        unknown = logged_in.post(_url(platform), {"op": op, "sink": bobs_sink.pk + 1000})
        garbage = logged_in.post(_url(platform), {"op": op, "sink": "1 OR 1=1"})
        assert foreign.status_code == unknown.status_code == garbage.status_code == 404
        assert foreign.content == unknown.content == garbage.content
    bobs_sink.refresh_from_db()
    assert bobs_sink.active
    assert not TodoEvent.objects.filter(team=platform, kind__startswith="sink").exists()


def test_sink_posts_without_a_csrf_token_are_refused(user, platform):
    sink, _secret = teams.add_sink(platform, SINK_URL, by=user)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    for data in [{"op": "sink_add", "url": "https://other.example/"}, *_sink_ops(sink)]:
        assert strict.post(_url(platform), data).status_code == 403, data
    sink.refresh_from_db()
    assert sink.active and DeadLetterSink.objects.count() == 1


def test_the_switcher_s_teams_come_with_the_user_and_follow_memberships(user, platform, make_user):
    """board_scope's teams are loaded with the user (board.auth): the user's own teams by
    name, as Team rows, never a team they are not in, and a team joined shows on the next
    request."""
    from switchboard.board.scope import board_scope

    dave = _as(make_user, "dave")
    elsewhere = teams.get_or_create_team("elsewhere", name="Elsewhere")
    page = dave.get("/").content.decode()
    assert "Platform" not in page and "Elsewhere" not in page
    teams.accept_invitation(
        get_user_model().objects.get(username="dave"),
        teams.invite(platform, "dave", role=MEMBER, by=user).pk,
    )
    request = dave.get("/").wsgi_request
    loaded = board_scope(request).teams
    expected = list(get_user_model().objects.get(username="dave").teams.order_by("name", "id"))
    assert [(t.pk, t.slug, t.name, t.personal, t.created_at) for t in loaded] == [
        (t.pk, t.slug, t.name, t.personal, t.created_at) for t in expected
    ]
    assert platform in loaded and elsewhere not in loaded and len(loaded) == 2
    assert 'value="platform"' in dave.get("/").content.decode()  # the switcher offers it
