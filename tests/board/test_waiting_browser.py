"""Waiting on people in a real browser, pushed by the stream (board/live.py): a person
answers from the inbox and the agent's next claim reads the answer; a new question comes in
at the bottom of an open page within a second while the rows above stay where they are; a
question answered elsewhere stays in place, marked, with what was typed in it kept; the
nav's count follows; the drawer answers a form drawn from answer_schema; hostile questions
and choices stay text."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
from tests.board.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def ask(endpoint, make_todo, title, *, claimant="run-1", **question):
    agent = Actor.agent(endpoint)
    todo = make_todo(title)
    transitions.claim(agent, todo.id, claimant=claimant)
    question.setdefault("question", f"About {title}: go ahead?")
    transitions.release(agent, todo.id, **question)
    return todo


def _live(page) -> None:
    expect(page.locator("#inbox [data-live-status]")).to_contain_text("Live")


def _top(page, selector: str) -> float:
    return page.locator(selector).evaluate("(el) => el.getBoundingClientRect().top + scrollY")


def test_a_person_answers_from_the_inbox_and_the_agent_picks_the_todo_up_with_the_answer(
    page, user, endpoint, make_todo
):
    todo = ask(endpoint, make_todo, "drop the legacy column", choices=["go ahead", "keep it"])
    sign_in(page, "alice", to="/waiting/")
    _live(page)
    row = page.locator(f"#question-{todo.id}-1")
    expect(row).to_contain_text("drop the legacy column")
    expect(row).to_contain_text("asked by run-1")
    row.get_by_role("button", name="keep it").click()
    expect(row).to_contain_text(f"Answered: #{todo.id} is pending again")
    expect(row.get_by_role("button", name="go ahead")).to_have_count(0)
    # The agent's long-poll, or its next claim: the todo, with the question and the answer.
    claim = transitions.claim_next(Actor.agent(endpoint), claimant="run-2")
    assert claim is not None and claim.todo.id == todo.id
    asked = claim.prior_attempts[-1].question
    assert asked["text"] == "About drop the legacy column: go ahead?"
    assert asked["answer"]["value"] == "keep it"
    assert asked["answer"]["answered_by"] == {"kind": "person", "label": "alice"}
    # The drawer, opened from the row, says who holds it now and what was answered.
    row.locator("a.q-title").click()
    drawer = page.locator("#drawer-panel")
    expect(drawer.locator(".facts .state")).to_have_text("claimed")
    drawer.get_by_role("link", name="try 1: asked a person").click()
    expect(drawer.locator(".q-answered-by")).to_have_text("alice (a person)")
    expect(drawer.locator(".answer-given")).to_contain_text("keep it")
    assert page.js_errors == []


def test_a_new_question_comes_in_below_within_a_second_and_nothing_moves(
    page, user, endpoint, make_todo
):
    first = ask(endpoint, make_todo, "first question", question="Which customer?")
    second = ask(endpoint, make_todo, "second question", choices=["yes", "no"])
    sign_in(page, "alice", to="/waiting/")
    _live(page)
    expect(page.locator("[data-nav-people] .nav-count")).to_have_text("2")
    box = page.locator(f"#question-{first.id}-1 textarea")
    box.fill("ACME, the one in Berlin")
    page.locator(f"#question-{second.id}-1").hover()  # the pointer on a row
    tops = (_top(page, f"#question-{first.id}-1"), _top(page, f"#question-{second.id}-1"))
    asked_at = time.monotonic()
    third = ask(endpoint, make_todo, "third question", question="<b>bold</b> & <i>new</i>?")
    expect(page.locator(f"#question-{third.id}-1")).to_be_visible(timeout=5_000)
    took = time.monotonic() - asked_at
    # The bound is a second (p95, measured in bench/ask.py). Here the page is live,
    # and a live page runs no timer (board.js: Live.schedule), so the question can only have
    # come by the stream; the bound leaves room for the page's one-read-a-second throttle and
    # two busy shared cores (a CI run saw 1.88 s), and still fails a page that waited for a
    # reconnect's fallback timer.
    assert took < 4.0, f"the question took {took:.2f} s to reach the page"
    _live(page)
    expect(page.locator(f"#question-{third.id}-1 .question-text")).to_contain_text(
        "<b>bold</b> & <i>new</i>?"
    )
    expect(page.locator("[data-nav-people] .nav-count")).to_have_text("3")
    # Below the others, and the others where they were, typed text and focus kept.
    assert _top(page, f"#question-{third.id}-1") > tops[1]
    assert (_top(page, f"#question-{first.id}-1"), _top(page, f"#question-{second.id}-1")) == tops
    assert box.input_value() == "ACME, the one in Berlin"
    # Answered elsewhere (the API's requester, another person): marked where it is, its
    # form closed, what was typed kept to copy.
    transitions.answer(Actor.human(user), first.id, value="someone else's answer")
    gone = page.locator(f"#question-{first.id}-1")
    expect(gone).to_have_class("question is-gone")
    expect(gone.locator("[data-gone-note]")).to_be_visible()
    expect(box).to_be_disabled()
    assert box.input_value() == "ACME, the one in Berlin"
    assert (_top(page, f"#question-{first.id}-1"), _top(page, f"#question-{second.id}-1")) == tops
    expect(page.locator("[data-nav-people] .nav-count")).to_have_text("2")
    assert page.js_errors == []


def test_the_drawer_answers_a_form_drawn_from_the_schema(page, user, endpoint, make_todo):
    schema = {
        "type": "object",
        "properties": {
            "amount": {"type": "integer", "title": "Refund in EUR", "minimum": 1},
            "approve": {"type": "boolean", "title": "Approve it"},
        },
        "required": ["amount"],
    }
    todo = ask(endpoint, make_todo, "refund order 881", answer_schema=schema)
    sign_in(page, "alice", to=f"/todos/{todo.id}/")
    panel = page.locator("#drawer-panel")
    panel.get_by_label("Refund in EUR").fill("840")
    panel.get_by_label("Approve it").check()
    panel.get_by_role("button", name="Send answer").click()
    expect(panel).to_contain_text("is pending again")
    claim = transitions.claim_next(Actor.agent(endpoint))
    assert claim.prior_attempts[-1].question["answer"]["value"] == {"amount": 840, "approve": True}


def test_hostile_questions_and_choices_stay_text_in_the_browser(page, user, endpoint, make_todo):
    hostile = '<img src=x onerror="window.__owned=1">'
    ask(endpoint, make_todo, hostile, question=hostile, choices=[hostile[:90], "no"])
    sign_in(page, "alice", to="/waiting/")
    _live(page)
    ask(endpoint, make_todo, "second " + hostile, question=hostile, choices=["x", hostile[:90]])
    expect(page.locator("ol[data-questions] > li")).to_have_count(2)
    expect(page.locator("ol[data-questions] .choice").first).to_have_text(hostile[:90])
    assert page.locator("ol[data-questions] img").count() == 0
    assert page.evaluate("window.__owned") is None
    assert page.js_errors == []


def test_the_navs_count_is_on_pages_without_the_streams_counts(page, user, endpoint, make_todo):
    ask(endpoint, make_todo, "asked before the page", choices=["a", "b"])
    sign_in(page, "alice", to="/activity/")
    expect(page.locator("[data-nav-people] .nav-count")).to_have_text("1")
    assert page.js_errors == []
