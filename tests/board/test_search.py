"""The queue's search (issue 15): words in any order across titles, bodies and what attempts
reported, PostgreSQL's built-in full-text search on two GIN indexes (migration 0015), scoped
to the reader's teams; "#123" jumps to the drawer."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection
from django.test import Client

from switchboard.queues import transitions
from switchboard.queues.models import Todo
from switchboard.queues.selectors.queue import QueueFilters, _board_todos, _filter_q
from switchboard.queues.selectors.search import search_tsquery
from switchboard.queues.transitions import Actor
from tests.board.pages import slow_queue_reads
from tests.queues.helpers import analyze

pytestmark = pytest.mark.django_db


def _ids(client, q: str) -> list[int]:
    page = client.get("/queue/", {"q": q}).content.decode()
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
    from switchboard.queues import endpoints

    mine = make_todo("rotate the signing keys").id
    mallory = make_user("mallory")
    theirs_endpoint, _ = endpoints.vend(mallory.teams.get(), "their-agent", verbs="all")
    theirs, _ = transitions.create_todo(
        Actor.agent(theirs_endpoint), title="rotate the signing keys"
    )
    agent = Actor.agent(theirs_endpoint)
    reported, _ = transitions.create_todo(Actor.agent(theirs_endpoint), title="unrelated")
    transitions.claim(agent, reported.id)
    transitions.complete(agent, reported.id, summary="rotated the signing keys")
    assert _ids(signed_in, "signing keys") == [mine]
    # "#id" of a todo of another team jumps nowhere and shows nothing.
    response = signed_in.get("/queue/", {"q": f"#{theirs.id}"})
    assert response.status_code == 200 and "rotate the signing" not in response.content.decode()
    other = Client()
    other.force_login(mallory)
    assert _ids(other, "signing keys") == [reported.id, theirs.id]


def test_hash_id_jumps_to_the_drawer(signed_in, make_todo):
    todo = make_todo("somewhere in the pile")
    response = signed_in.get("/queue/", {"q": f"#{todo.id}"})
    assert response.status_code == 302 and response["Location"] == f"/todos/{todo.id}/"
    # A bare number is both that todo and a word; and the live refresh never jumps.
    assert todo.id in _ids(signed_in, str(todo.id))
    refresh = signed_in.get(
        "/queue/", {"q": f"#{todo.id}"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="queue"
    )
    assert refresh.status_code == 200


def test_nothing_typed_is_a_tsquery_operator(signed_in, make_todo):
    wanted = make_todo("a | b & !c").id
    make_todo("unrelated")
    for hostile in ("a | b", "!c & a", "b:*", "'a'", "a\\ b", "(a) <-> (b)", "a:A"):
        assert search_tsquery(hostile) is not None
        response = signed_in.get("/queue/", {"q": hostile})
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
            " summary_bytes, summary_document, artifact_truncated, artifact_bytes)"
            " SELECT t.id, 1, 1, 1, 'endpoint', %s, '', false, 0, 'agent:x', '', false, 0,"
            " now(), now(), now(), 'completed', 'done', s.said, false, 0,"
            " to_tsvector('simple', s.said), false, 0 FROM todos t,"
            " LATERAL (SELECT CASE WHEN t.id %% 2 = 0 THEN 'did the usual thing ' || t.id END)"
            " s(said)",
            [endpoint.pk],
        )
        # Every table the reads join, so the planner sees this test's rows only (a table's
        # row count outlives a rolled-back test, and autovacuum analyzes what other tests
        # committed).
        analyze(cursor, "todos", "todo_attempts", "endpoints", "teams")
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
    from switchboard.queues.models import TodoSearchDocument

    todo = make_todo("rebuild the docs", body="then publish them")
    [document] = TodoSearchDocument.objects.filter(todo_id=todo.id).values_list(
        "document", flat=True
    )
    assert {"rebuild", "docs", "publish"} <= {w.split(":")[0].strip("'") for w in document.split()}
    with connection.cursor() as cursor:  # as retention deletes: in SQL
        cursor.execute("DELETE FROM todos WHERE id = %s", [todo.id])
    assert not TodoSearchDocument.objects.filter(todo_id=todo.id).exists()


@pytest.mark.parametrize("walk", [1, 2, 5, 1000], ids=["walk 1", "walk 2", "walk 5", "walk all"])
@pytest.mark.parametrize("state", [None, "pending"], ids=["any state", "pending"])
def test_a_search_walks_then_looks_window_by_window_and_finds_what_one_look_would(
    signed_in, endpoint, make_todo, team, monkeypatch, walk, state
):
    """The page is looked for among the newest todos that pass the other filters first, each
    checked row by row (queues.selectors.SEARCH_WALK of them), then through the GIN indexes
    among the ids below where that walk stopped, window by window, eight times as many each
    time (SEARCH_WINDOW): with a window of 2 and a page of 3, a sparse match set spread over
    many windows gives the same pages, in the same order, as one look over every id, whether
    the walk checks 1 todo, 5 or all of them; a match in the oldest window is found, and
    "before" pages on from there."""
    from switchboard.queues.selectors import queue as selectors

    agent = Actor.agent(endpoint)
    made = []
    for n in range(40):
        todo = make_todo(f"chore {n}" if n % 7 else f"kiwi chore {n}")
        made.append(todo.id)
        if n % 11 == 3:  # a match through a summary only
            transitions.claim(agent, todo.id)
            transitions.fail(agent, todo.id, summary="the kiwi build broke")
        elif n % 5 == 1:  # not pending: left out by the state filter
            transitions.claim(agent, todo.id)
    every = QueueFilters(state=state, text="kiwi")
    expected = list(_board_todos([team.pk]).filter(_filter_q(every)).values_list("pk", flat=True))
    assert len(expected) >= 4 and made[0] in expected  # the oldest todo is a match
    monkeypatch.setattr(selectors, "SEARCH_WALK", walk)
    monkeypatch.setattr(selectors, "SEARCH_WINDOW", 2)
    monkeypatch.setattr(selectors, "BOARD_PAGE", 3)
    seen, before = [], None
    while True:
        rows, before = selectors.board_queue([team.pk], every, before_id=before)
        seen += [row.pk for row in rows]
        if before is None:
            break
    assert seen == expected
    # And through the page itself (the default walk and window), the same rows.
    monkeypatch.undo()
    if state is None:
        assert _ids(signed_in, "kiwi") == expected


@pytest.mark.parametrize("walk", [1, 2, 3])
def test_the_match_just_past_the_walk_is_found(make_todo, team, monkeypatch, walk):
    """The GIN look starts right below the last todo the walk checked: a match that is the
    first todo past the walk is on the page, and no walked todo is shown twice (the newest
    todo is a match too)."""
    from switchboard.queues.selectors import queue as selectors

    ids = [make_todo("kiwi" if n in (0, 4 - walk, 4) else "chore").id for n in range(5)][::-1]
    monkeypatch.setattr(selectors, "SEARCH_WALK", walk)
    rows, before = selectors.board_queue([team.pk], QueueFilters(text="kiwi"))
    assert [row.pk for row in rows] == [ids[0], ids[walk], ids[4]] and before is None


def test_the_walk_checks_rows_and_reads_no_gin_index(team, endpoint):
    """The walk's look (the newest todos passing the filters) probes each todo's document
    and its attempts by todo id and tests their stored words there (ts_match_vq): no GIN
    posting list is read, whatever the words, no probe is turned into a hashed subplan (a
    sequential scan of every attempt's words) and no sequential scan of todo_attempts."""
    from django.test.utils import CaptureQueriesContext

    from switchboard.queues.selectors import queue as selectors

    _many_analyzed_todos(endpoint)
    with CaptureQueriesContext(connection) as queries:
        rows, _ = selectors.board_queue([team.pk], QueueFilters(text="usual thing"))
    assert len(rows) == selectors.BOARD_PAGE
    [walk] = [q["sql"] for q in queries.captured_queries if "ts_match_vq" in q["sql"]]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + walk)
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "ts_match_vq(summary_document" in plan, plan
    assert "todo_attempts_todo_seq" in plan, plan
    assert "todo_search_documents_pkey" in plan, plan
    assert "todo_attempts_search" not in plan and "todo_search_documents_words" not in plan, plan
    assert "hashed SubPlan" not in plan, plan
    assert "Seq Scan on todo_attempts" not in plan, plan
    assert "Seq Scan on todo_search_documents" not in plan, plan
    # The listed ids are walked by the primary key, newest first, so the scan stops at the
    # page's last match: no sort of every walked todo.
    assert "Index Only Scan Backward using todos_pkey" in plan, plan
    assert "Sort" not in plan, plan


