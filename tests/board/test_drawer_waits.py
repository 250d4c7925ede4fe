"""The drawer of a todo that waits for todos or children (issue 44): what it waits for and
what waits for it, a parent's children as a list with their outcomes (their summaries framed
as untrusted data), a person's Start now (audited, offered only while it waits for todos or
children), and the dead letter's reason in words."""

from __future__ import annotations

import pytest
from django.urls import reverse

from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoEvent
from tests.board.conftest import sign_in

HOSTILE = '<img src=x onerror="alert(1)">'


def _drawer(client, todo_id: int) -> str:
    return client.get(reverse("todo-detail", args=[todo_id])).content.decode()


def _act(client, todo_id: int, action: str):
    page = client.get(reverse("todo-detail", args=[todo_id])).content.decode()
    seen = page.split('data-seen="', 1)[1].split('"', 1)[0]
    return client.post(reverse("todo-action", args=[todo_id, action]), {"seen": seen})


def test_the_drawer_says_what_it_waits_for_and_what_waits_for_it(logged_in, agent, make_todo):
    first = make_todo(f"extract {HOSTILE}")
    second = make_todo("load", after=[first.id])

    page = _drawer(logged_in, second.id)
    assert "Waiting</strong> for 1 of the 1 todo it was made after to be done" in page
    assert "Made after" in page and f"#{first.id}" in page
    assert HOSTILE not in page and "&lt;img src=x" in page
    assert "Start now" in page
    page = _drawer(logged_in, first.id)
    assert "Waiting for it" in page and f"#{second.id}" in page


def test_start_now_ends_the_wait_and_is_audited(logged_in, user, agent, make_todo):
    first = make_todo("extract")
    second = make_todo("load", after=[first.id])
    response = _act(logged_in, second.id, "start-now")
    assert response.status_code == 302
    assert Todo.objects.get(pk=second.id).state == "pending"
    assert TodoEvent.objects.filter(todo_id=second.id, kind="start_now", actor_user=user).exists()
    page = _drawer(logged_in, second.id)
    assert "started it now, ending its wait" in page and "Start now" not in page
    again = _act(logged_in, second.id, "start-now")  # it waits for nothing now
    assert again.status_code == 409 and "Nothing was changed" in again.content.decode()


def test_a_parent_lists_its_children_with_their_outcomes(logged_in, agent, make_todo):
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    done = make_todo("piece 1", parent=parent.id)
    make_todo("piece 2", parent=parent.id)
    transitions.release(agent, parent.id, wait_for_children=True)
    transitions.claim(agent, done.id)
    transitions.complete(agent, done.id, summary=f"all good {HOSTILE}")

    page = _drawer(logged_in, parent.id)
    assert "for 1 of its 2 children to end" in page
    assert "Children" in page and "piece 1" in page and "piece 2" in page
    assert "its last try&#x27;s summary" in page or "its last try's summary" in page
    assert HOSTILE not in page
    child = _drawer(logged_in, done.id)
    assert f'A child of <a href="/todos/{parent.id}/">#{parent.id}</a>' in child


def test_a_dead_letter_whose_prerequisite_ended_says_so(logged_in, human, make_todo):
    first = make_todo("extract")
    second = make_todo("load", after=[first.id])
    transitions.cancel(human, first.id)
    page = _drawer(logged_in, second.id)
    assert "a todo it waited for ended" in page
    assert "a todo it was made after ended without being done" in page


def test_start_now_of_another_teams_todo_answers_like_an_unknown_one(logged_in, make_user, vend):
    from switchboard.queues.transitions import Actor

    bob = make_user("bob")
    theirs, _ = vend("bobs-agent", team=bob.teams.get())
    first, _ = transitions.create_todo(Actor.agent(theirs), title="theirs")
    second, _ = transitions.create_todo(Actor.agent(theirs), title="theirs too", after=[first.id])
    seen = logged_in.post(reverse("todo-action", args=[second.id, "start-now"]), {"seen": "x"})
    unknown = logged_in.post(reverse("todo-action", args=[2**40, "start-now"]), {"seen": "x"})
    assert seen.status_code == unknown.status_code == 404 and seen.content == unknown.content
    assert Todo.objects.get(pk=second.id).state == "waiting"


@pytest.mark.django_db(transaction=True)
def test_a_parent_and_its_children_in_a_browser(page, user, agent, make_todo, tmp_path):
    parent = make_todo("ship the release")
    transitions.claim(agent, parent.id)
    pieces = [make_todo(f"piece {n}", parent=parent.id) for n in range(3)]
    transitions.release(agent, parent.id, summary="split in three", wait_for_children=True)
    sign_in(page, "alice")
    page.goto(f"/todos/{parent.id}/")
    assert page.locator(".waitline").inner_text().startswith("Waiting for 3 of its 3 children")
    assert page.locator("ul.children li").count() == 3
    transitions.claim(agent, pieces[0].id)
    transitions.complete(agent, pieces[0].id, summary="notes written: docs/release.md")
    page.reload()
    assert page.locator(".waitline").inner_text().startswith("Waiting for 2 of its 3 children")
    page.screenshot(
        path=tmp_path / "drawer-children.png", full_page=True
    )  # docs/screenshots/ has one
    for piece in pieces[1:]:  # the rest end; the parent is pending after the last
        transitions.claim(agent, piece.id)
        transitions.complete(agent, piece.id, summary="done")
    page.reload()
    assert page.locator(".waitline").count() == 0
    assert page.locator("ul.children .state-done").count() == 3
    assert page.js_errors == []
