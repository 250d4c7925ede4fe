"""The endpoints page: list, vend (token shown once), rotate, revoke, notify URL and its
signing secret (shown once), the last doorbell."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from switchboard.queues import endpoints, teams, transitions
from switchboard.queues.models import VERBS, Delivery, Endpoint, Membership, Todo, TodoEvent
from switchboard.queues.transitions import Actor
from tests.board.pages import assert_shown_once, messages


@pytest.fixture
def bob(make_user):
    return make_user("bob")


@pytest.fixture
def foreign_endpoint(bob, vend):
    """An endpoint in bob's personal team: alice must never see or touch it."""
    endpoint, _token = vend("bobs-agent", team=bob.teams.get())
    return endpoint


@pytest.fixture
def shared_team(user, team, make_user):
    """A team alice owns, with carol as a plain member (after alice's personal ``team``
    fixture has been resolved: it expects her to be in one team)."""
    platform = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(platform, user, role=Membership.Role.OWNER)
    carol = make_user("carol")
    teams.add_member(platform, carol)
    return platform, carol


def _vend_post(team, agent_id="builder", **extra):
    return {"agent_id": agent_id, "name": "", "team": team.slug, "verbs": ["claim_next"], **extra}


# --- The list


def test_list_shows_only_the_endpoints_of_your_teams(logged_in, make_endpoint, foreign_endpoint):
    mine = make_endpoint("agent-mine")
    response = logged_in.get(reverse("endpoint-list"))
    assert response.status_code == 200
    body = response.content.decode()
    assert "agent-mine" in body and reverse("endpoint-detail", args=[mine.pk]) in body
    assert "bobs-agent" not in body
    assert reverse("endpoint-detail", args=[foreign_endpoint.pk]) not in body


def test_list_shows_live_counts_and_last_activity(logged_in, endpoint, make_todo):
    make_todo("one")
    make_todo("two")
    done = make_todo("three")
    transitions.claim_next(Actor.agent(endpoint))  # one of them claimed
    transitions.cancel(Actor.agent(endpoint), done.id)
    response = logged_in.get(reverse("endpoint-list"))
    [row] = response.context["endpoints"]
    assert (row.live, row.pending, row.claimed, row.retry_wait) == (2, 1, 1, 0)
    latest = Todo.objects.filter(endpoint=endpoint).latest("updated_at").updated_at
    assert row.last_activity == latest
    assert "1 pending · 1 claimed · 0 retry" in response.content.decode()


def test_list_follows_the_team_switcher(logged_in, make_endpoint, shared_team, vend):
    platform, _carol = shared_team
    make_endpoint("personal-agent")
    vend("platform-agent", team=platform)
    logged_in.post(reverse("team-switch"), {"team": "platform"})
    body = logged_in.get(reverse("endpoint-list")).content.decode()
    assert "platform-agent" in body and "personal-agent" not in body


def _endpoints_with_todos(team, n: int) -> None:
    for i in range(n):
        endpoint, _ = endpoints.vend(team, f"counted-{i}")
        transitions.create_todo(Actor.agent(endpoint), title=f"todo {i}")


# session, user (with their teams, board_scope's), endpoints with their aggregates
# (one GROUP BY over the todos join)
LIST_QUERIES = 3


@pytest.mark.parametrize("n", [2, 6])
def test_list_query_count_does_not_grow_with_endpoints(
    logged_in, team, n, django_assert_num_queries
):
    _endpoints_with_todos(team, n)
    with django_assert_num_queries(LIST_QUERIES):
        response = logged_in.get(reverse("endpoint-list"))
    assert len(response.context["endpoints"]) == n


# --- Vend


def test_vend_shows_a_token_once_that_authenticates(logged_in, team, user):
    response = logged_in.post(reverse("endpoint-new"), _vend_post(team, verbs=["claim", "fail"]))
    assert response.status_code == 200
    token = response.context["token"]
    endpoint = Endpoint.objects.get(team=team, agent_id="builder")
    assert endpoints.authenticate(token) == endpoint
    assert endpoint.verbs == ["claim", "fail"]
    # Nowhere else: not in the session, a message, a cookie or the event log.
    assert_shown_once(response, logged_in, token, "endpoint-token")
    event = TodoEvent.objects.get(kind="vend", team=team)
    assert event.actor_user == user and token not in str(event.detail)


