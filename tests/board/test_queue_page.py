"""The queue page over Django's test client: rows, filters, paging, scoping, query counts."""

from __future__ import annotations

import re

from django.test import Client

from switchboard.queues import transitions
from switchboard.queues.selectors import BOARD_PAGE
from switchboard.queues.transitions import Actor
from tests.board.history import done_with_history, mixed_history
from tests.queues.helpers import analyze, lapse_lease

REFRESH = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "queue"}


def _ids(page: str) -> list[int]:
    return [int(n) for n in re.findall(r'<tr id="todo-(\d+)"', page)]


def test_rows_show_state_tries_holder_lease_and_last_outcome(signed_in, endpoint):
    todo_id = mixed_history(endpoint)  # failed, died, now held (fenced)
    page = signed_in.get("/queue/").content.decode()
    row = page[page.index(f'<tr id="todo-{todo_id}"') :]
    row = row[: row.index("</tr>")]
    assert "state-claimed" in row and "try 3" in row and "2/5 spent" in row
    assert "agent-a" in row and "fenced" in row
    assert "in 4m" in row  # lease countdown
    assert "reaped" in row and "DIED" in row  # last closed attempt died


def test_filters_state_endpoint_died_and_text(signed_in, endpoint, make_endpoint, make_todo, user):
    other = make_endpoint("agent-b")
    died = mixed_history(endpoint, title="died once")
    done = done_with_history(endpoint, user, title="finished work")
    pending = make_todo("rebuild docs", on=other).id
    assert _ids(signed_in.get("/queue/").content.decode()) == [pending, done, died]
    assert _ids(signed_in.get("/queue/?state=done").content.decode()) == [done]
    assert _ids(signed_in.get(f"/queue/?endpoint={other.pk}").content.decode()) == [pending]
    assert _ids(signed_in.get("/queue/?died=1").content.decode()) == [done, died]
    # Words of titles, bodies and summaries ("finished work" completed "Rebuilt the docs").
    assert _ids(signed_in.get("/queue/?q=DOCS").content.decode()) == [pending, done]
    # A bare number is the todo of that id, and a word too ("2 warnings fixed").
    assert died in _ids(signed_in.get(f"/queue/?q={died}").content.decode())
    # "#123" jumps to the drawer.
    assert signed_in.get(f"/queue/?q=%23{died}")["Location"] == f"/todos/{died}/"
    # unknown values are ignored, never an error
    for junk in (
        "/queue/?state=nope",
        "/queue/?endpoint=99999",
        "/queue/?before=abc",
        "/queue/?q=" + "x" * 500,
    ):
        assert signed_in.get(junk).status_code == 200


def test_dead_letter_tab(signed_in, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    todo = make_todo("always fails", max_attempts=1)
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, summary="exit 1")
    make_todo("fine")
    page = signed_in.get("/queue/?state=dead").content.decode()
    assert _ids(page) == [todo.id] and "dead letter" in page


def test_keyset_pages_do_not_overlap(signed_in, make_todo):
    ids = [make_todo(f"todo {n}").id for n in range(BOARD_PAGE + 7)]
    first = signed_in.get("/queue/").content.decode()
    assert _ids(first) == ids[::-1][:BOARD_PAGE]
    assert f"?before={ids[7]}" in first
    second = signed_in.get(f"/queue/?before={ids[7]}").content.decode()
    assert _ids(second) == ids[:7][::-1]
    assert "Older" not in second and "Newest" in second


def test_another_users_todos_never_show(make_user, endpoint, make_todo):
    make_todo("alice's secret")
    mallory = Client()
    mallory.force_login(make_user("mallory"))
    page = mallory.get("/queue/").content.decode()
    assert "alice&#x27;s secret" not in page and _ids(page) == []
    assert "Get started" in page


def test_refresh_returns_only_the_queue_fragment(signed_in, make_todo):
    make_todo("one")
    fragment = signed_in.get("/queue/?state=pending", **REFRESH).content.decode()
    assert fragment.lstrip().startswith('<div id="queue"')
    assert 'data-live-url="/queue/?state=pending"' in fragment and "<html" not in fragment