def test_a_search_leaves_out_a_todo_that_moved_on_before_its_row_was_read(
    endpoint, make_todo, team, monkeypatch
):
    """The page's ids are found first and its rows read after: a todo claimed in between no
    longer passes "pending" and is left out, and the older page still starts below the
    page's last id."""
    from switchboard.queues.selectors import queue as selectors

    agent = Actor.agent(endpoint)
    ids = [make_todo(f"kiwi {n}").id for n in range(4)][::-1]
    monkeypatch.setattr(selectors, "BOARD_PAGE", 2)
    found = selectors._searched_ids

    def claimed_in_between(*args):
        page = found(*args)
        transitions.claim(agent, ids[0])
        return page

    monkeypatch.setattr(selectors, "_searched_ids", claimed_in_between)
    rows, before = selectors.board_queue([team.pk], QueueFilters(state="pending", text="kiwi"))
    assert [row.pk for row in rows] == [ids[1]] and before == ids[1]


def test_a_summary_s_stored_words_follow_what_was_written(endpoint, make_todo, settings):
    """summary_document is PostgreSQL's own to_tsvector of the summary, NULL without one."""
    from switchboard.queues.models import TodoAttempt

    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0

    agent = Actor.agent(endpoint)
    todo = make_todo("t", max_attempts=5)
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, summary="Disk FULL on runner seven")
    transitions.claim(agent, todo.id)
    transitions.release(agent, todo.id)
    documents = list(
        TodoAttempt.objects.filter(todo_id=todo.id)
        .order_by("seq")
        .values_list("summary_document", flat=True)
    )
    assert documents[1] is None  # released without a summary
    assert {w.split(":")[0].strip("'") for w in documents[0].split()} == {
        "disk",
        "full",
        "on",
        "runner",
        "seven",
    }


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