def test_vend_form_checks_every_verb_and_the_home_team_by_default(logged_in, team):
    form = logged_in.get(reverse("endpoint-list")).context["form"]
    assert form["team"].value() == team.slug
    assert form["verbs"].value() == list(VERBS)


def test_vend_duplicate_agent_id_is_a_form_error(logged_in, team, make_endpoint):
    make_endpoint("builder")
    before = (Endpoint.objects.count(), TodoEvent.objects.count())
    response = logged_in.post(reverse("endpoint-new"), _vend_post(team))
    assert response.status_code == 400
    assert "already has an endpoint" in str(response.context["form"].errors["agent_id"])
    assert (Endpoint.objects.count(), TodoEvent.objects.count()) == before


def test_vend_into_a_foreign_team_is_refused(logged_in, bob):
    response = logged_in.post(reverse("endpoint-new"), _vend_post(bob.teams.get()))
    assert response.status_code == 400 and "team" in response.context["form"].errors
    assert not Endpoint.objects.exists()


@pytest.mark.parametrize("agent_id", ["Builder", "has space", "", "x" * 65])
def test_vend_refuses_an_agent_id_that_is_not_a_slug(logged_in, team, agent_id):
    response = logged_in.post(reverse("endpoint-new"), _vend_post(team, agent_id=agent_id))
    assert response.status_code == 400 and "agent_id" in response.context["form"].errors
    assert not Endpoint.objects.exists()


def test_vend_needs_a_verb(logged_in, team):
    response = logged_in.post(reverse("endpoint-new"), _vend_post(team, verbs=[]))
    assert response.status_code == 400 and "verbs" in response.context["form"].errors
    assert not Endpoint.objects.exists()


def test_a_plain_member_may_vend(client, shared_team):
    platform, carol = shared_team
    client.force_login(carol)
    response = client.post(reverse("endpoint-new"), _vend_post(platform))
    assert response.status_code == 200
    assert endpoints.authenticate(response.context["token"]).team == platform


# --- Rotate


def test_rotate_retires_the_old_token_and_shows_the_new_one_once(logged_in, vend, user):
    endpoint, old = vend("agent-r")
    assert logged_in.get(reverse("endpoint-rotate", args=[endpoint.pk])).status_code == 200
    response = logged_in.post(reverse("endpoint-rotate", args=[endpoint.pk]))
    assert response.status_code == 200
    new = response.context["token"]
    assert endpoints.authenticate(old) is None
    assert endpoints.authenticate(new) == endpoint
    assert_shown_once(response, logged_in, new, "endpoint-token")
    assert TodoEvent.objects.filter(kind="rotate", actor_user=user).exists()


def test_rotate_of_a_revoked_endpoint_is_a_message(logged_in, endpoint):
    transitions.revoke_endpoint(None, endpoint)
    response = logged_in.post(reverse("endpoint-rotate", args=[endpoint.pk]))
    assert response.status_code == 302
    assert any("revoked" in m for m in messages(response))


# --- Revoke


def test_revoke_dead_letters_the_live_todos_and_is_audited(logged_in, endpoint, make_todo, user):
    waiting, held, finished = make_todo("a"), make_todo("b"), make_todo("c")
    agent = Actor.agent(endpoint)
    transitions.claim(agent, finished.id)
    transitions.complete(agent, finished.id)
    transitions.claim(agent, held.id)

    confirm = logged_in.get(reverse("endpoint-revoke", args=[endpoint.pk]))
    assert confirm.context["live"] == 2
    assert "2 live todos" in confirm.content.decode()

    response = logged_in.post(reverse("endpoint-revoke", args=[endpoint.pk]))
    assert response.status_code == 302
    assert "agent-a revoked; 2 todos dead-lettered." in messages(response)
    states = dict(Todo.objects.values_list("id", "state"))
    assert states == {waiting.id: "dead", held.id: "dead", finished.id: "done"}
    reasons = set(Todo.objects.filter(state="dead").values_list("dead_letter_reason", flat=True))
    assert reasons == {"revoked"}
    event = TodoEvent.objects.get(kind="endpoint_revoke")
    assert event.actor_user == user and event.detail["todos_dead_lettered"] == 2


def test_second_revoke_is_a_friendly_message(logged_in, endpoint):
    url = reverse("endpoint-revoke", args=[endpoint.pk])
    logged_in.post(url)
    response = logged_in.post(url)
    assert response.status_code == 302
    assert any("already revoked" in m for m in messages(response))
    assert TodoEvent.objects.filter(kind="endpoint_revoke").count() == 1


