"""Waiting on people (``/waiting/``) and the answer (``POST /todos/<id>/answer/``): the page
lists the open questions oldest first and answers each in place (choices, free text, a form
drawn from answer_schema); a bad value is a 400 with what was typed kept, a stale answer a
409, another team's todo the same 404 as an unknown one; nothing is written on any refusal;
agent-written text is inert in the page, the drawer and the stream."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from switchboard.board import live
from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoQuestion, TodoState
from switchboard.queues.transitions import Actor

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
HOSTILE = '<script>alert("q")</script><img src=x onerror=alert(1)>'
FORM = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "title": "Refund amount", "minimum": 0, "maximum": 1000},
        "approve": {"type": "boolean", "title": "Approve the refund"},
        "reason": {"type": "string", "title": "Reason", "enum": ["duplicate", "fraud"]},
        "copies": {"type": "integer", "title": "Copies", "minimum": 1},
    },
    "required": ["amount"],
}


def ask(endpoint, make_todo, title="migrate the orders table", *, claimant="run-1", **question):
    """A todo of ``endpoint``'s, claimed and released with a question: waiting on people."""
    agent = Actor.agent(endpoint)
    todo = make_todo(title)
    transitions.claim(agent, todo.id, claimant=claimant)
    question.setdefault("question", "The migration drops a column with data in it: go ahead?")
    transitions.release(agent, todo.id, **question)
    return todo


def state_of(todo) -> str:
    return Todo.objects.get(pk=todo.id).state


def answers(todo) -> list:
    """Each question of the todo: how it ended, and the answer given."""
    rows = TodoQuestion.objects.filter(todo_id=todo.id).order_by("attempt_seq")
    return [(row.ending or None, row.answer) for row in rows]


def inputs(page: str, todo) -> dict[str, str]:
    """A Waiting page row's form inputs, by their labels' words: {label: name}."""
    pattern = rf'for="question-{todo.id}-\d+-inbox-(f\d+)">(?:<input[^>]*> )?([^<]+)'
    return {label.strip(): name for name, label in re.findall(pattern, page)}


def test_the_page_lists_questions_oldest_first_with_who_asked_how_long_and_the_title(
    signed_in, endpoint, make_todo
):
    first = ask(endpoint, make_todo, "first asked", choices=["yes", "no"])
    second = ask(endpoint, make_todo, "second asked", claimant="")
    page = signed_in.get("/waiting/").content.decode()
    assert page.index("first asked") < page.index("second asked")
    assert f'id="question-{first.id}-1"' in page and f'id="question-{second.id}-1"' in page
    assert "asked by run-1 on agent-a" in page  # the claimant, and its endpoint
    assert "asked by endpoint agent-a" in page  # no claimant: the endpoint
    assert 'data-when="for"' in page  # how long it has waited
    assert 'value="yes"' in page and 'value="no"' in page
    assert 'aria-current="page">Waiting' in page and '<span class="nav-count">2</span>' in page


def test_the_page_reads_in_three_queries_however_many_questions(
    signed_in, endpoint, make_todo, django_assert_num_queries
):
    for n in range(3):
        ask(endpoint, make_todo, f"todo {n}", choices=["a", "b"])
    # session, the user with their teams and invitations, the questions (with their todos,
    # endpoints and claimants, and how many there are, in one)
    with django_assert_num_queries(3):
        assert signed_in.get("/waiting/").status_code == 200
    for n in range(3):
        ask(endpoint, make_todo, f"more {n}", answer_schema=FORM)
    with django_assert_num_queries(3):
        assert signed_in.get("/waiting/").status_code == 200


def test_a_choice_answers_and_the_next_claim_reads_it(signed_in, endpoint, make_todo):
    todo = ask(endpoint, make_todo, choices=["go ahead", "stop"])
    response = signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", "value": "stop"}, **HTMX)
    assert response.status_code == 200
    assert "Answered: #" in response.content.decode() and response["HX-Trigger"] == "queue-changed"
    assert state_of(todo) == TodoState.PENDING
    claim = transitions.claim_next(Actor.agent(endpoint))
    asked = claim.prior_attempts[-1].question
    assert asked["answer"]["value"] == "stop"
    assert asked["answer"]["answered_by"] == {"kind": "person", "label": "alice"}


