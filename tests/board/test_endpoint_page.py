"""The endpoint page's health at a glance (queues/endpoint_health.py, board/charts.py) and
pausing and resuming an endpoint from the Board: owners only, CSRF, stale and hostile input,
tenancy; its statements' plans and query count; and the page in a browser."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from switchboard.board import charts
from switchboard.queues import endpoints, sql, teams, transitions
from switchboard.queues.endpoint_health import endpoint_health
from switchboard.queues.models import Endpoint, Membership, TodoEvent
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in
from tests.queues.helpers import analyze, lapse_lease


@pytest.fixture
def shared_team(user, team, make_user):
    """A team alice owns with carol as a plain member."""
    platform = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(platform, user, role=Membership.Role.OWNER)
    carol = make_user("carol")
    teams.add_member(platform, carol)
    return platform, carol


def _messages(response) -> list[str]:
    """The messages this response added (earlier ones wait unread in the test client)."""
    return [str(m) for m in get_messages(response.wsgi_request)][-1:]


def _ended_ago(todo_id: int, seconds: int, took: int = 4) -> None:
    """Move a todo's newest ended try back in time: it ended ``seconds`` ago, ``took`` after
    its claim (the clock is the database's; a test cannot wait an hour)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todo_attempts SET ended_at = statement_timestamp() - make_interval(secs => %s),"
            " claimed_at = statement_timestamp() - make_interval(secs => %s)"
            " WHERE todo_id = %s AND seq = (SELECT max(seq) FROM todo_attempts"
            " WHERE todo_id = %s AND ended_at IS NOT NULL)",
            [seconds, seconds + took, todo_id, todo_id],
        )
        assert cursor.rowcount == 1


def _history(endpoint, agent, make_todo) -> dict:
    """Tries that ended now, 30 minutes ago and 5 hours ago; a claimed, a waiting retry, a
    dead letter and two claimable todos left."""
    made = {}
    for title, ago, took in (("now", 0, 2), ("half hour", 1800, 10), ("hours", 5 * 3600, 30)):
        todo = make_todo(title)
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
        _ended_ago(todo.id, ago, took)
        made[title] = todo
    failing = make_todo("failing", max_attempts=5)
    transitions.claim(agent, failing.id)
    transitions.fail(agent, failing.id)
    dying = make_todo("dying", max_attempts=1)
    transitions.claim(agent, dying.id)
    lapse_lease(dying.id)
    transitions.reap_lapsed()  # died at the cap: a dead letter
    made["held"] = make_todo("held")
    transitions.claim(agent, made["held"].id)
    transitions.heartbeat(agent, made["held"].id)
    make_todo("waiting one")
    make_todo("waiting two")
    return made


# --- The numbers


def test_health_counts_the_queue_now_and_the_endings_by_when(endpoint, agent, make_todo):
    _history(endpoint, agent, make_todo)

    health = endpoint_health(endpoint)

    assert (health.claimable, health.held, health.retry_wait, health.scheduled) == (2, 1, 1, 0)
    assert health.oldest_claimable_age is not None
    minute, hour = health.per_minute, health.per_hour
    assert len(minute.completed) == 60 and len(hour.completed) == 24
    # Now: one completed, one failed, one died; 30 minutes ago one completed; 5 h ago one.
    assert (minute.completed[-1], minute.failed[-1], minute.died[-1]) == (1, 1, 1)
    assert minute.completed[60 - 1 - 30] == 1 and sum(minute.completed) == 2
    assert hour.completed[-1] == 2 and hour.completed[24 - 1 - 5] == 1
    assert hour.totals == {"completed": 3, "failed": 1, "died": 1}
    assert health.completed_last_day == 3
    assert health.took_p50 == pytest.approx(10, abs=0.01)  # of 2, 10 and 30 seconds
    assert health.took_p95 == pytest.approx(28, abs=0.01)
    assert health.last_claim_at is not None and health.last_heartbeat_at is not None


def test_an_endpoint_with_nothing_yet_is_all_zero(endpoint):
    health = endpoint_health(endpoint)
    assert (health.claimable, health.held, health.completed_last_day) == (0, 0, 0)
    assert health.took_p50 is None and health.last_claim_at is None
    chart = charts.per_minute(health.per_minute)
    assert chart.empty and chart.summary == "Last hour, per minute: no tries ended."


