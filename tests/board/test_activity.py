"""Activity: attempt endings and people's actions as sentences, scoped to the user's teams."""

from __future__ import annotations

import re
from datetime import UTC

import pytest
from django.test import Client

from queues import transitions
from queues.models import TodoAttempt
from queues.transitions import Actor
from tests.board.history import done_with_history


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


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
    transitions.rerun(user, todo_id)
    make_todo("left pending")
    transitions.revoke_endpoint(endpoint, user=user)
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
        todo, _ = transitions.create_todo(endpoint=endpoint, title=f"bulk {n}")
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
    # session, user (with their teams), the filters' endpoints and people, attempt endings
    # (with todo, endpoint, user), events (with actors)
    with django_assert_num_queries(6):
        signed_in.get("/activity/")


def test_team_level_events_read_as_sentences(signed_in, team, user, endpoint):
    from queues import endpoints, teams

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
    todo, _ = transitions.create_todo(endpoint=endpoint, title="sent over", requester=sender)
    transitions.claim(Actor.agent(endpoint), todo.id, claimant="run-5")
    transitions.cancel(Actor.agent(sender), todo.id)
    page = _text(signed_in.get("/activity/").content.decode())
    assert f"sender (requester) canceled #{todo.id} ‘sent over’" in page
    assert "run-5 was canceled" not in page


def test_every_audit_kind_has_words():
    """A kind added to EventKind without a sentence would fail here, not on someone's Board."""
    from board import sentences
    from queues.models import EventKind

    for kind in sentences._TEAM_KINDS:
        assert sentences._team_event(kind, {"agent_id": "a", "host": "h", "username": "u"})
    assert set(sentences._TODO_EVENT_VERBS) | sentences._TEAM_KINDS == set(EventKind)


def test_a_person_in_several_teams_gets_the_newest_events_of_all_of_them(user, team):
    """The newest events are taken team by team (each team's own index walk), then merged:
    the newest ``limit`` across the teams, newest first, and none of a team the person is not
    in."""
    from queues import endpoints, teams
    from queues.models import EventKind, Membership
    from queues.selectors import board_activity

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
