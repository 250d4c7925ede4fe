"""People in the drawer's history, read-only past rounds, and Activity's filters (issue 15)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from switchboard.board import drawer
from switchboard.queues import transitions
from switchboard.queues.models import TodoEvent
from switchboard.queues.selectors import board_todo
from switchboard.queues.transitions import Actor
from tests.board.history import done_with_history
from tests.board.pages import HTMX
from tests.queues.helpers import make_retry_due

pytestmark = pytest.mark.django_db


def _strip(d) -> list[str]:
    """The strip as words: "try 1 failed" for a try, "alice released try 2" for an act."""
    out = []
    for item in d.strip:
        if item.act:
            out.append(f"{item.act.who} {item.act.words}")
        elif item.attempt:
            out.append(f"try {item.attempt.attempt} {item.marker.kind}")
        else:
            out.append(f"+{item.hidden}")
    return out


def test_peoples_actions_stand_in_place_among_the_tries(endpoint, user, make_user):
    from switchboard.queues import teams

    bob = make_user("bob")
    teams.add_member(user.teams.get(), bob)
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(
        Actor.agent(endpoint), title="worked by people", max_attempts=5
    )
    transitions.claim(agent, todo.id, claimant="run-1")
    transitions.fail(agent, todo.id, summary="flaky")  # try 1 failed: retry wait
    transitions.retry_now(Actor.human(user), todo.id)  # alice: retry now
    transitions.claim(agent, todo.id, claimant="run-2")
    transitions.release(Actor.human(bob), todo.id)  # bob releases the agent's try 2
    transitions.claim(Actor.human(user), todo.id)  # alice claims by hand: try 3
    transitions.complete(Actor.human(user), todo.id, summary="done by hand")
    transitions.rerun(Actor.human(bob), todo.id)  # round 2
    transitions.claim(agent, todo.id, claimant="run-4")
    transitions.cancel(Actor.human(user), todo.id)  # alice cancels the agent's try
    d = drawer.build(board_todo(user, todo.id), user=user, round_param="1")
    assert _strip(d) == [
        "try 1 failed",
        "alice retried it now",
        "try 2 released",
        "bob released try 2",
        "alice claimed it by hand",
        "try 3 completed",
        "alice completed try 3",
        "bob reran it: a new round follows",
    ]
    d = drawer.build(board_todo(user, todo.id), user=user)
    assert d.round == 2 and _strip(d) == ["try 1 canceled", "alice canceled try 1"]


def test_an_act_breaks_a_collapsed_run(endpoint, user):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="churn")
    for n in range(12):
        transitions.claim(agent, todo.id)
        if n == 6:
            transitions.release(Actor.human(user), todo.id)
        else:
            transitions.release(agent, todo.id)
    d = drawer.build(board_todo(user, todo.id), user=user)
    words = _strip(d)
    assert "alice released try 7" in words
    # Runs on either side collapse on their own; the act is never hidden inside one.
    assert words[words.index("alice released try 7") - 1] == "try 7 released"


def test_the_drawer_page_shows_the_people(signed_in, endpoint, user):
    todo_id = done_with_history(endpoint, user)  # alice released try 3 along the way
    page = signed_in.get(f"/todos/{todo_id}/", **HTMX).content.decode()
    assert 'class="act"' in page and "alice released try 3" in page


def test_a_past_round_is_read_only_and_says_so(signed_in, endpoint, user):
    todo_id = done_with_history(endpoint, user)
    transitions.rerun(Actor.human(user), todo_id)  # round 2, pending: claim and cancel offered
    live = signed_in.get(f"/todos/{todo_id}/", **HTMX).content.decode()
    assert 'data-action="claim"' in live and 'data-action="cancel"' in live
    past = signed_in.get(f"/todos/{todo_id}/?round=1", **HTMX).content.decode()
    assert "Round 1 is a past round" in past and "go to round 2" in past
    assert "data-action=" not in past and "<form" not in past.split('class="history"')[0]
    # Server-side too: a POST that names the past round is stale, and changes nothing.
    seen = drawer.seen_stamp(board_todo(user, todo_id).todo)
    before = TodoEvent.objects.count()
    response = signed_in.post(f"/todos/{todo_id}/claim/", {"seen": seen, "round": "1"}, **HTMX)
    assert response.status_code == 409
    text = response.content.decode()
    assert "Round 1 is a past round; only round 2 acts. Nothing was changed." in text
    assert TodoEvent.objects.count() == before
    # The live round's own form acts.
    response = signed_in.post(f"/todos/{todo_id}/claim/", {"seen": seen, "round": "2"}, **HTMX)
    assert response.status_code == 200


def test_holding_a_lease_keeps_it_alive_while_reading_a_past_round(signed_in, endpoint, user):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="two rounds")
    transitions.claim(agent, todo.id)
    transitions.complete(agent, todo.id)
    transitions.rerun(Actor.human(user), todo.id)
    transitions.claim(Actor.human(user), todo.id)
    d = drawer.build(board_todo(user, todo.id), user=user, round_param="1")
    assert d.read_only and d.keepalive and not d.actions.mine


def test_activity_filters_by_todo_endpoint_and_person(signed_in, endpoint, make_endpoint, user):
    from switchboard.queues import teams

    bob = _user("bob")
    teams.add_member(user.teams.get(), bob)
    other = make_endpoint("agent-b")
    agent = Actor.agent(endpoint)
    a, _ = transitions.create_todo(Actor.agent(endpoint), title="alpha todo")
    transitions.claim(agent, a.id, claimant="run-a")
    transitions.release(Actor.human(user), a.id)
    b, _ = transitions.create_todo(Actor.agent(other), title="beta todo")
    transitions.claim(Actor.agent(other), b.id, claimant="run-b")
    transitions.cancel(Actor.human(bob), b.id)
    c, _ = transitions.create_todo(Actor.agent(endpoint), title="gamma todo", max_attempts=3)
    transitions.claim(agent, c.id, claimant="run-c")
    transitions.fail(agent, c.id)
    make_retry_due(c.id)

    def titles(query: str) -> set[str]:
        page = signed_in.get(f"/activity/?{query}").content.decode()
        return set(re.findall(r"‘(\w+ todo)’", page))

    assert titles("") == {"alpha todo", "beta todo", "gamma todo"}
    assert titles(f"todo={a.id}") == {"alpha todo"}
    assert titles(f"endpoint={other.pk}") == {"beta todo"}
    assert titles(f"person={bob.pk}") == {"beta todo"}
    assert titles(f"person={user.pk}") == {"alpha todo"}
    # Values that are not the teams' are ignored, never an error.
    stranger = _user("stranger")
    assert titles(f"person={stranger.pk}&endpoint=99999") == titles("")
    page = Client()
    page.force_login(stranger)
    assert "alpha todo" not in page.get(f"/activity/?todo={a.id}").content.decode()


def _user(name):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username=name, password="pw-for-tests")
