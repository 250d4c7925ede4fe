"""The queue page over Django's test client: rows, filters, paging, scoping, query counts."""

from __future__ import annotations

import pytest
from django.test import Client

from queues import transitions
from queues.selectors import BOARD_PAGE
from queues.transitions import Actor
from tests.board.history import done_with_history, mixed_history
from tests.queues.helpers import lapse_lease

REFRESH = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "queue"}


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _ids(page: str) -> list[int]:
    import re

    return [int(n) for n in re.findall(r'<tr id="todo-(\d+)">', page)]


def test_rows_show_state_tries_holder_lease_and_last_outcome(signed_in, endpoint):
    todo_id = mixed_history(endpoint)  # failed, died, now held (fenced)
    page = signed_in.get("/").content.decode()
    row = page[page.index(f'<tr id="todo-{todo_id}">') :]
    row = row[: row.index("</tr>")]
    assert "state-claimed" in row and "try 3" in row and "2/5 failed" in row
    assert "agent-a" in row and "fenced" in row
    assert "in 4m" in row  # lease countdown
    assert "reaped" in row and "DIED" in row  # last closed attempt died


def test_filters_state_endpoint_died_and_text(signed_in, endpoint, make_endpoint, make_todo, user):
    other = make_endpoint("agent-b")
    died = mixed_history(endpoint, title="died once")
    done = done_with_history(endpoint, user, title="finished work")
    pending = make_todo("rebuild docs", on=other).id
    assert _ids(signed_in.get("/").content.decode()) == [pending, done, died]
    assert _ids(signed_in.get("/?state=done").content.decode()) == [done]
    assert _ids(signed_in.get(f"/?endpoint={other.pk}").content.decode()) == [pending]
    assert _ids(signed_in.get("/?died=1").content.decode()) == [done, died]
    assert _ids(signed_in.get("/?q=DOCS").content.decode()) == [pending]
    assert _ids(signed_in.get(f"/?q=%23{died}").content.decode()) == [died]
    # unknown values are ignored, never an error
    for junk in ("/?state=nope", "/?endpoint=99999", "/?before=abc", "/?q=" + "x" * 500):
        assert signed_in.get(junk).status_code == 200


def test_dead_letter_tab(signed_in, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    todo = make_todo("always fails", max_attempts=1)
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, summary="exit 1")
    make_todo("fine")
    page = signed_in.get("/?state=dead").content.decode()
    assert _ids(page) == [todo.id] and "dead letter" in page


def test_keyset_pages_do_not_overlap(signed_in, make_todo):
    ids = [make_todo(f"todo {n}").id for n in range(BOARD_PAGE + 7)]
    first = signed_in.get("/").content.decode()
    assert _ids(first) == ids[::-1][:BOARD_PAGE]
    assert f"?before={ids[7]}" in first
    second = signed_in.get(f"/?before={ids[7]}").content.decode()
    assert _ids(second) == ids[:7][::-1]
    assert "Older" not in second and "Newest" in second


def test_another_users_todos_never_show(make_user, endpoint, make_todo):
    make_todo("alice's secret")
    mallory = Client()
    mallory.force_login(make_user("mallory"))
    page = mallory.get("/").content.decode()
    assert "alice&#x27;s secret" not in page and _ids(page) == []
    assert "No endpoints yet" in page


def test_refresh_returns_only_the_queue_fragment(signed_in, make_todo):
    make_todo("one")
    fragment = signed_in.get("/?state=pending", **REFRESH).content.decode()
    assert fragment.lstrip().startswith('<div id="queue"')
    assert 'hx-get="/?state=pending"' in fragment and "<html" not in fragment


def test_queue_page_query_count_does_not_grow_with_rows(
    signed_in, endpoint, user, make_todo, django_assert_num_queries
):
    done_with_history(endpoint, user)
    make_todo("pending")
    # session, user, the user's teams (switcher), endpoints (filter), the page of todos with
    # holder and last outcome, ticker: attempt endings, ticker: events
    with django_assert_num_queries(7):
        signed_in.get("/")
    for n in range(12):
        todo_id = mixed_history(endpoint, title=f"more {n}")
        lapse_lease(todo_id)
    with django_assert_num_queries(7):
        page = signed_in.get("/").content.decode()
    assert len(_ids(page)) == 14
    with django_assert_num_queries(7):  # the refresh: the same reads, a smaller template
        signed_in.get("/", **REFRESH)


def test_signed_out_queue_goes_to_sign_in(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/"


def test_text_search_is_a_plain_substring_match(signed_in, make_todo):
    """% and _ in the search are characters, not wildcards; case does not matter."""
    percent = make_todo("raise the limit to 100% of quota").id
    under = make_todo("rename snake_case helpers").id
    make_todo("rename snakeXcase helpers")
    assert _ids(signed_in.get("/?q=100%25").content.decode()) == [percent]
    assert _ids(signed_in.get("/?q=SNAKE_case").content.decode()) == [under]
    assert _ids(signed_in.get("/?q=%25").content.decode()) == [percent]