# --- Second hardening round: a search cannot hold a core ---------------------------------

HYPHEN_CHAIN = "-".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(100))  # 199 chars


def test_a_search_of_too_many_word_parts_is_refused_and_says_why(signed_in, make_todo):
    """A 199-character "a-b-c-..." was 101 one-letter prefixes to PostgreSQL (1.4-2.4 s a page
    over 100,000 todos): refused before any query, the page saying why, on the first page,
    a live refresh and the bulk confirmation alike; a few hyphenated words still search."""
    from switchboard.queues.selectors import SEARCH_LEXEMES_MAX

    assert len(HYPHEN_CHAIN) == 199
    chained = make_todo("rebuild the a-b-c docs").id
    page = signed_in.get("/queue/", {"q": HYPHEN_CHAIN})
    assert page.status_code == 200
    text = page.content.decode()
    assert "data-search-refused" in text and f"at most {SEARCH_LEXEMES_MAX}" in text, text
    assert re.findall(r'<tr id="todo-(\d+)"', text) == []
    assert f'value="{HYPHEN_CHAIN}"' in text  # the search box keeps what was typed
    refresh = signed_in.get(
        "/queue/",
        {"q": HYPHEN_CHAIN, "shown": str(chained)},
        headers={"HX-Request": "true", "HX-Target": "queue"},
    )
    assert refresh.status_code == 200 and "data-search-refused" in refresh.content.decode()
    bulk = signed_in.get("/triage/", {"do": "rerun", "all": "1", "q": HYPHEN_CHAIN})
    assert bulk.status_code == 400 and f"at most {SEARCH_LEXEMES_MAX}" in bulk.content.decode()
    assert _ids(signed_in, "a-b-c rebuild") == [chained]
    # Sixteen ordinary words are fine; so is a UUID (six: five parts and the whole).
    assert _ids(signed_in, " ".join(["rebuild"] * 16)) == [chained]
    assert _ids(signed_in, "550e8400-e29b-41d4-a716-446655440000") == []