def test_free_text_answers_without_javascript_and_comes_back_to_the_page(
    signed_in, endpoint, make_todo
):
    todo = ask(endpoint, make_todo, question="Which customer did the ticket mean?")
    page = signed_in.get("/waiting/").content.decode()
    assert f'<textarea id="question-{todo.id}-1-inbox-value" name="value"' in page
    response = signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", "value": "  ACME GmbH "})
    assert response.status_code == 302 and response["Location"] == "/waiting/"
    assert answers(todo) == [("answered", "ACME GmbH")]
    assert f"#{todo.id} is pending again" in signed_in.get("/waiting/").content.decode()


def test_a_schema_form_is_drawn_from_the_schema_and_answers_with_its_types(
    signed_in, endpoint, make_todo
):
    todo = ask(endpoint, make_todo, answer_schema=FORM)
    page = signed_in.get("/waiting/").content.decode()
    assert 'type="number"' in page and 'min="0"' in page and 'max="1000"' in page
    assert 'step="1"' in page and 'type="checkbox"' in page
    assert '<option value="fraud">fraud</option>' in page
    assert 'Refund amount <span class="req">(required)</span>' in page
    named = inputs(page, todo)
    # The form's names are its own (f0, f1…), never the agent's property names.
    assert set(named.values()) == {"f0", "f1", "f2", "f3"}
    post = {
        "seq": "1",
        named["Refund amount"]: "12.5",
        named["Approve the refund"]: "1",
        named["Reason"]: "fraud",
        named["Copies"]: "2",
    }
    response = signed_in.post(f"/todos/{todo.id}/answer/", post, **HTMX)
    assert response.status_code == 200, response.content.decode()
    assert answers(todo) == [
        ("answered", {"amount": 12.5, "approve": True, "reason": "fraud", "copies": 2})
    ]


def test_a_bad_value_is_a_400_that_says_why_keeps_what_was_typed_and_writes_nothing(
    signed_in, endpoint, make_todo
):
    todo = ask(endpoint, make_todo, answer_schema=FORM)
    page = signed_in.get("/waiting/").content.decode()
    name = inputs(page, todo)["Refund amount"]
    # A number out of the form's bounds: the ledger refuses it.
    response = signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", name: "5000"}, **HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert "Not sent." in html and "Nothing was changed." in html
    assert 'value="5000"' in html  # what was typed, kept
    # Not a number at all: the form itself says so.
    response = signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", name: "lots"}, **HTMX)
    assert response.status_code == 400 and "takes a number" in response.content.decode()
    assert 'value="lots"' in response.content.decode()
    # Without htmx: the page, with the message, the row's form as typed.
    response = signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", name: "lots"})
    assert response.status_code == 400 and 'value="lots"' in response.content.decode()
    assert state_of(todo) == TodoState.WAITING and answers(todo) == [(None, None)]


def test_a_choice_that_is_not_offered_and_empty_text_are_400s(signed_in, endpoint, make_todo):
    picked = ask(endpoint, make_todo, choices=["yes", "no"])
    response = signed_in.post(f"/todos/{picked.id}/answer/", {"seq": "1", "value": "maybe"}, **HTMX)
    assert response.status_code == 400 and "one of the question" in response.content.decode()
    free = ask(endpoint, make_todo, "free text")
    response = signed_in.post(f"/todos/{free.id}/answer/", {"seq": "1", "value": "  "}, **HTMX)
    assert response.status_code == 400 and "Write an answer first" in response.content.decode()
    assert state_of(picked) == state_of(free) == TodoState.WAITING


