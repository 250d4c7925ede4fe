"""Django admin for operators: aggregates and metadata only, never anybody's work.

Two kinds of staff sign in here: a superuser, and an operator made the way the docs say
(``switchboard adduser NAME --staff``: staff in the Operators group, view permissions only,
plus revoke and queue health). Both must see no user text and no secret.
"""

from __future__ import annotations

import html
import io
import re
from collections import Counter
from datetime import timedelta
from urllib.parse import urljoin, urlsplit

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.messages import get_messages
from django.core.management import call_command
from django.db import connection, transaction
from django.urls import reverse

from switchboard.queues import endpoints, operators, sweeper, tokens, transitions
from switchboard.queues.models import (
    LIVE_STATES,
    DeadLetterSink,
    Delivery,
    Endpoint,
    Outcome,
    Todo,
    TodoAttempt,
    TodoEvent,
    TodoState,
)
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease

MARKERS = {
    "title": "MARKER-TITLE-7f3a",
    "body": "MARKER-BODY-7f3a",
    "todo_result": "MARKER-TODO-RESULT-7f3a",
    "summary": "MARKER-SUMMARY-7f3a",
    "artifact": "MARKER-ARTIFACT-7f3a",
    "claimant": "MARKER-CLAIMANT-7f3a",
    "attempt_result": "MARKER-ATTEMPT-RESULT-7f3a",
    "event_detail": "MARKER-EVENT-DETAIL-7f3a",
    "notify_path": "MARKER-NOTIFY-PATH-7f3a",
    "notify_secret": "MARKER-NOTIFY-SECRET-7f3a",
    "sink_path": "MARKER-SINK-PATH-7f3a",
    "sink_secret": "MARKER-SINK-SECRET-7f3a",
    "idempotency_key": "MARKER-IDEMPOTENCY-7f3a",
    "outbox": "MARKER-OUTBOX-7f3a",
}


@pytest.fixture
def superuser(make_user):
    return make_user("root", is_staff=True, is_superuser=True)


@pytest.fixture
def signed_in(client, superuser):
    client.force_login(superuser)
    return client


@pytest.fixture
def operator(db, monkeypatch):
    """An operator made through the real command: ``switchboard adduser ops --staff``."""
    monkeypatch.setenv("SWITCHBOARD_PASSWORD", "correct horse battery staple")
    call_command("adduser", "ops", "--staff", stdout=io.StringIO())
    return get_user_model().objects.get(username="ops")


@pytest.fixture(params=["superuser", "operator"])
def staff(request, client):
    """Signed in as each kind of staff in turn."""
    user = request.getfixturevalue(request.param)
    client.force_login(user)
    return user


@pytest.fixture
def seeded(user, team, settings):
    """A team's work with a distinct marker in every piece of user text, and its secrets."""
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    endpoint, endpoint_token = endpoints.vend(team, "marked-agent")
    agent = Actor.agent(endpoint)

    # A todo that failed once (fenced, labelled, with summary, artifact and result) and is
    # now claimed again, fenced: an open attempt with a live lease token.
    failed, _ = transitions.create_todo(
        Actor.agent(endpoint),
        title=MARKERS["title"],
        body=MARKERS["body"],
        idempotency_key=MARKERS["idempotency_key"],
        max_attempts=3,
    )
    first = transitions.claim(agent, failed.id, require_fence=True, claimant=MARKERS["claimant"])
    transitions.fail(
        agent,
        failed.id,
        lease_token=first.lease_token,
        result={"said": MARKERS["attempt_result"]},
        summary=MARKERS["summary"],
        artifact=f"https://artifacts.example.com/{MARKERS['artifact']}",
    )
    live = transitions.claim(agent, failed.id, require_fence=True, claimant=MARKERS["claimant"])

    # A done todo whose result of record carries a marker, and a dead letter.
    done, _ = transitions.create_todo(Actor.agent(endpoint), title=MARKERS["title"] + "-done")
    claim = transitions.claim(agent, done.id, claimant=MARKERS["claimant"])
    transitions.complete(
        agent, done.id, attempt_seq=claim.attempt_seq, result={"r": MARKERS["todo_result"]}
    )
    dead, _ = transitions.create_todo(
        Actor.agent(endpoint),
        title=MARKERS["title"] + "-dead",
        max_attempts=1,
    )
    transitions.claim(agent, dead.id, claimant=MARKERS["claimant"])
    transitions.fail(
        agent, dead.id, summary=MARKERS["summary"], artifact=f"mcp://x/{MARKERS['artifact']}"
    )

    # A sweeper status row with a report, like a running system (before any webhook is
    # configured: the sweeper would try to deliver it).
    sweeper.sweep_once()

    Endpoint.objects.filter(pk=endpoint.pk).update(
        notify_url=f"https://doorbell.example.org/{MARKERS['notify_path']}?k=1",
        notify_secret=MARKERS["notify_secret"],
    )
    TodoEvent.objects.create(
        team=team, todo_id=done.id, kind="cancel", detail={"text": MARKERS["event_detail"]}
    )
    sink = DeadLetterSink.objects.create(
        team=team,
        url=f"https://sink.example.net/{MARKERS['sink_path']}",
        secret=MARKERS["sink_secret"],
        created_by=user,
    )
    Delivery.objects.create(
        kind=Delivery.Kind.DEAD_LETTER,
        team=team,
        sink=sink,
        todo_id=dead.id,
        url=f"https://sink.example.net/{MARKERS['sink_path']}",
        payload={"title": MARKERS["title"], "outbox": MARKERS["outbox"]},
        last_error=MARKERS["outbox"],
    )
    endpoint.refresh_from_db()
    secrets = {
        "endpoint token": endpoint_token,
        "endpoint token hash": endpoint.token_hash,
        "lease token": live.lease_token,
        "lease token hash": tokens.digest(live.lease_token),
    }
    return {
        "endpoint": endpoint,
        "todos": (failed, done, dead),
        "sink": sink,
        "forbidden": {**MARKERS, **secrets},
    }