def test_only_owners_rotate_revoke_or_set_the_notify_url(client, shared_team, vend):
    platform, carol = shared_team
    endpoint, token = vend("shared-agent", team=platform)
    client.force_login(carol)
    detail = client.get(reverse("endpoint-detail", args=[endpoint.pk]))
    assert "Only an owner of Platform may rotate or revoke" in detail.content.decode()
    for name, data in [
        ("endpoint-rotate", {}),
        ("endpoint-revoke", {}),
        ("endpoint-detail", {"notify_url": "https://hooks.example/x"}),
    ]:
        response = client.post(reverse(name, args=[endpoint.pk]), data)
        assert response.status_code == 302
        assert any("Only an owner of Platform" in m for m in messages(response))
    endpoint.refresh_from_db()
    assert endpoint.revoked_at is None and endpoint.notify_url == ""
    assert endpoints.authenticate(token) == endpoint
    assert not TodoEvent.objects.filter(
        kind__in=["rotate", "endpoint_revoke", "notify_url"]
    ).exists()


# --- No existence oracle


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("get", "endpoint-detail"),
        ("post", "endpoint-detail"),
        ("get", "endpoint-rotate"),
        ("post", "endpoint-rotate"),
        ("get", "endpoint-revoke"),
        ("post", "endpoint-revoke"),
    ],
)
def test_foreign_and_unknown_endpoints_are_the_same_404(logged_in, foreign_endpoint, method, name):
    call = getattr(logged_in, method)
    for data in [{"notify_url": ""}, {"op": "rotate_secret"}]:
        foreign = call(reverse(name, args=[foreign_endpoint.pk]), data)
        unknown = call(reverse(name, args=[foreign_endpoint.pk + 1000]), data)
        assert foreign.status_code == unknown.status_code == 404
        assert foreign.content == unknown.content
    foreign_endpoint.refresh_from_db()
    assert foreign_endpoint.revoked_at is None and foreign_endpoint.rotated_at is None


# --- Notify URL


def test_notify_url_is_saved_and_audited(logged_in, endpoint, user):
    url = reverse("endpoint-detail", args=[endpoint.pk])
    response = logged_in.post(url, {"notify_url": "https://hooks.example/ring?key=s3cret"})
    assert response.status_code == 200  # the page that shows its signing secret once
    endpoint.refresh_from_db()
    assert endpoint.notify_url == "https://hooks.example/ring?key=s3cret"
    event = TodoEvent.objects.get(kind="notify_url")
    assert event.team_id == endpoint.team_id and event.actor_user == user
    assert event.detail == {"agent_id": "agent-a", "host": "hooks.example"}  # no secret

    response = logged_in.post(url, {"notify_url": ""})
    assert response.status_code == 302
    assert any("Notify URL removed." in m for m in messages(response))
    endpoint.refresh_from_db()
    assert endpoint.notify_url == "" and endpoint.notify_secret == ""
    assert TodoEvent.objects.filter(kind="notify_url").count() == 2


def _secret_shown_once(response, client) -> str:
    assert response.status_code == 200
    assert [t.name for t in response.templates][0] == "board/webhook_secret.html"
    secret = response.context["secret"]
    assert_shown_once(response, client, secret, "webhook-secret")
    assert not any(secret in str(e.detail) for e in TodoEvent.objects.all())
    return secret


def test_a_new_notify_url_gets_a_secret_shown_once_and_rotate_shows_another(
    logged_in, endpoint, user
):
    url = reverse("endpoint-detail", args=[endpoint.pk])
    first = _secret_shown_once(
        logged_in.post(url, {"notify_url": "https://hooks.example/a"}), logged_in
    )
    endpoint.refresh_from_db()
    assert endpoint.notify_secret == first and first.startswith("sbw_")
    page = logged_in.get(url).content.decode()
    assert first not in page and "Rotate secret" in page and "Not rung yet." in page

    rotated = _secret_shown_once(logged_in.post(url, {"op": "rotate_secret"}), logged_in)
    endpoint.refresh_from_db()
    assert endpoint.notify_secret == rotated != first
    assert (
        "stopped signing just now" in logged_in.post(url, {"op": "rotate_secret"}).content.decode()
    )
    event = TodoEvent.objects.filter(kind="notify_secret_rotate").first()
    assert event.actor_user == user and event.detail == {"agent_id": "agent-a"}

    # Another URL: another receiver, another secret.
    other = _secret_shown_once(
        logged_in.post(url, {"notify_url": "https://hooks.example/b"}), logged_in
    )
    endpoint.refresh_from_db()
    assert endpoint.notify_secret == other and other not in (first, rotated)


