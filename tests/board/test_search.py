"""The queue's search (issue 15): words in any order across titles, bodies and what attempts
reported, PostgreSQL's built-in full-text search on two GIN indexes (migration 0015), scoped
to the reader's teams; "#123" jumps to the drawer."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client

from queues import transitions
from queues.models import Todo
from queues.selectors import QueueFilters, _board_todos, _filter_q, search_tsquery
from queues.transitions import Actor

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _ids(client, q: str) -> list[int]:
    page = client.get("/", {"q": q}).content.decode()
    return [int(n) for n in re.findall(r'<tr id="todo-(\d+)"', page)]


def test_words_in_any_order_and_as_prefixes(signed_in, make_todo):
    docs = make_todo("rebuild docs").id
    make_todo("rebuild the parser")
    other = make_todo("docs for the rebuild script").id
    assert _ids(signed_in, "rebuild docs") == [other, docs]
    assert _ids(signed_in, "docs rebuild") == [other, docs]  # was 0 with a substring match
    assert _ids(signed_in, "DOCS   Rebuil") == [other, docs]  # case, spaces, a word's start
    assert _ids(signed_in, "rebuild docs parser") == []  # every word must be there


def test_bodies_and_attempt_summaries_are_searched(signed_in, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    in_body = make_todo("nightly", body="the flaky upload test again").id
    in_summary = make_todo("triage").id
    transitions.claim(agent, in_summary)
    transitions.fail(agent, in_summary, summary="pip install failed: ResolutionImpossible")
    assert _ids(signed_in, "upload flaky") == [in_body]
    assert _ids(signed_in, "resolutionimpossible pip") == [in_summary]


def test_search_is_scoped_to_the_readers_teams(signed_in, make_user, make_todo, user):
    from queues import endpoints

    mine = make_todo("rotate the signing keys").id
    mallory = make_user("mallory")
    theirs_endpoint, _ = endpoints.vend(mallory.teams.get(), "their-agent", verbs="all")
    theirs, _ = transitions.create_todo(endpoint=theirs_endpoint, title="rotate the signing keys")
    agent = Actor.agent(theirs_endpoint)
    reported, _ = transitions.create_todo(endpoint=theirs_endpoint, title="unrelated")
    transitions.claim(agent, reported.id)
    transitions.complete(agent, reported.id, summary="rotated the signing keys")
    assert _ids(signed_in, "signing keys") == [mine]
    # "#id" of a todo of another team jumps nowhere and shows nothing.
    response = signed_in.get("/", {"q": f"#{theirs.id}"})
    assert response.status_code == 200 and "rotate the signing" not in response.content.decode()
    other = Client()
    other.force_login(mallory)
    assert _ids(other, "signing keys") == [reported.id, theirs.id]


def test_hash_id_jumps_to_the_drawer(signed_in, make_todo):
    todo = make_todo("somewhere in the pile")
    response = signed_in.get("/", {"q": f"#{todo.id}"})
    assert response.status_code == 302 and response["Location"] == f"/todos/{todo.id}/"
    # A bare number is both that todo and a word; and the live refresh never jumps.
    assert todo.id in _ids(signed_in, str(todo.id))
    refresh = signed_in.get(
        "/", {"q": f"#{todo.id}"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="queue"
    )
    assert refresh.status_code == 200


def test_nothing_typed_is_a_tsquery_operator(signed_in, make_todo):
    wanted = make_todo("a | b & !c").id
    make_todo("unrelated")
    for hostile in ("a | b", "!c & a", "b:*", "'a'", "a\\ b", "(a) <-> (b)", "a:A"):
        assert search_tsquery(hostile) is not None
        response = signed_in.get("/", {"q": hostile})
        assert response.status_code == 200, hostile
    assert _ids(signed_in, "a | b") == [wanted]
    assert search_tsquery("%") is None and search_tsquery("_ -- ||") is None


def _many_analyzed_todos(endpoint) -> None:
    """4,000 done todos, every other one with a summary, analyzed as autovacuum would."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason, ended_at)"
            " SELECT %s, 'chore number ' || g, 'routine body text ' || g, 0, 'done', 5, 1, 0,"
            " 1, 1, 0, '', '', now() FROM generate_series(1, 4000) g",
            [endpoint.pk],
        )
        cursor.execute(
            "INSERT INTO todo_attempts (todo_id, seq, round, attempt, claimer_kind,"
            " endpoint_id, mcp_session_id, mcp_session_id_truncated, mcp_session_id_bytes,"
            " owner, claimant, claimant_truncated, claimant_bytes, claimed_at,"
            " lease_expires_at, ended_at, outcome, disposition, summary, summary_truncated,"
            " summary_bytes, artifact_truncated, artifact_bytes)"
            " SELECT t.id, 1, 1, 1, 'endpoint', %s, '', false, 0, 'agent:x', '', false, 0,"
            " now(), now(), now(), 'completed', 'done',"
            " CASE WHEN t.id %% 2 = 0 THEN 'did the usual thing ' || t.id END, false, 0,"
            " false, 0 FROM todos t",
            [endpoint.pk],
        )
        cursor.execute("ANALYZE todos")
        cursor.execute("ANALYZE todo_attempts")
        # What autovacuum does in production: the GIN index's pending list merged in (a test's
        # transaction never lets it run), so the planner costs the index as it will be.
        cursor.execute(
            "SELECT gin_clean_pending_list(%s::regclass)", ["todo_search_documents_words"]
        )
        cursor.execute("ANALYZE todo_search_documents")