# ---------------------------------------------------------------------------------------
# The marker test (issue 5, "Must show")


def _links(page_url: str, body: str) -> list[str]:
    found = []
    for href in re.findall(r'href="([^"]*)"', body):
        url = urlsplit(urljoin(page_url, html.unescape(href)))
        if url.path.startswith("/admin/"):
            found.append(url.path + (f"?{url.query}" if url.query else ""))
    return found


def _crawl(client, start: list[str]) -> dict[str, tuple[int, str]]:
    """Every admin page reachable from ``start`` by links. Links with a query string
    (filters, sorting, pages) are followed from pages without one, so every filter and
    sort option is visited once without visiting their combinations."""
    pages: dict[str, tuple[int, str]] = {}
    queue = list(start)
    while queue:
        url = queue.pop(0)
        if url in pages:
            continue
        response = client.get(url)
        body = response.content.decode()
        pages[url] = (response.status_code, body)
        assert response.status_code < 500, url
        assert len(pages) < 2000, "the crawl ran away"
        for link in _links(url, body):
            if "?" in link and "?" in url:
                continue
            if link.startswith("/admin/logout"):
                continue
            queue.append(link)
    return pages


def test_no_admin_page_shows_todo_text_attempt_text_or_a_secret(client, staff, seeded, user):
    forbidden = {
        **seeded["forbidden"],
        # Not even the stored form of a password (an operator sees no outline of it either).
        **{f"password of {u.username}": u.password for u in get_user_model().objects.all()},
    }
    failed, done, dead = seeded["todos"]
    changelists = [
        reverse(f"admin:queues_{model}_changelist") for model in ("team", "endpoint", "todo")
    ] + [reverse("admin:queues_deadlettersink_changelist"), reverse("admin:auth_user_changelist")]
    # Searches for each marker (less its prefix, which the search box echoes back).
    searches = [
        f"{changelist}?q={marker.removeprefix('MARKER-')}"
        for changelist in changelists
        for marker in MARKERS.values()
    ]
    adds = [reverse(f"admin:queues_{m}_add") for m in ("team", "endpoint", "todo")]

    pages = _crawl(client, ["/admin/", *searches, *adds])

    leaks = [
        (url, name)
        for url, (_status, body) in pages.items()
        for name, secret in forbidden.items()
        if secret in body
    ]
    assert leaks == []
    # The crawl reached what it had to: every object's page, the queue health page.
    visited = set(pages)
    for todo in (failed, done, dead):
        assert reverse("admin:queues_todo_change", args=[todo.id]) in visited
    assert reverse("admin:queues_endpoint_change", args=[seeded["endpoint"].pk]) in visited
    assert reverse("admin:queues_team_change", args=[seeded["endpoint"].team_id]) in visited
    assert reverse("admin:queues_deadlettersink_change", args=[seeded["sink"].pk]) in visited
    assert reverse("admin:auth_user_change", args=[staff.pk]) in visited
    assert reverse("admin:auth_user_change", args=[user.pk]) in visited
    assert reverse("admin:queue-health") in visited
    assert any("state__exact=" in url for url in visited)  # the filters were followed
    assert all(pages[url][0] == 200 for url in [*changelists, reverse("admin:queue-health")])
    assert all(pages[url][0] == 200 for url in searches)
    assert all(pages[url][0] == 403 for url in adds)  # nothing of ours is added here
    # Every filter and sort link the pages offer works (none is refused as a lookup).
    assert [url for url, (status, _) in pages.items() if "?" in url and status != 200] == []
    # What the pages do show: ids, agent ids, states, the webhook hosts.
    todo_page = pages[reverse("admin:queues_todo_change", args=[failed.id])][1]
    assert "marked-agent" in todo_page and "claimed" in todo_page
    endpoint_page = pages[reverse("admin:queues_endpoint_change", args=[seeded["endpoint"].pk])][1]
    assert "doorbell.example.org" in endpoint_page
    sink_page = pages[reverse("admin:queues_deadlettersink_change", args=[seeded["sink"].pk])][1]
    assert "sink.example.net" in sink_page
    assert "permission to view or edit anything" not in pages["/admin/"][1]