def test_queue_page_query_count_does_not_grow_with_rows(
    signed_in, endpoint, user, make_todo, django_assert_num_queries
):
    done_with_history(endpoint, user)
    make_todo("pending")
    # session, user (with their teams, for the switcher), endpoints (filter), the page of
    # todos with holder and last outcome, the state counts (each stopped at the cap), the
    # ticker (attempt endings and events, one statement)
    with django_assert_num_queries(6):
        signed_in.get("/queue/")
    for n in range(12):
        todo_id = mixed_history(endpoint, title=f"more {n}")
        lapse_lease(todo_id)
    with django_assert_num_queries(6):
        page = signed_in.get("/queue/").content.decode()
    ids = _ids(page)
    assert len(ids) == 14
    # The first refresh: the same reads and the new arrivals, a smaller template.
    with django_assert_num_queries(7):
        signed_in.get("/queue/", **REFRESH)
    # The live refresh of the rows shown: the same 7 (the shown rows in place of the page).
    shown = ",".join(map(str, ids))
    with django_assert_num_queries(7):
        fragment = signed_in.get(f"/queue/?shown={shown}&upto={ids[0]}", **REFRESH).content.decode()
    assert _ids(fragment) == ids


def test_signed_out_queue_goes_to_sign_in(client):
    response = client.get("/queue/")
    assert response.status_code == 302 and response["Location"] == "/login/?next=/queue/"


def test_text_search_takes_words_and_symbols_as_typed(signed_in, make_todo):
    """Words match as words (case aside); % and _ are characters, not wildcards: a search of
    symbols only looks for them in titles as typed."""
    percent = make_todo("raise the limit to 100% of quota").id
    under = make_todo("rename snake_case helpers").id
    make_todo("rename snakeXcase helpers")
    assert _ids(signed_in.get("/queue/?q=100%25").content.decode()) == [percent]
    assert _ids(signed_in.get("/queue/?q=SNAKE_case").content.decode()) == [under]
    assert _ids(signed_in.get("/queue/?q=%25").content.decode()) == [percent]


def test_a_refresh_keeps_the_rows_shown_marks_those_that_moved_on_and_counts_new_ones(
    signed_in, endpoint, make_todo
):
    first, second = make_todo("first").id, make_todo("second").id
    transitions.claim(Actor.agent(endpoint), first)  # leaves the pending tab
    newer = [make_todo(f"newer {n}").id for n in range(3)]
    fragment = signed_in.get(
        f"/queue/?state=pending&shown={second},{first}&upto={second}", **REFRESH
    ).content.decode()
    assert _ids(fragment) == [second, first]  # the rows shown, nothing pushed in
    row = fragment[fragment.index(f'<tr id="todo-{first}"') :]
    row = row[: row.index("</tr>")]
    assert 'class="is-moved"' in row and "moved on" in row and "claimed" in row
    assert 'data-newer="3"' in fragment
    assert all(f"todo-{n}" not in fragment for n in newer)
    # The state tabs count the team's todos by state.
    assert '<span class="count">5</span>' in fragment  # all
    page = signed_in.get("/queue/?state=pending").content.decode()
    assert _ids(page) == [*reversed(newer), second] and 'data-newer="0"' in page


def test_shown_ids_of_another_team_read_as_missing(signed_in, make_user, make_todo):
    from switchboard.queues import endpoints

    mallory = make_user("mallory")
    theirs, _ = endpoints.vend(mallory.teams.get(), "theirs")
    foreign = transitions.create_todo(Actor.agent(theirs), title="not yours")[0].id
    mine = make_todo("mine").id
    fragment = signed_in.get(f"/queue/?shown={foreign},{mine},x,,-3", **REFRESH).content.decode()
    assert _ids(fragment) == [mine] and "not yours" not in fragment


def test_a_refresh_of_a_search_tests_the_rows_shown_and_not_another_teams(
    signed_in, make_user, endpoint, make_todo
):
    """The live refresh of a search checks its rows row by row (the walk's test): a row
    whose try reported the word still matches, one that never had it is marked as moved on,
    and another team's todo with the word reads as missing."""
    from switchboard.queues import endpoints

    summarized = make_todo("triage")
    agent = Actor.agent(endpoint)
    transitions.claim(agent, summarized.id)
    transitions.fail(agent, summarized.id, summary="quokka ate the cable")
    titled, plain = make_todo("quokka census").id, make_todo("unrelated").id
    mallory = make_user("mallory")
    theirs, _ = endpoints.vend(mallory.teams.get(), "theirs")
    foreign = transitions.create_todo(Actor.agent(theirs), title="quokka too")[0].id
    shown = f"{foreign},{plain},{titled},{summarized.id}"
    fragment = signed_in.get(f"/queue/?q=quokka&shown={shown}", **REFRESH).content.decode()
    assert _ids(fragment) == [plain, titled, summarized.id] and "quokka too" not in fragment

    def row(todo_id: int) -> str:
        part = fragment[fragment.index(f'<tr id="todo-{todo_id}"') :]
        return part[: part.index("</tr>")]

    assert 'class="is-moved"' in row(plain)
    assert 'class="is-moved"' not in row(titled) and 'class="is-moved"' not in row(summarized.id)