def test_a_stale_answer_is_a_409_and_writes_nothing(signed_in, endpoint, make_todo, user):
    todo = ask(endpoint, make_todo, choices=["yes", "no"])
    transitions.answer(Actor.human(user), todo.id, value="yes")  # answered elsewhere first
    response = signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", "value": "no"}, **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert "Already answered or withdrawn" in html and "Nothing was changed." in html
    assert f'id="question-{todo.id}-1"' in html  # the row, closed in place
    assert answers(todo) == [("answered", "yes")]
    # From the drawer: the drawer again, saying so.
    response = signed_in.post(
        f"/todos/{todo.id}/answer/", {"seq": "1", "value": "no", "from": "drawer"}, **HTMX
    )
    assert response.status_code == 409 and 'id="drawer-panel"' in response.content.decode()
    assert answers(todo) == [("answered", "yes")]


def test_an_answer_to_an_earlier_question_of_a_todo_asked_again_is_a_409(
    signed_in, endpoint, make_todo, user
):
    todo = ask(endpoint, make_todo, choices=["yes", "no"])
    transitions.answer(Actor.human(user), todo.id, value="yes")
    agent = Actor.agent(endpoint)
    transitions.claim(agent, todo.id)
    transitions.release(agent, todo.id, question="And now?", choices=["yes", "no"])
    response = signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", "value": "no"}, **HTMX)
    assert response.status_code == 409 and "asked another since" in response.content.decode()
    assert state_of(todo) == TodoState.WAITING


def test_another_teams_todo_answers_exactly_like_an_unknown_one(make_user, endpoint, make_todo):
    todo = ask(endpoint, make_todo, choices=["yes", "no"])
    stranger = Client()
    stranger.force_login(make_user("mallory"))
    for extra in ({}, HTMX):
        foreign = stranger.post(f"/todos/{todo.id}/answer/", {"seq": "1", "value": "yes"}, **extra)
        unknown = stranger.post("/todos/987654321/answer/", {"seq": "1", "value": "yes"}, **extra)
        assert foreign.status_code == unknown.status_code == 404
        assert foreign.content == unknown.content
        assert "migrate" not in foreign.content.decode()
    assert state_of(todo) == TodoState.WAITING
    assert f"question-{todo.id}" not in stranger.get("/waiting/").content.decode()


def test_every_answer_form_needs_its_csrf_token(user, endpoint, make_todo):
    todo = ask(endpoint, make_todo, choices=["yes", "no"])
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    page = strict.get("/waiting/").content.decode()
    assert page.count('name="csrfmiddlewaretoken"') >= 2  # the row's form, and sign-out's
    drawer = strict.get(f"/todos/{todo.id}/").content.decode()
    assert f'action="/todos/{todo.id}/answer/"' in drawer
    refused = strict.post(f"/todos/{todo.id}/answer/", {"seq": "1", "value": "yes"})
    assert refused.status_code == 403
    assert state_of(todo) == TodoState.WAITING


def test_hostile_questions_and_choices_are_inert_in_the_page_and_the_drawer(
    signed_in, endpoint, make_todo
):
    choice = '"><script>alert(2)</script>'
    todo = ask(endpoint, make_todo, question=HOSTILE, choices=[choice, "no"], claimant=HOSTILE[:40])
    schema_todo = ask(
        endpoint,
        make_todo,
        question=HOSTILE,
        answer_schema={
            "type": "object",
            "properties": {
                "x": {"type": "string", "title": HOSTILE, "description": HOSTILE},
                "y": {"type": "string", "enum": [choice, "ok"]},
            },
        },
    )
    for url in ("/waiting/", f"/todos/{todo.id}/", f"/todos/{schema_todo.id}/"):
        html = signed_in.get(url).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&quot;q&quot;)&lt;/script&gt;" in html
        assert "Untrusted data</b> · the question" in html
    page = signed_in.get("/waiting/").content.decode()
    assert 'value="&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"' in page
    # Answered with the hostile choice: the drawer shows the answer, still inert.
    signed_in.post(f"/todos/{todo.id}/answer/", {"seq": "1", "value": choice})
    drawer = signed_in.get(f"/todos/{todo.id}/?attempt=1").content.decode()
    assert "<script>alert" not in drawer and "alice (a person)" in drawer