@pytest.mark.parametrize("model", ["team", "endpoint", "todo", "deadlettersink"])
def test_searching_for_user_text_finds_nothing(signed_in, seeded, model):
    """A search over titles, bodies, URLs or secrets would tell an operator they exist."""
    url = reverse(f"admin:queues_{model}_changelist")
    for marker in MARKERS.values():
        response = signed_in.get(url, {"q": marker})
        assert response.status_code == 200
        assert response.context["cl"].result_count == 0, marker
    # Ids and agent ids are searchable.
    response = signed_in.get(reverse("admin:queues_todo_changelist"), {"q": "marked-agent"})
    assert response.context["cl"].result_count == 3


def test_staff_are_not_team_members_and_see_no_todo_on_the_board(client, seeded, make_user):
    staff = make_user("plain-staff", is_staff=True)
    client.force_login(staff)

    assert list(staff.teams.values_list("personal", flat=True)) == [True]  # their own only
    response = client.get("/")
    assert response.status_code == 200
    assert MARKERS["title"] not in response.content.decode()
    assert not Todo.objects.filter(endpoint__team__memberships__user=staff).exists()


def test_todos_cannot_be_added_changed_or_deleted_through_admin(signed_in, seeded):
    failed, _, _ = seeded["todos"]
    change = reverse("admin:queues_todo_change", args=[failed.id])

    page = signed_in.get(change)
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()  # a view, not a form
    posted = signed_in.post(change, {"state": "done"})
    assert posted.status_code == 403
    assert signed_in.get(reverse("admin:queues_todo_delete", args=[failed.id])).status_code == 403
    assert Todo.objects.get(pk=failed.id).state == TodoState.CLAIMED


def test_memberships_are_shown_read_only(signed_in, seeded, user):
    page = signed_in.get(reverse("admin:queues_team_change", args=[seeded["endpoint"].team_id]))
    body = page.content.decode()
    assert page.status_code == 200
    assert user.username in body and "owner" in body
    assert 'name="_save"' not in body  # a view, not a form
    assert 'name="memberships-MAX_NUM_FORMS" value="0"' in body  # no membership can be added