def test_rotating_without_a_notify_url_is_a_message(logged_in, endpoint):
    response = logged_in.post(
        reverse("endpoint-detail", args=[endpoint.pk]), {"op": "rotate_secret"}
    )
    assert response.status_code == 302
    assert any("Set a notify URL first" in m for m in messages(response))
    endpoint.refresh_from_db()
    assert endpoint.notify_secret == ""


def test_a_notify_url_to_an_internal_address_is_refused_unless_allowed(
    logged_in, endpoint, settings
):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False
    url = reverse("endpoint-detail", args=[endpoint.pk])
    for target in ["http://127.0.0.1:8000/ring", "http://10.0.0.8/ring", "http://localhost/"]:
        response = logged_in.post(url, {"notify_url": target})
        assert response.status_code == 400, target
        [error] = response.context["form"].errors["notify_url"]
        assert (
            error.startswith("This URL cannot be used:")
            and "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE" in error
        )
    endpoint.refresh_from_db()
    assert endpoint.notify_url == "" and endpoint.notify_secret == ""
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True
    assert logged_in.post(url, {"notify_url": "http://127.0.0.1:8000/ring"}).status_code == 200


def test_the_endpoint_page_shows_the_last_doorbell(logged_in, endpoint, user, make_todo):
    endpoints.set_notify_url(endpoint, "https://hooks.example/ring", user=user)
    make_todo()  # rings: a doorbell waits in the outbox
    url = reverse("endpoint-detail", args=[endpoint.pk])
    assert "waiting" in logged_in.get(url).context["last_doorbell"].state
    Delivery.objects.update(attempts=1, last_status=503, last_error="HTTP 503 busy")
    page = logged_in.get(url)
    assert page.context["last_doorbell"].state == "retrying"
    assert "HTTP 503 busy" in page.content.decode()


def test_a_member_may_not_rotate_the_doorbell_secret(client, shared_team, vend, user):
    platform, carol = shared_team
    endpoint, _token = vend("shared-agent", team=platform)
    secret = endpoints.set_notify_url(endpoint, "https://hooks.example/r", user=user)
    client.force_login(carol)
    page = client.get(reverse("endpoint-detail", args=[endpoint.pk])).content.decode()
    assert "Rotate secret" not in page and secret not in page
    response = client.post(reverse("endpoint-detail", args=[endpoint.pk]), {"op": "rotate_secret"})
    assert response.status_code == 302
    assert any(
        "Only an owner of Platform may rotate the doorbell secret" in m for m in messages(response)
    )
    endpoint.refresh_from_db()
    assert endpoint.notify_secret == secret


@pytest.mark.parametrize(
    "bad",
    [
        "javascript:alert(1)",
        "ftp://files.example/x",
        "https://hooks.example/" + "a" * 480,
        "not a url",
    ],
)
def test_notify_url_refuses_anything_but_http_and_https(logged_in, endpoint, bad):
    response = logged_in.post(reverse("endpoint-detail", args=[endpoint.pk]), {"notify_url": bad})
    assert response.status_code == 400
    assert len(response.context["form"].errors["notify_url"]) == 1
    endpoint.refresh_from_db()
    assert endpoint.notify_url == ""
    assert not TodoEvent.objects.filter(kind="notify_url").exists()


# --- CSRF


def test_every_post_without_a_csrf_token_is_refused(user, team, vend):
    endpoint, token = vend("agent-c")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    posts = [
        (reverse("endpoint-new"), _vend_post(team, agent_id="sneaky")),
        (reverse("endpoint-detail", args=[endpoint.pk]), {"notify_url": "https://x.example/"}),
        (reverse("endpoint-detail", args=[endpoint.pk]), {"op": "rotate_secret"}),
        (reverse("endpoint-rotate", args=[endpoint.pk]), {}),
        (reverse("endpoint-revoke", args=[endpoint.pk]), {}),
    ]
    for url, data in posts:
        assert strict.post(url, data).status_code == 403, url
    endpoint.refresh_from_db()
    assert endpoint.revoked_at is None and endpoint.notify_url == ""
    assert endpoints.authenticate(token) == endpoint
    assert not Endpoint.objects.filter(agent_id="sneaky").exists()