def test_a_done_todo_whose_only_bad_try_died_reads_spent_not_failed(signed_in, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    todo = make_todo("survived a death")
    transitions.claim(agent, todo.id)
    lapse_lease(todo.id)
    transitions.claim(agent, todo.id)  # takes over: try 1 died
    transitions.complete(agent, todo.id)
    page = signed_in.get("/queue/").content.decode()
    row = page[page.index(f'<tr id="todo-{todo.id}"') :]
    row = row[: row.index("</tr>")]
    assert "1/5 spent" in row and "1/5 failed" not in row
    assert 'class="sub muted">1/5 spent' in row  # quiet: the todo is done


def test_a_tab_counts_exactly_up_to_its_cap_and_says_so_beyond(
    signed_in, endpoint, make_todo, monkeypatch
):
    """Each state tab counts exactly up to queues.selectors.TAB_COUNT_CAP and reads "N+"
    past it (so a page never counts every done todo of a busy team); "All" is the sum with a
    "+" when any state is past the cap; "all N matching" is not offered on a capped count
    (the confirmation page counts them itself)."""
    from switchboard.queues.selectors import queue

    monkeypatch.setattr(queue, "TAB_COUNT_CAP", 3)
    agent = Actor.agent(endpoint)
    for n in range(4):
        todo = make_todo(f"done {n}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
    make_todo("waiting")
    page = signed_in.get("/queue/").content.decode()
    tabs = dict(re.findall(r'data-state="(\w+)">[^<]*<span class="count">([^<]*)</span>', page))
    assert tabs["done"] == "3+" and tabs["pending"] == "1" and tabs["dead"] == "0"
    assert tabs["all"] == "4+"  # 3 (capped) + 1
    done = signed_in.get("/queue/?state=done").content.decode()
    assert " all matching<span" in done and not re.search(r"all [\d,]+\+? matching", done)
    assert "all 1 matching<span" in signed_in.get("/queue/?state=pending").content.decode()
    monkeypatch.setattr(queue, "TAB_COUNT_CAP", 10_000)
    tabs = dict(
        re.findall(
            r'data-state="(\w+)">[^<]*<span class="count">([^<]*)</span>',
            signed_in.get("/queue/").content.decode(),
        )
    )
    assert tabs["done"] == "4" and tabs["all"] == "5"


def test_a_small_teams_queue_never_walks_a_big_teams_todos(signed_in, make_user, endpoint):
    """The second hardening round: a team of 12 todos beside one of 100,000 got its queue page
    in 200 ms where the big team got its own in 60: filtered only through the join on the
    endpoint's team, PostgreSQL walked every todo newest first looking for the small team's.
    With the team's endpoint ids (the page has them for its filter) it reads the small team's
    by todos_endpoint_list; the big team's page still walks the primary key. Both analyzed."""
    from django.db import connection

    from switchboard.queues import endpoints
    from switchboard.queues.selectors.queue import _board_todos

    big = make_user("big-co").teams.get()
    busy, _ = endpoints.vend(big, "busy-agent", verbs="all")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason)"
            " SELECT %s, 'chore ' || g, '', 0, 'pending', 5, 0, 0, 1, 0, 0, '', ''"
            " FROM generate_series(1, 20000) g",
            [busy.pk],
        )
        for n in range(12):
            transitions.create_todo(Actor.agent(endpoint), title=f"small chore {n}")
        analyze(cursor, "todos", "endpoints", "teams")
    mine = [endpoint.team_id]
    small = _board_todos(mine, [endpoint.pk]).order_by("-pk")[:BOARD_PAGE].explain()
    assert "todos_endpoint_list" in small, small
    assert "todos_pkey" not in small, small
    rows = signed_in.get("/queue/").content.decode()
    assert len(_ids(rows)) == 12
    theirs = _board_todos([big.pk], [busy.pk]).order_by("-pk")[:BOARD_PAGE].explain()
    assert "Index Scan Backward using todos_pkey" in theirs, theirs