def test_queue_health_and_admin_need_staff(client, user):
    client.force_login(user)
    response = client.get(reverse("admin:queue-health"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_admin_index_links_to_queue_health(signed_in):
    body = signed_in.get("/admin/").content.decode()
    assert reverse("admin:queue-health") in body


# ---------------------------------------------------------------------------------------
# The revoke action


def test_revoke_action_asks_then_dead_letters_the_endpoints_live_todos(
    signed_in, endpoint, make_todo, settings
):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 3600
    agent = Actor.agent(endpoint)
    pending = make_todo("pending")
    claimed = make_todo("claimed")
    transitions.claim(agent, claimed.id)
    waiting = make_todo("waiting")
    transitions.claim(agent, waiting.id)
    transitions.fail(agent, waiting.id)
    done = make_todo("done")
    transitions.claim(agent, done.id)
    transitions.complete(agent, done.id)
    changelist = reverse("admin:queues_endpoint_changelist")
    form = {"action": "revoke_endpoints", "_selected_action": [str(endpoint.pk)], "index": "0"}

    asked = signed_in.post(changelist, form)

    assert asked.status_code == 200
    assert asked.context["live_todos"] == 3
    assert Endpoint.objects.get(pk=endpoint.pk).revoked_at is None  # nothing yet

    confirmed = signed_in.post(
        changelist,
        {"action": "revoke_endpoints", "_selected_action": [str(endpoint.pk)], "confirmed": "yes"},
    )

    assert confirmed.status_code == 302
    assert Endpoint.objects.get(pk=endpoint.pk).revoked_at is not None
    states = dict(Todo.objects.values_list("id", "state"))
    assert [states[t.id] for t in (pending, claimed, waiting, done)] == [
        "dead",
        "dead",
        "dead",
        "done",
    ]
    reasons = set(
        Todo.objects.filter(pk__in=[pending.id, claimed.id, waiting.id]).values_list(
            "dead_letter_reason", flat=True
        )
    )
    assert reasons == {"revoked"}
    assert (
        TodoAttempt.objects.filter(todo_id=claimed.id).values_list("outcome", flat=True).get()
        == "revoked"
    )
    messages = [str(m) for m in get_messages(confirmed.wsgi_request)]
    assert messages == ["Revoked 1 endpoint; 3 todos dead-lettered with reason revoked."]


def test_revoke_action_leaves_a_revoked_endpoint_alone(signed_in, endpoint, make_todo):
    transitions.revoke_endpoint(None, endpoint)
    response = signed_in.post(
        reverse("admin:queues_endpoint_changelist"),
        {"action": "revoke_endpoints", "_selected_action": [str(endpoint.pk)], "confirmed": "yes"},
    )
    assert response.status_code == 302
    messages = [str(m) for m in get_messages(response.wsgi_request)]
    assert messages == ["No active endpoint was selected."]


def test_staff_without_the_endpoint_change_permission_get_no_revoke_action(
    client, make_user, endpoint
):
    from django.contrib.auth.models import Permission

    staff = make_user("viewer", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_endpoint"))
    client.force_login(staff)
    page = client.get(reverse("admin:queues_endpoint_changelist"))
    assert page.status_code == 200
    assert "revoke_endpoints" not in page.content.decode()


# ---------------------------------------------------------------------------------------
# Queue health


def _db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]


def _backdate_attempt_end(todo_id: int, seconds: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todo_attempts SET ended_at = ended_at - make_interval(secs => %s),"
            " claimed_at = claimed_at - make_interval(secs => %s)"
            " WHERE todo_id = %s AND ended_at IS NOT NULL",
            [seconds, seconds, todo_id],
        )
        assert cursor.rowcount >= 1


def _backdate_todo(todo_id: int, seconds: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todos SET created_at = created_at - make_interval(secs => %s),"
            " ended_at = ended_at - make_interval(secs => %s) WHERE id = %s",
            [seconds, seconds, todo_id],
        )
        assert cursor.rowcount == 1


@pytest.fixture
def busy(team, settings):
    """Two endpoints with todos in every state and attempts ended now, 2 h and 2 days ago."""
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 3600
    one, _ = endpoints.vend(team, "one")
    two, _ = endpoints.vend(team, "two")

    def todo(endpoint, title, **kwargs):
        created, _ = transitions.create_todo(Actor.agent(endpoint), title=title, **kwargs)
        return created

    for endpoint in (one, two):
        agent = Actor.agent(endpoint)
        todo(endpoint, "waiting since long ago")
        old = todo(endpoint, "pending for three hours")
        _backdate_todo(old.id, 3 * 3600)
        later = _db_now() + timedelta(hours=1)
        todo(endpoint, "not yet", not_before=later)  # pending but not claimable: not counted
        for _ in range(2):
            claimed = todo(endpoint, "claimed")
            transitions.claim(agent, claimed.id)
        waiting = todo(endpoint, "retry")
        transitions.claim(agent, waiting.id)
        transitions.fail(agent, waiting.id)
        done = todo(endpoint, "done")
        transitions.claim(agent, done.id)
        transitions.complete(agent, done.id)
        _backdate_attempt_end(done.id, 2 * 3600)
        old_done = todo(endpoint, "done two days ago")
        transitions.claim(agent, old_done.id)
        transitions.complete(agent, old_done.id)
        _backdate_attempt_end(old_done.id, 2 * 86400)
        dead = todo(endpoint, "dead", max_attempts=1)
        transitions.claim(agent, dead.id)
        transitions.fail(agent, dead.id)
        old_dead = todo(endpoint, "dead long ago", max_attempts=1)
        transitions.claim(agent, old_dead.id)
        transitions.fail(agent, old_dead.id)
        _backdate_todo(old_dead.id, 2 * 86400)
        canceled = todo(endpoint, "canceled")
        transitions.cancel(agent, canceled.id)
        reaped = todo(endpoint, "reaped")
        transitions.claim(agent, reaped.id)
        lapse_lease(reaped.id)
        transitions.reap_lapsed()
    expired = todo(one, "taken over")
    transitions.claim(Actor.agent(one), expired.id)
    lapse_lease(expired.id)
    transitions.claim(Actor.agent(one), expired.id)  # closes the lapsed attempt lease_expired
    return one, two


def test_queue_health_numbers_equal_counts_made_independently(signed_in, busy):
    now = _db_now()
    todos = list(
        Todo.objects.values("endpoint_id", "state", "ended_at", "not_before", "created_at")
    )
    attempts = list(
        TodoAttempt.objects.filter(ended_at__isnull=False).values("outcome", "ended_at")
    )
    by_endpoint_state = Counter((t["endpoint_id"], t["state"]) for t in todos)
    closed_day = Counter(a["outcome"] for a in attempts if a["ended_at"] > now - timedelta(days=1))
    closed_hour = Counter(
        a["outcome"] for a in attempts if a["ended_at"] > now - timedelta(hours=1)
    )
    dead_day = sum(
        1 for t in todos if t["state"] == "dead" and t["ended_at"] > now - timedelta(days=1)
    )
    # a pending todo is claimable from its not_before, else from its creation
    oldest = max(
        now - max(t["not_before"] or t["created_at"], t["created_at"])
        for t in todos
        if t["state"] == "pending" and (t["not_before"] or t["created_at"]) <= now
    )

    response = signed_in.get(reverse("admin:queue-health"))

    assert response.status_code == 200
    health = response.context["health"]
    for row in health.endpoints:
        for state in TodoState.values:
            assert row.by_state[state] == by_endpoint_state[(row.endpoint_id, state)]
    assert {row.endpoint_id for row in health.endpoints} == {e.pk for e in busy}
    assert health.by_state == {
        s: sum(n for (_, state), n in by_endpoint_state.items() if state == s)
        for s in TodoState.values
    }
    assert health.closed_last_day == {o: closed_day[o] for o in Outcome.values}
    assert health.closed_last_hour == {o: closed_hour[o] for o in Outcome.values}
    assert health.lease_expiries_last_hour == closed_hour["reaped"] + closed_hour["lease_expired"]
    assert health.lease_expiries_last_day == 3
    assert health.dead_letters == sum(1 for t in todos if t["state"] == "dead") == 4
    assert health.dead_letters_last_day == dead_day == 2
    # The page's clock read a moment after the test's.
    assert oldest <= health.oldest_pending_age < oldest + timedelta(seconds=30)
    assert timedelta(hours=3) <= health.oldest_pending_age
    # The numbers the test expects by construction, so the independent count is not vacuous.
    assert closed_hour["completed"] == 0 and closed_day["completed"] == 2
    assert closed_hour["failed"] == 6 and closed_hour["reaped"] == 2
    body = response.content.decode()
    assert 'class="dead-letters">4<' in body
    assert 'class="lease-expiries-day">3<' in body
    assert "3 h 0" in body  # the oldest pending age, "3 h 00 min"


def test_oldest_pending_counts_from_when_a_todo_became_claimable(signed_in, endpoint):
    # A not_before years in the past made the todo claimable when it was created, not then.
    transitions.create_todo(
        Actor.agent(endpoint),
        title="scheduled long ago",
        not_before=_db_now() - timedelta(days=2526),
    )

    health = signed_in.get(reverse("admin:queue-health")).context["health"]

    assert timedelta(0) <= health.oldest_pending_age < timedelta(minutes=1)


def test_queue_health_shows_the_sweepers_last_pass(signed_in, busy):
    assert "No sweeper has run" in signed_in.get(reverse("admin:queue-health")).content.decode()
    sweeper.sweep_once()

    response = signed_in.get(reverse("admin:queue-health"))

    status = response.context["sweeper"]
    assert status["passes"] == 1
    assert status["last_finished_at"] >= status["last_started_at"]
    assert timedelta(0) <= status["lag"] < timedelta(seconds=30)
    assert 'class="sweeper-passes">1<' in response.content.decode()


def test_queue_health_query_count_does_not_grow_with_rows(
    signed_in, busy, team, django_assert_num_queries
):
    sweeper.sweep_once()
    # session, user; todos by endpoint and state; their endpoints; attempts by outcome;
    # questions by endpoint; outbox; sweeper
    with django_assert_num_queries(8):
        signed_in.get(reverse("admin:queue-health"))

    three, _ = endpoints.vend(team, "three")
    for n in range(40):
        todo, _ = transitions.create_todo(Actor.agent(three), title=f"more {n}")
        transitions.claim(Actor.agent(three), todo.id)
        transitions.complete(Actor.agent(three), todo.id)
    with django_assert_num_queries(8):
        response = signed_in.get(reverse("admin:queue-health"))
    assert len(response.context["health"].endpoints) == 3


def test_changelists_count_in_the_database_with_a_pinned_query_count(
    signed_in, busy, team, django_assert_num_queries
):
    # session, user; COUNT; the page of rows with its counts as subqueries; the team filter
    with django_assert_num_queries(5):
        signed_in.get(reverse("admin:queues_endpoint_changelist"))
    # session, user; COUNT; the page; team and endpoint filters
    with django_assert_num_queries(6):
        signed_in.get(reverse("admin:queues_todo_changelist"))
    for n in range(5):
        endpoints.vend(team, f"more-{n}")
    with django_assert_num_queries(5):
        response = signed_in.get(reverse("admin:queues_endpoint_changelist"))
    rows = {e.agent_id: (e.live_count, e.dead_count) for e in response.context["cl"].result_list}
    one_live = Todo.objects.filter(endpoint__agent_id="one", state__in=LIVE_STATES).count()
    assert rows["one"] == (one_live, 2)
    assert rows["more-0"] == (0, 0)


def test_users_are_deactivated_not_deleted(signed_in, user):
    response = signed_in.get(reverse("admin:auth_user_delete", args=[user.pk]))
    assert response.status_code == 403


# ---------------------------------------------------------------------------------------
# Operators: the group, adduser --staff, queue health's permission


def _operator_permissions() -> set[str]:
    group = Group.objects.get(name=operators.GROUP)
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in group.permissions.select_related("content_type")
    }


EXPECTED_OPERATOR_PERMISSIONS = {
    "queues.view_team",
    "queues.view_membership",
    "queues.view_endpoint",
    "queues.view_todo",
    "queues.view_deadlettersink",
    "auth.view_user",
    "queues.view_queue_health",
    "queues.revoke_endpoint",
    "queues.pause_endpoint",
}


def test_migrate_makes_the_operators_group_with_view_revoke_and_queue_health(db):
    assert _operator_permissions() == EXPECTED_OPERATOR_PERMISSIONS


def test_the_operators_group_is_made_again_exactly_on_every_migrate(db):
    group = Group.objects.get(name=operators.GROUP)
    group.permissions.add(Permission.objects.get(codename="change_user"))  # by hand
    group.permissions.remove(Permission.objects.get(codename="view_todo"))

    for _ in range(2):
        operators.make_operators_group(apps.get_app_config("queues"), verbosity=0)

    assert Group.objects.filter(name=operators.GROUP).count() == 1
    assert _operator_permissions() == EXPECTED_OPERATOR_PERMISSIONS
    assert Permission.objects.filter(codename="view_queue_health").count() == 1


def test_adduser_staff_makes_an_operator(operator):
    assert operator.is_staff and not operator.is_superuser
    assert list(operator.groups.values_list("name", flat=True)) == [operators.GROUP]
    assert operator.has_perm("queues.view_todo")
    assert operator.has_perm("queues.view_queue_health")
    assert not operator.has_perm("queues.change_todo")
    assert not operator.has_perm("auth.change_user")


def test_an_operator_sees_every_admin_page_and_queue_health(client, operator, seeded, user):
    client.force_login(operator)
    index = client.get("/admin/").content.decode()

    assert "permission to view or edit anything" not in index
    assert reverse("admin:queue-health") in index
    for name in ("team", "endpoint", "todo", "deadlettersink"):
        assert reverse(f"admin:queues_{name}_changelist") in index
    assert reverse("admin:auth_user_changelist") in index
    assert client.get(reverse("admin:queue-health")).status_code == 200
    failed, _, _ = seeded["todos"]
    assert client.get(reverse("admin:queues_todo_change", args=[failed.id])).status_code == 200
    team_page = client.get(reverse("admin:queues_team_change", args=[seeded["endpoint"].team_id]))
    assert user.username in team_page.content.decode()  # the members, read-only


def test_staff_without_the_group_get_403_on_queue_health_and_no_link(client, make_user, busy):
    staff = make_user("plain-staff", is_staff=True)
    client.force_login(staff)

    assert client.get(reverse("admin:queue-health")).status_code == 403
    index = client.get("/admin/").content.decode()
    assert reverse("admin:queue-health") not in index
    assert "Queue health" not in index


def test_queue_health_needs_its_permission_not_a_view_permission(client, make_user, busy):
    staff = make_user("viewer", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_endpoint"))
    client.force_login(staff)
    assert client.get(reverse("admin:queue-health")).status_code == 403

    staff.user_permissions.add(Permission.objects.get(codename="view_queue_health"))
    staff = get_user_model().objects.get(pk=staff.pk)  # a fresh permission cache
    client.force_login(staff)
    response = client.get(reverse("admin:queue-health"))
    assert response.status_code == 200
    assert "one" in response.content.decode()  # the busy endpoints' agent ids


def test_an_operator_cannot_change_a_user(client, operator, user, superuser):
    client.force_login(operator)
    change = reverse("admin:auth_user_change", args=[user.pk])
    before = get_user_model().objects.values().get(pk=user.pk)

    page = client.get(change)
    body = page.content.decode()
    assert page.status_code == 200
    assert user.username in body
    assert 'name="_save"' not in body  # a view, not a form
    assert "../password/" not in body and "Reset password" not in body  # no password field
    assert 'name="is_staff"' not in body and 'name="user_permissions"' not in body
    posted = client.post(
        change,
        {"username": user.username, "is_staff": "on", "is_superuser": "on", "is_active": "on"},
    )
    assert posted.status_code == 403
    password = reverse("admin:auth_user_password_change", args=[user.pk])
    assert client.get(password).status_code == 403
    posted = client.post(password, {"password1": "new one long", "password2": "new one long"})
    assert posted.status_code == 403
    assert client.get(reverse("admin:auth_user_add")).status_code == 403
    # Not themselves either: no way to a staff flag, a group or a permission.
    own = reverse("admin:auth_user_change", args=[operator.pk])
    assert client.post(own, {"username": "ops", "is_superuser": "on"}).status_code == 403
    assert get_user_model().objects.values().get(pk=user.pk) == before
    assert not get_user_model().objects.get(pk=operator.pk).is_superuser


def test_a_superuser_still_changes_users_and_sees_the_password_field(signed_in, user):
    body = signed_in.get(reverse("admin:auth_user_change", args=[user.pk])).content.decode()
    assert 'name="_save"' in body and "../password/" in body
    assert (
        signed_in.get(reverse("admin:auth_user_password_change", args=[user.pk])).status_code == 200
    )


def test_an_operator_may_revoke_an_endpoint(client, operator, endpoint, make_todo):
    make_todo("pending")
    client.force_login(operator)
    changelist = reverse("admin:queues_endpoint_changelist")
    assert "revoke_endpoints" in client.get(changelist).content.decode()

    response = client.post(
        changelist,
        {"action": "revoke_endpoints", "_selected_action": [str(endpoint.pk)], "confirmed": "yes"},
    )

    assert response.status_code == 302
    assert Endpoint.objects.get(pk=endpoint.pk).revoked_at is not None


def test_an_operator_pauses_and_resumes_endpoints_as_metadata(
    client, operator, endpoint, make_endpoint, make_todo
):
    held = make_todo("held")
    transitions.claim_next(Actor.agent(endpoint))
    other = make_endpoint("agent-b")
    gone = make_endpoint("agent-gone")
    transitions.revoke_endpoint(None, gone)
    client.force_login(operator)
    changelist = reverse("admin:queues_endpoint_changelist")
    page = client.get(changelist).content.decode()
    assert "pause_endpoints" in page and "resume_endpoints" in page
    chosen = [str(endpoint.pk), str(other.pk), str(gone.pk)]

    response = client.post(
        changelist, {"action": "pause_endpoints", "_selected_action": chosen}, follow=True
    )

    assert [str(m) for m in response.context["messages"]] == [
        "Paused 2 endpoints. 1 revoked: left alone."
    ]
    paused = dict(Endpoint.objects.values_list("agent_id", "paused_by"))
    assert paused == {"agent-a": operator.pk, "agent-b": operator.pk, "agent-gone": None}
    assert Todo.objects.get(pk=held.id).state == "claimed"  # the lease is kept
    assert transitions.claim_next(Actor.agent(Endpoint.objects.get(pk=other.pk))) is None
    assert list(TodoEvent.objects.filter(kind="pause").values_list("actor_user", flat=True)) == [
        operator.pk,
        operator.pk,
    ]
    assert "paused" in client.get(f"{changelist}?status=paused").content.decode()

    again = client.post(
        changelist, {"action": "pause_endpoints", "_selected_action": chosen[:1]}, follow=True
    )
    assert [str(m) for m in again.context["messages"]] == [
        "Paused 0 endpoints. 1 already paused: unchanged."
    ]
    client.post(changelist, {"action": "resume_endpoints", "_selected_action": chosen})
    assert not Endpoint.objects.filter(paused_at__isnull=False).exists()


def test_without_the_pause_permission_there_is_no_pause_action(client, make_user, endpoint):
    staff = make_user("viewer", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename="view_endpoint"))
    client.force_login(staff)
    changelist = reverse("admin:queues_endpoint_changelist")
    assert "pause_endpoints" not in client.get(changelist).content.decode()
    response = client.post(
        changelist, {"action": "pause_endpoints", "_selected_action": [str(endpoint.pk)]}
    )
    assert response.status_code < 500
    assert Endpoint.objects.get(pk=endpoint.pk).paused_at is None


def test_the_change_permission_alone_does_not_give_the_revoke_action(client, make_user, endpoint):
    staff = make_user("changer", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_endpoint", "change_endpoint"])
    )
    client.force_login(staff)
    changelist = reverse("admin:queues_endpoint_changelist")
    assert "revoke_endpoints" not in client.get(changelist).content.decode()
    response = client.post(
        changelist,
        {"action": "revoke_endpoints", "_selected_action": [str(endpoint.pk)], "confirmed": "yes"},
    )
    assert response.status_code < 500
    assert Endpoint.objects.get(pk=endpoint.pk).revoked_at is None


# ---------------------------------------------------------------------------------------
# Hostile query strings (issue 10): a 400 or a friendly page, never a 500

CHANGELISTS = {
    "team": "/admin/queues/team/",
    "endpoint": "/admin/queues/endpoint/",
    "todo": "/admin/queues/todo/",
    "deadlettersink": "/admin/queues/deadlettersink/",
    "user": "/admin/auth/user/",
}
HOSTILE_QUERIES = [
    "%00",
    "%00=%00",
    "%C2%B2",
    "%FF",
    "%FF=%FF",
    "q=" + "a" * 10_000,
    "q=" + "a%20" * 2_000,
    "q=%00",
    "q=%FF",
    "q=%22",
    "o=999",
    "o=-1.x",
    "o=1.2.%00",
    "p=-1",
    "p=%C2%B2",
    "p=99999999999999999999999",
    "e=1",
    "all=",
    "_facets=1&team=%C2%B2",
    "_popup=1",
    "_to_field=token_hash",
    "_changelist_filters=",
    "id__exact=x",
    "id__exact=%00",
    "team=%C2%B2",
    "team=%00",
    "team=-1",
    "team=99999999999999999999999",
    "endpoint=%C2%B2",
    "endpoint=%00",
    "endpoint=99999999999999999999",
    "status=%00",
    "state__exact=%00",
    "state__exact=%FF",
    "dead_letter_reason__exact=%00",
    "personal__exact=%00",
    "personal__exact=%C2%B2",
    "active__exact=%00",
    "slug=%00",
    "agent_id=%00",
    "username=%00",
    "groups__id__exact=%C2%B2",
    "is_staff__exact=%00",
    "title__icontains=%00",
    "endpoint__team__slug=%00",
]
OBJECT_IDS = ["-1", "0", "99999999999999999999", "9223372036854775808", "%00", "%C2%B2", "%FF"]
OBJECT_PAGES = ["change/", "history/", "delete/", "password/"]


def _hostile_urls(changelist: str, object_id: int) -> list[str]:
    urls = [f"{changelist}?{query}" for query in HOSTILE_QUERIES]
    for page in OBJECT_PAGES if changelist.endswith("/user/") else OBJECT_PAGES[:3]:
        urls += [f"{changelist}{bad}/{page}" for bad in OBJECT_IDS]
        urls += [
            f"{changelist}{object_id}/{page}?_changelist_filters={quoted}"
            for quoted in ("%00", "team%3D%25C2%25B2", "q%3D%2500", "%FF")
        ]
    return urls


def _status_codes(client, urls: list[str]) -> dict[str, int]:
    """Each request in a savepoint of its own, so that a database error in one (which
    aborts the transaction) cannot hide what the next would do."""
    client.raise_request_exception = False
    found = {}
    for url in urls:
        savepoint = transaction.savepoint_create()
        found[url] = client.get(url).status_code
        transaction.savepoint_rollback(savepoint)
    return found


@pytest.mark.parametrize("model", list(CHANGELISTS))
def test_hostile_query_strings_never_make_a_500(client, staff, seeded, user, model):
    object_id = {
        "team": seeded["endpoint"].team_id,
        "endpoint": seeded["endpoint"].pk,
        "todo": seeded["todos"][0].id,
        "deadlettersink": seeded["sink"].pk,
        "user": user.pk,
    }[model]
    urls = _hostile_urls(CHANGELISTS[model], object_id)
    if model == "todo":  # the models whose pages it names have autocompletes
        urls += [
            f"/admin/autocomplete/?app_label=queues&model_name={source}&field_name={field}"
            f"&term={term}"
            for source, field in (("todo", "endpoint"), ("endpoint", "team"), ("todo", "requester"))
            for term in ("%00", "%FF", "a%20" * 2_000, "%C2%B2")
        ]
        urls += [f"/admin/queue-health/?{query}" for query in HOSTILE_QUERIES[:5]]

    codes = _status_codes(client, urls)

    assert {url[:120]: code for url, code in codes.items() if code >= 500} == {}


@pytest.mark.parametrize("query", ["team=%C2%B2", "endpoint=%C2%B2", "team=1%C2%B2"])
def test_an_id_filter_that_is_not_an_id_is_an_invalid_filter(signed_in, seeded, query):
    response = signed_in.get(f"/admin/queues/todo/?{query}")
    # Django's answer to an invalid filter: the unfiltered list, flagged.
    assert response.status_code == 302
    assert response["Location"] == "/admin/queues/todo/?e=1"
    assert signed_in.get(response["Location"]).status_code == 200


def test_an_id_filter_still_filters(signed_in, seeded, make_endpoint, team):
    other = make_endpoint("other")
    transitions.create_todo(Actor.agent(other), title="another")
    response = signed_in.get(f"/admin/queues/todo/?endpoint={other.pk}")
    assert response.context["cl"].result_count == 1
    response = signed_in.get(f"/admin/queues/todo/?team={team.pk}")
    assert response.context["cl"].result_count == 4


@pytest.mark.parametrize(
    ("changelist", "query"),
    [
        ("todo", f"title__icontains={MARKERS['title']}"),
        ("todo", f"body__contains={MARKERS['body']}"),
        ("todo", f"idempotency_key={MARKERS['idempotency_key']}"),
        ("todo", "owner__startswith=agent"),
        ("endpoint", "notify_secret__startswith=M"),
        ("endpoint", "token_hash__startswith=a"),
        ("endpoint", "notify_url__contains=MARKER"),
        ("deadlettersink", "secret__startswith=M"),
        ("deadlettersink", "url__contains=MARKER"),
        ("team", "name__startswith=a"),
    ],
)
def test_a_filter_over_a_column_the_page_hides_is_refused(staff, client, seeded, changelist, query):
    """``?title__icontains=X`` would say whether a todo titled X exists: an oracle for the
    text itself (and for a secret, one character at a time)."""
    response = client.get(f"/admin/queues/{changelist}/?{query}")
    assert response.status_code == 400


def test_a_search_of_too_many_words_finds_nothing_and_says_so(signed_in, seeded):
    changelist = reverse("admin:queues_todo_changelist")
    assert signed_in.get(changelist, {"q": "marked-agent"}).context["cl"].result_count == 3

    response = signed_in.get(changelist, {"q": " ".join(["marked-agent"] * 9)})

    assert response.status_code == 200
    assert response.context["cl"].result_count == 0
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Search for at most 8 words of 256 characters in all."
    ]