def test_the_search_plan_uses_both_indexes(team, endpoint):
    """EXPLAIN of the queue's search with enough rows, once analyzed: bitmap scans of
    todo_search_documents_words and todo_attempts_search (the partial index on summaries), never a
    sequential scan of todo_attempts."""
    _many_analyzed_todos(endpoint)
    filters = QueueFilters(text="zanzibar quokka")
    plan = _board_todos([team.pk]).filter(_filter_q(filters))[:51].explain()
    assert "todo_search_documents_words" in plan, plan
    assert "todo_attempts_search" in plan, plan
    assert "Seq Scan on todo_attempts" not in plan, plan


def test_a_todos_words_are_written_once_and_go_with_it(make_todo):
    from queues.models import TodoSearchDocument

    todo = make_todo("rebuild the docs", body="then publish them")
    [document] = TodoSearchDocument.objects.filter(todo_id=todo.id).values_list(
        "document", flat=True
    )
    assert {"rebuild", "docs", "publish"} <= {w.split(":")[0].strip("'") for w in document.split()}
    with connection.cursor() as cursor:  # as retention deletes: in SQL
        cursor.execute("DELETE FROM todos WHERE id = %s", [todo.id])
    assert not TodoSearchDocument.objects.filter(todo_id=todo.id).exists()


def test_a_search_looks_window_by_window_and_finds_what_one_look_would(
    signed_in, endpoint, make_todo, team, monkeypatch
):
    """The page is looked for among the newest ids first, then eight times as many below
    (queues.selectors.SEARCH_WINDOW): with a window of 2, a sparse match set spread over many
    windows gives the same page, in the same order, with the same older page, as one look over
    every id; a match in the oldest window is found, and "before" pages on from there."""
    from queues import selectors

    agent = Actor.agent(endpoint)
    made = []
    for n in range(40):
        todo = make_todo(f"chore {n}" if n % 7 else f"kiwi chore {n}")
        made.append(todo.id)
        if n % 11 == 3:  # a match through a summary only
            transitions.claim(agent, todo.id)
            transitions.fail(agent, todo.id, summary="the kiwi build broke")
    every = QueueFilters(text="kiwi")
    expected = list(_board_todos([team.pk]).filter(_filter_q(every)).values_list("pk", flat=True))
    assert len(expected) >= 8 and made[0] in expected  # the oldest todo is a match
    monkeypatch.setattr(selectors, "SEARCH_WINDOW", 2)
    monkeypatch.setattr(selectors, "BOARD_PAGE", 3)
    seen, before = [], None
    while True:
        rows, before = selectors.board_queue([team.pk], every, before_id=before)
        seen += [row.pk for row in rows]
        if before is None:
            break
    assert seen == expected
    # And through the page itself (the default window), the same rows.
    monkeypatch.undo()
    assert _ids(signed_in, "kiwi") == expected


def test_a_windowed_search_still_reads_both_indexes(team, endpoint):
    """A window's look (ids in [low, high)) is the GIN indexes' bitmaps ANDed with the id
    range, never a walk of todo_attempts computing each summary's words."""
    _many_analyzed_todos(endpoint)
    high = Todo.objects.order_by("-pk").values_list("pk", flat=True)[0] + 1
    filters = QueueFilters(text="zanzibar quokka")
    plan = (
        _board_todos([team.pk])
        .filter(_filter_q(filters, ids=(high - 4096, high)), pk__lt=high, pk__gte=high - 4096)[:51]
        .explain()
    )
    assert "todo_search_documents" in plan, plan
    assert "todo_attempts_search" in plan, plan
    assert "Seq Scan on todo_attempts" not in plan, plan