@pytest.mark.parametrize(
    "words",
    [
        HYPHEN_CHAIN,
        "a-b-c",
        "550e8400-e29b-41d4-a716-446655440000",
        "deploy.prod.eu-west-1",
        "foo_bar_baz qux",
        "user@example.com sent",
        "https://example.com/a/b?c=d",
        "v1.2.3-rc.4",
        "naïve—café x/y/z",
        "C:\\Users\\x\\file.txt",
    ],
)
def test_the_lexeme_count_is_never_below_postgresqls(words):
    """The cap counts what PostgreSQL would look up, or more: never fewer (a count below
    PostgreSQL's would let a costly search through)."""
    from switchboard.queues.selectors.search import _WORDISH, SEARCH_LEXEMES_MAX, _lexemes

    terms = [term for term in words.split() if _WORDISH.search(term)]
    ours = sum(_lexemes(term) for term in terms)
    raw = " & ".join("'{}':*".format(t.replace("\\", "\\\\").replace("'", "''")) for t in terms)
    with connection.cursor() as cursor:
        cursor.execute("SELECT numnode(to_tsquery('simple', %s))", [raw])
        (nodes,) = cursor.fetchone()
    theirs = (nodes + 1) // 2  # n operands joined by n - 1 operators
    assert ours >= theirs, (words, ours, theirs)
    if words == HYPHEN_CHAIN:
        assert theirs == 101 > SEARCH_LEXEMES_MAX


@pytest.mark.django_db(transaction=True)  # autocommit, as served: the timeout ends with it
def test_a_search_past_its_statement_timeout_is_stopped_and_refused(settings):
    """Whatever the caps miss runs under SET LOCAL statement_timeout: a statement past it is
    cancelled by PostgreSQL and the search refused, saying so; the connection serves on, and
    without a timeout once the search's transaction is over."""
    from switchboard.queues.selectors import SearchRefused, search_time_bound

    settings.SWITCHBOARD_SEARCH_TIMEOUT_SECONDS = 0.2
    with search_time_bound("docs", searcher=1), connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone() == ("200ms",)
    with pytest.raises(SearchRefused, match=r"longer than 0\.2 s and was stopped"):
        with search_time_bound("docs", searcher=1), connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(5)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone() == ("0",)
    with search_time_bound("", searcher=1), connection.cursor() as cursor:  # nothing added
        cursor.execute("SELECT pg_sleep(0.3)")


def test_the_queue_page_says_a_search_was_stopped(signed_in, make_todo, settings, monkeypatch):
    """The page's side of the timeout: a search whose statement PostgreSQL cancelled is a 200
    with the sentence and no rows, never a 500 (the slow statement is a real pg_sleep)."""
    from switchboard.board.views import queue as queue_view

    make_todo("rebuild docs")
    settings.SWITCHBOARD_SEARCH_TIMEOUT_SECONDS = 0.2
    real = slow_queue_reads(monkeypatch, 5)
    page = signed_in.get("/queue/", {"q": "docs"})
    assert page.status_code == 200
    text = page.content.decode()
    assert "took longer than 0.2 s and was stopped" in text
    assert re.findall(r'<tr id="todo-(\d+)"', text) == []
    monkeypatch.setattr(queue_view, "board_queue", real)
    assert _ids(signed_in, "docs")  # the next search on the same connection is served


@pytest.mark.django_db(transaction=True)  # each search its own connection, as served
def test_one_person_has_at_most_their_slots_of_searches_running(settings):
    """Searches one person has running at once are capped across every process (advisory
    locks held by the search's transaction): past the cap a search is refused at once, saying
    so, while another person searches on; a slot is free again once its search is over."""
    from switchboard.queues.selectors import SearchRefused, search_time_bound

    settings.SWITCHBOARD_SEARCHES_PER_USER = 2
    holding, release = threading.Barrier(3), threading.Event()
    errors = []

    def hold(searcher):
        try:
            with search_time_bound("docs", searcher=searcher):
                holding.wait(timeout=10)
                release.wait(timeout=10)
        except Exception as exc:  # the test's assertion below names it
            errors.append(exc)
            holding.abort()
        finally:
            connection.close()

    threads = [threading.Thread(target=hold, args=(7,)) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        holding.wait(timeout=10)  # both of person 7's slots are taken
        with pytest.raises(SearchRefused, match="You have 2 searches running already"):
            with search_time_bound("docs", searcher=7):
                pass
        with search_time_bound("docs", searcher=8):  # someone else is not held up
            pass
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=10)
    assert errors == []
    with search_time_bound("docs", searcher=7):  # their searches are over: a slot is free
        pass