def test_hostile_questions_are_inert_in_the_stream(endpoint, make_todo, team):
    todo = ask(endpoint, make_todo, HOSTILE, question=HOSTILE, choices=[HOSTILE[:90], "no"])
    update, _, _ = live.read_update(
        team.pk, live.Change(todos={todo.id}, feed=True), live.WANTS, True
    )
    sent = live._ENCODER.encode(update).decode()
    assert "<script>" not in sent and "<img src=x" not in sent
    assert "&lt;script&gt;" in sent  # the title, escaped in its row
    assert f'"{todo.id}"' in sent and '"waiting"' in sent


def test_the_drawer_of_a_waiting_todo_answers_and_tells_the_story(signed_in, endpoint, make_todo):
    todo = ask(endpoint, make_todo, question="Which customer?")
    drawer = signed_in.get(f"/todos/{todo.id}/").content.decode()
    assert "Waiting on people" in drawer and 'name="from" value="drawer"' in drawer
    assert 'data-action="claim"' in drawer and 'data-action="cancel"' in drawer
    response = signed_in.post(
        f"/todos/{todo.id}/answer/", {"seq": "1", "value": "ACME", "from": "drawer"}, **HTMX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "is pending again" in html and "Waiting on people</h2>" not in html
    story = signed_in.get(f"/todos/{todo.id}/?attempt=1").content.decode()
    assert "asked a person" in story and ">answered<" in story
    assert "alice (a person)" in story and "ACME" in story and "Waited" in story


def test_the_overview_counts_questions_per_endpoint(signed_in, endpoint, make_todo):
    ask(endpoint, make_todo, choices=["a", "b"])
    page = signed_in.get("/").content.decode()
    assert f'href="/waiting/?endpoint={endpoint.pk}" aria-label="1 waiting on people">1</a>' in page
    assert "waiting on people</a>" in page and '<span class="nav-count">1</span>' in page


def test_a_filter_to_one_endpoint_shows_only_its_questions(
    signed_in, endpoint, make_todo, make_endpoint
):
    other = make_endpoint("agent-b")
    ask(endpoint, make_todo, "of agent a", choices=["a", "b"])
    todo_b = make_todo("of agent b", on=other)
    agent_b = Actor.agent(other)
    transitions.claim(agent_b, todo_b.id)
    transitions.release(agent_b, todo_b.id, question="b?")
    page = signed_in.get(f"/waiting/?endpoint={other.pk}").content.decode()
    assert "of agent b" in page and "of agent a" not in page
    assert "Questions agent-b" in page


def test_the_queue_has_a_waiting_tab_that_lists_them(signed_in, endpoint, make_todo):
    todo = ask(endpoint, make_todo, "asked in the queue", choices=["a", "b"])
    make_todo("not asked")
    page = signed_in.get("/queue/?state=waiting").content.decode()
    assert 'data-state="waiting">Waiting <span class="count">1</span>' in page
    assert f'id="todo-{todo.id}"' in page and "not asked" not in page
    assert '<span class="state state-waiting">waiting on people</span>' in page


def test_a_waiting_todos_drawer_reads_in_six_queries(
    signed_in, endpoint, make_todo, django_assert_num_queries
):
    todo = ask(endpoint, make_todo, answer_schema=FORM)
    # the drawer's five (session, user, the todo, its attempts with each asking try's
    # question, the people's actions on it) and the todo's open question (board_todo reads it
    # apart, for a waiting todo only)
    with django_assert_num_queries(6):
        drawer = signed_in.get(f"/todos/{todo.id}/", **HTMX).content.decode()
    assert "Waiting on people</h2>" in drawer and "Refund amount" in drawer


def test_stalls_says_how_many_wait_on_people_for_the_navs_count(
    signed_in, endpoint, make_todo, make_user
):
    ask(endpoint, make_todo, "one", choices=["a", "b"])
    ask(endpoint, make_todo, "two")
    assert signed_in.get("/stalls/").json()["people"] == 2
    signed_in.force_login(make_user("mallory"))
    assert signed_in.get("/stalls/").json()["people"] == 0
