"""Activity: attempt endings and people's actions as sentences, scoped to the user's teams."""

from __future__ import annotations

import re
from datetime import UTC

from django.db import connection
from django.test import Client
from django.utils import timezone

from switchboard.queues import transitions
from switchboard.queues.models import TodoAttempt
from switchboard.queues.transitions import Actor
from tests.board.history import done_with_history
from tests.queues.helpers import analyze


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).replace("&#x27;", "'")


def test_a_died_try_reads_as_a_sentence(signed_in, endpoint, user):
    todo_id = done_with_history(endpoint, user)
    died = TodoAttempt.objects.get(todo_id=todo_id, seq=2)
    # The full date and time in UTC without JavaScript (time.js shows the reader's zone).
    at = died.last_heartbeat_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    page = _text(signed_in.get("/activity/").content.decode())
    assert (
        f"try 2 of #{todo_id} ‘rebuild docs’ by harness/buildbox/ci-fixer/run-42 died after "
        f"its last heartbeat at {at} — reaped, requeued"
    ) in page
    assert (
        f"try 1 of #{todo_id} ‘rebuild docs’ by harness/buildbox/ci-fixer/run-41 failed — retry scheduled"
        in page
    )
    assert f"alice released #{todo_id} ‘rebuild docs’ — requeued" in page
    assert (
        f"try 4 of #{todo_id} ‘rebuild docs’ by harness/buildbox/ci-fixer/run-43 completed" in page
    )
    # the person's release is told once, by the event, not also as an attempt ending
    assert page.count("released") == 1


def test_rerun_and_revocation_are_told(signed_in, endpoint, user, make_todo):
    todo_id = done_with_history(endpoint, user)
    transitions.rerun(Actor.human(user), todo_id)
    make_todo("left pending")
    transitions.revoke_endpoint(Actor.human(user), endpoint)
    page = _text(signed_in.get("/activity/").content.decode())
    assert f"alice reran #{todo_id} ‘rebuild docs’ — a new round" in page
    assert "alice revoked endpoint agent-a; 2 todos dead-lettered" in page
    assert "‘left pending’ — its endpoint was revoked" in page


def test_activity_is_scoped_and_pages(make_user, endpoint, user):
    done_with_history(endpoint, user, title="alice only")
    mallory = Client()
    mallory.force_login(make_user("mallory"))
    assert "alice only" not in mallory.get("/activity/").content.decode()
    alice = Client()
    alice.force_login(user)
    agent = Actor.agent(endpoint)
    for n in range(55):
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title=f"bulk {n}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
    first = alice.get("/activity/").content.decode()
    older = re.search(r'href="(\?before=[^"]+)"', first).group(1).replace("&amp;", "&")
    second = alice.get("/activity/" + older).content.decode()
    assert "bulk 54" in first and "bulk 54" not in second and "alice only" in second
    assert alice.get("/activity/?before=garbage").status_code == 200


def test_activity_query_count(signed_in, endpoint, user, django_assert_num_queries):
    for n in range(3):
        done_with_history(endpoint, user, title=f"t{n}")
    # session, user (with their teams), the filters' endpoints and people, the feed (attempt
    # endings with todo, endpoint and user beside events with actors: one statement)
    with django_assert_num_queries(5):
        signed_in.get("/activity/")


def test_team_level_events_read_as_sentences(signed_in, team, user, endpoint):
    from switchboard.queues import endpoints, teams

    endpoints.set_notify_url(endpoint, "https://hooks.example.com/a/b", user=user)
    endpoints.set_notify_url(endpoint, "", user=user)
    sink, _secret = teams.add_sink(team, "https://sinks.example.com/x", by=user)
    teams.remove_sink(sink, by=user)
    page = _text(signed_in.get("/activity/").content.decode())
    assert "alice set the notify URL of agent-a to hooks.example.com" in page
    assert "alice cleared the notify URL of agent-a" in page
    assert "alice added a dead-letter sink (sinks.example.com)" in page
    assert "alice removed the dead-letter sink (sinks.example.com)" in page
    assert "/a/b" not in page and "/x" not in page


def test_a_requesters_cancel_is_told_once_and_credited_to_the_requester(
    signed_in, endpoint, make_endpoint
):
    sender = make_endpoint("sender")
    todo, _ = transitions.create_todo(Actor.agent(sender), endpoint=endpoint, title="sent over")
    transitions.claim(Actor.agent(endpoint), todo.id, claimant="run-5")
    transitions.cancel(Actor.agent(sender), todo.id)
    page = _text(signed_in.get("/activity/").content.decode())
    assert f"sender (requester) canceled #{todo.id} ‘sent over’" in page
    assert "run-5 was canceled" not in page


def test_every_audit_kind_has_words():
    """A kind added to EventKind without a sentence would fail here, not on someone's Board."""
    from switchboard.board import sentences
    from switchboard.queues.models import EventKind

    for kind in sentences._TEAM_KINDS:
        assert sentences._team_event(kind, {"agent_id": "a", "host": "h", "username": "u"})
    assert set(sentences._TODO_EVENT_VERBS) | sentences._TEAM_KINDS == set(EventKind)