def test_older_endings_and_a_persons_tries_are_not_counted(user, endpoint, agent, make_todo):
    old = make_todo("last week")
    transitions.claim(agent, old.id)
    transitions.complete(agent, old.id)
    _ended_ago(old.id, 7 * 86400)
    by_hand = make_todo("by hand")
    person = transitions.Actor.human(user)
    transitions.claim(person, by_hand.id)
    transitions.complete(person, by_hand.id)

    health = endpoint_health(endpoint)

    assert health.completed_last_day == 0 and health.per_hour.totals["completed"] == 0
    assert health.last_claim_at is None  # a week ago is not read


def test_the_chart_stacks_each_bucket_bottom_up_with_words():
    from switchboard.queues.endpoint_health import Endings

    endings = Endings.empty(3)
    endings.completed[2], endings.failed[2], endings.died[0] = 3, 1, 2
    chart = charts.per_hour(endings)
    newest = chart.bars[-1]
    assert newest.title == "the last hour: 3 completed, 1 failed"
    assert [(s.kind, s.y, s.height) for s in newest.segments] == [
        ("completed", "15", "45"),
        ("failed", "0", "15"),
    ]
    assert chart.bars[0].title == "2–3 h ago: 2 died"
    assert chart.peak == 4 and not chart.empty
    assert chart.summary == (
        "Last day, per hour: 3 completed, 1 failed, 2 died; the busiest hour had 4."
    )


# --- Cheap at any size: the plans and the query count


