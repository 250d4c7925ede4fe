"""The smaller things a daily user hit (issue 47, item 7): New todo picks no endpoint for you
and can claim what it made, the Holder column's whole label, no Leave for a team's only
owner, the first password's file on the sign-in page, "Connect your own agent" saying it
switched team and landing on a page headed for what it shows, Activity by kind."""

from __future__ import annotations

import re

import pytest
from django.utils.html import escape

from switchboard.queues import endpoints, teams, transitions
from switchboard.queues.models import Membership, Todo
from switchboard.queues.transitions import Actor
from tests.board.pages import messages

pytestmark = pytest.mark.django_db


def _selected(page: str) -> list[str]:
    select = page[
        page.index('name="endpoint"') : page.index("</select>", page.index('name="endpoint"'))
    ]
    return re.findall(r'<option value="([^"]*)" selected', select)


def test_new_todo_picks_no_endpoint_unless_asked_or_used_last(signed_in, make_endpoint):
    ci, docs = make_endpoint("ci-fixer"), make_endpoint("docs-bot")
    assert _selected(signed_in.get("/todos/new/").content.decode()) == [""]  # a choice to make
    assert _selected(signed_in.get(f"/todos/new/?endpoint={docs.pk}").content.decode()) == [
        str(docs.pk)
    ]
    # Nothing picked is a form error, never the alphabetically first endpoint.
    refused = signed_in.post("/todos/new/", {"title": "x", "priority": 0, "max_attempts": 3})
    assert refused.status_code == 400 and not Todo.objects.exists()
    made = signed_in.post(
        "/todos/new/", {"endpoint": docs.pk, "title": "Proofread", "priority": 0, "max_attempts": 3}
    )
    assert made.status_code == 302
    assert _selected(signed_in.get("/todos/new/").content.decode()) == [str(docs.pk)]  # last used
    assert ci.pk  # still offered, not picked


def test_create_and_claim_it_myself(signed_in, endpoint, user):
    page = signed_in.get("/todos/new/").content.decode()
    assert 'name="claim" value="1">Create and claim it myself</button>' in page
    answer = signed_in.post(
        "/todos/new/",
        {
            "endpoint": endpoint.pk,
            "title": "By hand",
            "priority": 0,
            "max_attempts": 3,
            "claim": "1",
        },
    )
    todo = Todo.objects.get(title="By hand")
    assert answer["Location"] == f"/todos/{todo.id}/"
    assert todo.state == "claimed" and todo.owner == f"user:{user.pk}"
    assert messages(answer) == [f"Todo #{todo.id} created on {endpoint.agent_id}; you hold it."]


def test_the_holder_column_keeps_the_whole_label_as_its_tooltip(signed_in, endpoint, make_todo):
    todo = make_todo()
    label = "harness/buildbox-eu-west-1/ci-fixer-4/run-2026-12-06-0412"
    transitions.claim(Actor.agent(endpoint), todo.id, claimant=label)
    page = signed_in.get("/queue/").content.decode()
    assert f'<span class="holder-name" title="{label}">{label}</span>' in page


def test_the_only_owner_is_offered_no_leave(signed_in, user, team, make_user):
    page = signed_in.get("/team/").content.decode()
    assert ">Leave</button>" not in page and "the only owner" in page
    teams.add_member(team, make_user("bob"), role=Membership.Role.OWNER)
    page = signed_in.get("/team/").content.decode()
    # Two owners: either may leave, and the button's name starts with the word it shows.
    assert f'aria-label="Leave {escape(team.name)}">Leave</button>' in page
    assert 'aria-label="Remove bob from' in page


def test_the_sign_in_page_names_the_first_passwords_file(client):
    page = client.get("/login/").content.decode()
    assert "<code>first-sign-in.txt</code> in its data folder (<code>var/</code>" in page


def test_connect_your_own_agent_says_it_switched_and_lands_on_get_started(signed_in, user):
    demo = teams.get_or_create_team("demo", name="Demo agents")
    teams.add_member(demo, user)
    endpoints.vend(demo, "ci-fixer")
    own = user.teams.get(personal=True)
    answer = signed_in.post("/team/switch/", {"team": own.slug, "next": "/#first-run", "say": "1"})
    assert messages(answer) == [
        f"Now showing {own.name}. The other teams' work is one pick away in the team menu "
        "(All teams)."
    ]
    page = signed_in.get("/").content.decode()
    assert "<title>Get started · Switchboard</title>" in page
    assert "<h1>Get started</h1>" in page and "<h1>Queue</h1>" not in page
    # The switcher's own picks say nothing (the person chose the team in view).
    quiet = signed_in.post("/team/switch/", {"team": demo.slug, "next": "/"})
    assert messages(quiet) == []


def test_activity_narrows_to_failures_deaths_or_peoples_acts(signed_in, endpoint, user):
    from tests.queues.helpers import lapse_lease

    agent, person = Actor.agent(endpoint), Actor.human(user)
    failed = transitions.create_todo(agent, title="fails")[0].id
    transitions.claim(agent, failed)
    transitions.fail(agent, failed, summary="boom", retryable=False)
    died = transitions.create_todo(agent, title="dies", max_attempts=1)[0].id
    transitions.claim(agent, died)
    lapse_lease(died)
    transitions.reap_lapsed()
    done = transitions.create_todo(agent, title="completes")[0].id
    transitions.claim(agent, done)
    transitions.complete(agent, done)
    acted = transitions.create_todo(agent, title="canceled by a person")[0].id
    transitions.cancel(person, acted)

    def lines(kind: str) -> str:
        page = signed_in.get(f"/activity/?kind={kind}").content.decode()
        return page[page.index('id="activity"') :]

    failures, deaths, people = lines("failures"), lines("deaths"), lines("people")
    assert f"#{failed}</a>" in failures and f"#{done}</a>" not in failures
    assert f"#{died}</a>" not in failures and f"#{acted}</a>" not in failures
    assert f"#{died}</a>" in deaths and f"#{failed}</a>" not in deaths
    assert f"#{acted}</a>" in people and f"#{done}</a>" not in people
    assert f"#{failed}</a>" not in people  # an agent's own failure is not a person's act
    everything = lines("")
    assert all(f"#{n}</a>" in everything for n in (failed, died, done, acted))
    # The kinds are links that keep the other filters; an unknown kind is everything.
    page = signed_in.get(f"/activity/?endpoint={endpoint.pk}").content.decode()
    assert f'href="?endpoint={endpoint.pk}&amp;kind=deaths"' in page
    assert f"#{done}</a>" in lines("nonsense")