def test_a_person_in_several_teams_gets_the_newest_events_of_all_of_them(user, team):
    """The newest events are taken team by team (each team's own index walk), then merged:
    the newest ``limit`` across the teams, newest first, and none of a team the person is not
    in."""
    from switchboard.queues import endpoints, teams
    from switchboard.queues.models import EventKind, Membership
    from switchboard.queues.selectors import board_activity

    platform = teams.get_or_create_team("platform", name="Platform")
    Membership.objects.create(team=platform, user=user, role=Membership.Role.OWNER)
    elsewhere = teams.get_or_create_team("elsewhere", name="Elsewhere")
    written = []
    for n in range(6):  # interleaved in time: mine, platform's, one nobody here reads
        for where in (team, platform, elsewhere):
            endpoint, _ = endpoints.vend(where, f"{where.slug}-{n}", verbs="all")
            written.append((where.pk, endpoint.agent_id))
    items = board_activity([team.pk, platform.pk], limit=5)
    events = [
        a.event for a in items if a.event is not None and a.event.kind == EventKind.ENDPOINT_VEND
    ]
    assert len(events) == len(items) == 5
    newest_mine = [agent for team_id, agent in reversed(written) if team_id != elsewhere.pk][:5]
    assert [e.detail["agent_id"] for e in events] == newest_mine


def _plan(statement, params) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement.text, params)
        return "\n".join(line for (line,) in cursor.fetchall())


def test_the_feed_walks_its_indexes_newest_first(team, endpoint, user):
    """The two reads of queues/sql/activity.py over 20,000 ended attempts and 3,000 events,
    analyzed: the endings walk each of the team's endpoints' todo_attempts_endpoint_ended and
    the people's todo_attempts_owner_lapsed newest first, never the global
    todo_attempts_ended_recent (through every other team's endings: a small team's page took
    400-525 ms beside a team with 100,000 todos), and the events each team's
    todo_events_team_recent; no sequential scan; a todo filter reads that todo's attempts by
    the (todo_id, seq) index. Each absent filter is folded away (custom plans: the statements
    are not prepared)."""
    from switchboard.queues import sql

    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason, ended_at)"
            " SELECT %s, 'chore ' || g, '', 0, 'done', 5, 1, 0, 1, 1, 0, '', '', now()"
            " FROM generate_series(1, 20000) g",
            [endpoint.pk],
        )
        cursor.execute(
            "INSERT INTO todo_attempts (todo_id, seq, round, attempt, claimer_kind,"
            " endpoint_id, mcp_session_id, mcp_session_id_truncated, mcp_session_id_bytes,"
            " owner, claimant, claimant_truncated, claimant_bytes, claimed_at,"
            " lease_expires_at, ended_at, outcome, disposition, summary_truncated,"
            " summary_bytes, artifact_truncated, artifact_bytes)"
            " SELECT t.id, 1, 1, 1, 'endpoint', %s, '', false, 0, 'agent:x', '', false, 0,"
            " now(), now(), now() - t.id * interval '1 ms', 'completed', 'done', false, 0,"
            " false, 0 FROM todos t",
            [endpoint.pk],
        )
        cursor.execute(
            "INSERT INTO todo_events (team_id, todo_id, kind, detail, created_at)"
            " SELECT %s, t.id, 'rerun', '{}', now() - t.id * interval '1 ms'"
            " FROM todos t WHERE t.id %% 7 = 0",
            [team.pk],
        )
        # Every table the reads join, so the planner sees this test's rows only (a table's
        # row count outlives a rolled-back test, and autovacuum analyzes what other tests
        # committed).
        analyze(cursor, "todos", "todo_attempts", "todo_events", "endpoints", "teams", "auth_user")
    params = {
        "team_ids": [team.pk],
        "before": None,
        "todo_id": None,
        "endpoint_id": None,
        "endpoint_team": None,
        "endpoint_agent": None,
        "person_id": None,
        "limit": 8,
        "endings": True,
        "outcomes": None,
        "events": True,
        "people_only": False,
    }
    endings = _plan(sql.ACTIVITY_ENDINGS, params)
    assert "todo_attempts_endpoint_ended" in endings, endings
    assert "todo_attempts_owner_lapsed" in endings, endings
    assert "todo_attempts_ended_recent" not in endings, endings
    events = _plan(sql.ACTIVITY_EVENTS, params)
    assert "todo_events_team_recent" in events, events
    one_todo = _plan(sql.ACTIVITY_ENDINGS, {**params, "todo_id": 7})
    assert "todo_attempts_todo_seq" in one_todo, one_todo
    for plan in (endings, events, one_todo):
        assert "Seq Scan on todo_attempts" not in plan, plan
        assert "Seq Scan on todos" not in plan and "Seq Scan on todo_events" not in plan, plan
    # An older page (at this size PostgreSQL may rather hash 20,000 todos and sort; over
    # 1,000,000 attempts it walks the index from there, docs/benchmarks.md): never every
    # attempt read.
    paged = _plan(sql.ACTIVITY_ENDINGS, {**params, "before": timezone.now(), "limit": 50})
    assert "Seq Scan on todo_attempts" not in paged, paged