def _explain(statement, endpoint_id: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement.text, {"endpoint_id": endpoint_id})
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_health_statements_read_through_their_indexes(team, endpoint):
    """A ledger of 30,000 finished todos over 20 endpoints, a few of them ended in the last
    day: both statements are index scans (never a scan of todos or todo_attempts)."""
    others = [endpoints.vend(team, f"bulk-{n}")[0].pk for n in range(19)]
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH t AS (
                INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,
                                   attempt, failures, round, last_attempt_seq, attempts_pruned,
                                   owner, dead_letter_reason, created_at, updated_at, ended_at)
                SELECT (%(eps)s::bigint[])[1 + g %% 20], 't', '', 0, 'done', 5, 1, 0, 1, 1, 0,
                       '', '', ts, ts, ts
                  FROM generate_series(1, 30000) g,
                       LATERAL (SELECT now() - interval '30 days' + g * interval '90 s') x(ts)
                RETURNING id, endpoint_id, ended_at
            )
            INSERT INTO todo_attempts (
                todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id,
                mcp_session_id, mcp_session_id_truncated, mcp_session_id_bytes, owner,
                claimant, claimant_truncated, claimant_bytes, claimed_at, last_heartbeat_at,
                lease_expires_at, ended_at, outcome, disposition, ended_by_id, summary,
                summary_truncated, summary_bytes, artifact, artifact_truncated,
                artifact_bytes, result, lease_token_hash)
            SELECT t.id, 1, 1, 1, 'endpoint', t.endpoint_id, NULL, '', false, 0, 'agent:x',
                   '', false, 0, t.ended_at - interval '5 s', NULL,
                   t.ended_at + interval '300 s', t.ended_at, 'completed', 'done', NULL, NULL,
                   false, 0, NULL, false, 0, NULL, NULL
              FROM t
            """,
            {"eps": [endpoint.pk, *others]},
        )
        analyze(cursor, "todos", "todo_attempts")

    endings = _explain(sql.ENDPOINT_ENDINGS, endpoint.pk)
    assert "todo_attempts_endpoint_ended" in endings, endings
    assert "Seq Scan" not in endings and "todo_attempts_ended_recent" not in endings, endings
    assert "endpoint_id <=" in endings, endings  # bounded at the endpoint's last entry
    now = _explain(sql.ENDPOINT_QUEUE_NOW, endpoint.pk)
    assert "todos_claimable" in now and "Seq Scan" not in now, now


# session, user (with their teams), the endpoint (with its team and who paused it), its todos
# by state, its newest doorbell, the queue now, the day's endings, "is an owner", its
# schedules (however many: their next runs are computed, not read)
PAGE_QUERIES = 9


@pytest.mark.parametrize("paused", [False, True])
def test_the_page_query_count_is_fixed(
    logged_in, user, endpoint, agent, make_todo, paused, django_assert_num_queries
):
    _history(endpoint, agent, make_todo)
    if paused:
        endpoints.pause(endpoint, user=user)
        from switchboard.queues import schedules

        for n in range(3):
            schedules.add(
                endpoint, by=user, name=f"s{n}", cron="*/5 * * * *", title_template="t {date}"
            )
    with django_assert_num_queries(PAGE_QUERIES):
        response = logged_in.get(reverse("endpoint-detail", args=[endpoint.pk]))
    assert response.status_code == 200


# --- The page


def test_the_page_shows_health_and_both_charts(logged_in, endpoint, agent, make_todo):
    _history(endpoint, agent, make_todo)
    body = logged_in.get(reverse("endpoint-detail", args=[endpoint.pk])).content.decode()
    assert "claimable now" in body and "the oldest waiting" in body
    assert "claim to complete, p50" in body and "p95 28s" in body
    assert 'aria-label="Last hour, per minute: 2 completed, 1 failed, 1 died;' in body
    assert 'aria-label="Last day, per hour: 3 completed, 1 failed, 1 died;' in body
    assert "<title>the last minute: 1 completed, 1 failed, 1 died</title>" in body
    assert 'class="chip chip-active"' in body and "Pause claims" in body
    assert "state=dead" in body  # the dead count links to the dead letters


def test_an_idle_endpoint_with_work_waiting_asks_about_its_agents(
    logged_in, endpoint, agent, make_todo
):
    todo = make_todo("stuck")
    transitions.claim(agent, todo.id)
    transitions.release(agent, todo.id)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todo_attempts SET claimed_at = claimed_at - interval '2 hours',"
            " ended_at = ended_at - interval '2 hours'"
        )
    body = logged_in.get(reverse("endpoint-detail", args=[endpoint.pk])).content.decode()
    assert "are its agents running?" in body


# --- Pause and resume from the Board


def test_an_owner_pauses_and_resumes_with_a_banner_here_and_on_the_queue(
    logged_in, user, endpoint, make_todo
):
    make_todo("waits")
    detail = reverse("endpoint-detail", args=[endpoint.pk])
    response = logged_in.post(reverse("endpoint-pause", args=[endpoint.pk]))
    assert response.status_code == 302 and response["Location"] == detail
    assert _messages(response) == []  # the page's banner says it, once
    assert Endpoint.objects.get(pk=endpoint.pk).paused_by == user
    page = logged_in.get(detail).content.decode()
    assert 'class="banner paused"' in page and "chip-paused" in page and "by alice" in page
    queue = logged_in.get(f"/queue/?endpoint={endpoint.pk}").content.decode()
    assert "agent-a is paused" in queue
    assert "is paused" not in logged_in.get("/queue/").content.decode()  # unfiltered: no banner
    assert "chip-paused" in logged_in.get(reverse("endpoint-list")).content.decode()

    response = logged_in.post(reverse("endpoint-resume", args=[endpoint.pk]))
    assert _messages(response) == [
        "agent-a resumed: its agents claim again (waiting long-polls were woken)."
    ]
    assert 'class="banner paused"' not in logged_in.get(detail).content.decode()
    assert list(TodoEvent.objects.filter(kind__in=["pause", "resume"]).values_list("kind")) == [
        ("pause",),
        ("resume",),
    ]


def test_a_repeated_pause_or_resume_changes_nothing_and_says_so(logged_in, endpoint):
    logged_in.post(reverse("endpoint-pause", args=[endpoint.pk]))
    again = logged_in.post(reverse("endpoint-pause", args=[endpoint.pk]))
    assert _messages(again) == ["agent-a was already paused; nothing changed."]
    logged_in.post(reverse("endpoint-resume", args=[endpoint.pk]))
    again = logged_in.post(reverse("endpoint-resume", args=[endpoint.pk]))
    assert _messages(again) == ["agent-a was not paused; nothing changed."]
    assert TodoEvent.objects.filter(kind__in=["pause", "resume"]).count() == 2


def test_a_revoked_endpoint_offers_no_pause_and_refuses_one(logged_in, endpoint):
    transitions.revoke_endpoint(None, endpoint)
    detail = reverse("endpoint-detail", args=[endpoint.pk])
    assert "Pause claims" not in logged_in.get(detail).content.decode()
    response = logged_in.post(reverse("endpoint-pause", args=[endpoint.pk]))
    assert _messages(response) == ["A revoked endpoint cannot be paused."]
    assert Endpoint.objects.get(pk=endpoint.pk).paused_at is None


def test_a_member_who_is_not_an_owner_may_not_pause(client, shared_team, vend):
    platform, carol = shared_team
    endpoint, _ = vend("shared-agent", team=platform)
    client.force_login(carol)
    page = client.get(reverse("endpoint-detail", args=[endpoint.pk])).content.decode()
    assert "Only an owner of Platform may pause or resume" in page and "Pause claims" not in page
    response = client.post(reverse("endpoint-pause", args=[endpoint.pk]))
    assert _messages(response) == ["Only an owner of Platform may pause its endpoints."]
    endpoints.pause(endpoint)
    response = client.post(reverse("endpoint-resume", args=[endpoint.pk]))
    assert _messages(response) == ["Only an owner of Platform may resume its endpoints."]
    assert Endpoint.objects.get(pk=endpoint.pk).paused_at is not None
    assert not TodoEvent.objects.filter(kind__in=["pause", "resume"], actor_user=carol).exists()


def test_a_foreign_endpoints_pause_answers_like_an_unknown_one(logged_in, make_user, vend):
    bob = make_user("bob")
    foreign, _ = vend("bobs-agent", team=bob.teams.get())
    for name in ("endpoint-pause", "endpoint-resume"):
        seen = logged_in.post(reverse(name, args=[foreign.pk]))
        unknown = logged_in.post(reverse(name, args=[foreign.pk + 1000]))
        assert seen.status_code == unknown.status_code == 404
        assert seen.content == unknown.content
    assert Endpoint.objects.get(pk=foreign.pk).paused_at is None


def test_bad_requests_change_nothing(logged_in, user, endpoint):
    pause = reverse("endpoint-pause", args=[endpoint.pk])
    assert logged_in.get(pause).status_code == 405
    assert logged_in.post(f"/endpoints/{endpoint.pk}/pause-everything/").status_code == 404
    assert logged_in.post("/endpoints/99999999999999999999/pause/").status_code == 404
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    for name in ("endpoint-pause", "endpoint-resume"):
        assert strict.post(reverse(name, args=[endpoint.pk])).status_code == 403
    assert Endpoint.objects.get(pk=endpoint.pk).paused_at is None
    assert not TodoEvent.objects.filter(kind="pause").exists()


# --- In a browser


@pytest.mark.django_db(transaction=True)
def test_the_endpoint_page_in_a_browser(page, user, endpoint, agent, make_todo):
    _history(endpoint, agent, make_todo)
    sign_in(page, "alice")
    page.goto(f"/endpoints/{endpoint.pk}/")
    health = page.locator("section.health")
    expect(health.locator(".stat").first).to_contain_text("claimable now")
    expect(health.locator("svg.chart")).to_have_count(2)
    bars = health.locator("svg.chart").first.locator("rect.c-completed")
    expect(bars).to_have_count(2)  # now and 30 minutes ago
    assert bars.first.bounding_box()["height"] > 0

    page.get_by_role("button", name="Pause claims").click()
    expect(page.locator(".banner.paused .chip-paused")).to_have_text("paused")
    expect(page.locator(".flash")).to_have_count(0)  # the banner says it, once
    assert transitions.claim_next(Actor.agent(Endpoint.objects.get(pk=endpoint.pk))) is None
    page.goto(f"/queue/?endpoint={endpoint.pk}")
    expect(page.locator(".banner.paused")).to_contain_text("agent-a is paused")
    page.get_by_role("link", name="its page").click()
    page.locator(".banner.paused").get_by_role("button", name="Resume").click()
    expect(page.locator(".banner.paused")).to_have_count(0)
    expect(page.locator(".flash")).to_contain_text("agent-a resumed")
    assert page.js_errors == []
