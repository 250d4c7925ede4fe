"""Triage at scale (issue 30): the dead letters grouped by reason, in the words their rows say,
and within a reason by the start of their last try's summary, each group counted and offering
Rerun… and Cancel… for exactly its todos through the bulk confirmation; scoped like every
read (another team's endpoint answers as an unknown one does). Also: results are searched,
and the queue's tab counts follow the search."""

from __future__ import annotations

import html
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from switchboard.queues import endpoints, transitions
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests.board.test_triage import _items, died_out, failed_out, not_retryable

pytestmark = pytest.mark.django_db


def _groups(page: str) -> dict[str, int]:
    """Each reason group of the page: its words and its count."""
    found = re.findall(
        r'data-reason="([^"]*)".*?<strong data-count>(\d+)</strong>', page, flags=re.S
    )
    return {html.unescape(reason): int(n) for reason, n in found}


def test_dead_letters_are_grouped_by_reason_and_error_with_counts(signed_in, endpoint):
    for _ in range(3):
        failed_out(endpoint, tries=2, summary="exit 1")
    failed_out(endpoint, tries=2, summary="segfault")
    for _ in range(2):
        not_retryable(endpoint)
    died_out(endpoint, tries=2)
    with CaptureQueriesContext(connection) as queries:
        response = signed_in.get("/queue/dead/")
    assert response.status_code == 200
    page = response.content.decode()
    assert _groups(page) == {"failed 2 of 2": 4, "said not retryable": 2, "died 2 times": 1}
    # Within "failed 2 of 2": the errors, the most common first, each counted.
    section = page[page.index('data-reason="failed 2 of 2"') :]
    section = section[: section.index("</section>")]
    errors = re.findall(r'data-error-count="(\d+)">.*?untrusted-body">([^<]*)<', section, re.S)
    assert errors == [("3", "exit 1 (try 2)"), ("1", "segfault (try 2)")]
    # The summaries are the workers' text: escaped, in the untrusted frame.
    assert "<script>" not in page and "&lt;script&gt;" in page
    # The page's cost does not grow with its dead letters: session, user, endpoints, groups.
    assert len(queries) <= 4, [q["sql"][:80] for q in queries]


def test_a_groups_rerun_takes_exactly_its_todos(signed_in, endpoint, make_endpoint):
    exits = [failed_out(endpoint, tries=1, summary="exit 1") for _ in range(3)]
    segfault = failed_out(endpoint, tries=1, summary="segfault")
    other = not_retryable(endpoint)
    elsewhere = failed_out(make_endpoint("agent-b"), tries=1, summary="exit 1")
    # One error of the reason, on one endpoint.
    confirm = signed_in.get(
        "/triage/",
        {
            "do": "rerun",
            "reason": "failed 1 of 1",
            "error": "exit 1 (try 1)",
            "endpoint": endpoint.pk,
        },
    ).content.decode()
    assert "Rerun 3 todos?" in confirm and "Dead letters by reason" in confirm
    assert {int(i.split("=")[0]) for i in _items(confirm).split()} == set(exits)
    assert Todo.objects.filter(state="dead").count() == 6  # nothing yet
    done = signed_in.post(
        "/triage/",
        {
            "do": "rerun",
            "items": _items(confirm),
            "reason": "failed 1 of 1",
            "endpoint": endpoint.pk,
        },
    ).content.decode()
    assert "Rerun: 3 done" in done
    assert set(Todo.objects.filter(state="pending").values_list("pk", flat=True)) == set(exits)
    # The whole reason on every endpoint: the rest of "failed 1 of 1", not the other reason.
    confirm = signed_in.get("/triage/", {"do": "cancel", "reason": "failed 1 of 1"}).content
    assert {int(i.split("=")[0]) for i in _items(confirm.decode()).split()} == {segfault, elsewhere}
    assert Todo.objects.get(pk=other).state == "dead"


def test_words_no_group_has_pick_nothing_and_nothing_breaks(signed_in, endpoint):
    failed_out(endpoint, tries=1)
    for reason in ("no such reason", "x" * 5000, "failed 1 of 1\x00", "<script>"):
        response = signed_in.get("/triage/", {"do": "rerun", "reason": reason, "error": "y" * 9000})
        assert response.status_code == 200
        page = response.content.decode()
        assert "Nothing here to rerun" in page and "<script>" not in page
    assert Todo.objects.get().state == "dead"


def test_another_teams_endpoint_answers_as_an_unknown_one(signed_in, endpoint, make_user):
    failed_out(endpoint, title="mine", tries=1)
    mallory = make_user("mallory")
    theirs, _ = endpoints.vend(mallory.teams.get(), "their-agent", verbs="all")
    failed_out(theirs, title="secret title of theirs", tries=1, summary="their secret error")
    page = signed_in.get("/queue/dead/").content.decode()
    assert _groups(page) == {"failed 1 of 1": 1} and "their secret" not in page
    answers = [
        signed_in.get("/queue/dead/", {"endpoint": e}) for e in (theirs.pk, 987654321, "abc")
    ]
    assert [a.status_code for a in answers] == [404, 404, 404]
    assert len({a.content for a in answers}) == 1
    forged = signed_in.get(
        "/triage/", {"do": "rerun", "reason": "failed 1 of 1", "endpoint": theirs.pk}
    )
    assert forged.status_code == 404
    assert Todo.objects.get(endpoint=theirs).state == "dead"


def test_the_dead_tab_links_to_the_groups(signed_in, endpoint):
    failed_out(endpoint, tries=1)
    page = signed_in.get("/queue/", {"state": "dead", "endpoint": endpoint.pk}).content.decode()
    assert f'href="/queue/dead/?endpoint={endpoint.pk}"' in page
    assert 'href="/queue/dead/' not in signed_in.get("/queue/").content.decode()


def test_an_empty_page_says_so(signed_in, endpoint):
    page = signed_in.get("/queue/dead/").content.decode()
    assert "No dead letters" in page and _groups(page) == {}


def _ids(client, q: str) -> list[int]:
    page = client.get("/queue/", {"q": q}).content.decode()
    return [int(n) for n in re.findall(r'<tr id="todo-(\d+)"', page)]


def test_results_are_searched(signed_in, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    done = make_todo("summarize the report").id
    transitions.claim(agent, done)
    transitions.complete(agent, done, result={"verdict": "quokka", "pages": 17})
    failed = make_todo("parse the log").id
    transitions.claim(agent, failed)
    transitions.fail(agent, failed, result={"reason": "wombat shortage"}, summary="no luck")
    make_todo("a quokka alone", body="a wombat alone")  # one word of each search
    assert _ids(signed_in, "verdict quokka") == [done]  # a key and a string value
    assert _ids(signed_in, "wombat shortage") == [failed]


def _tabs(page: str) -> dict[str, str]:
    return dict(re.findall(r'data-state="(\w+)">[^<]*<span class="count">([^<]*)</span>', page))


def test_the_tabs_count_what_the_search_finds(signed_in, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    for n in range(3):
        make_todo(f"zebra pending {n}")
    claimed = make_todo("zebra claimed").id
    transitions.claim(agent, claimed)
    failed_out(endpoint, title="zebra dead", tries=1)
    for n in range(4):
        make_todo(f"giraffe pending {n}")
    tabs = _tabs(signed_in.get("/queue/", {"q": "zebra"}).content.decode())
    assert (tabs["all"], tabs["pending"], tabs["claimed"], tabs["dead"]) == ("5", "3", "1", "1")
    assert tabs["done"] == "0"
    tabs = _tabs(signed_in.get("/queue/").content.decode())
    assert (tabs["all"], tabs["pending"]) == ("9", "7")


def test_the_largest_reasons_are_shown_and_the_rest_counted(signed_in, endpoint, monkeypatch):
    from switchboard.board import triage

    monkeypatch.setattr(triage, "REASONS_SHOWN", 1)
    for _ in range(2):
        failed_out(endpoint, tries=1)
    not_retryable(endpoint)
    died_out(endpoint, tries=1)
    page = signed_in.get("/queue/dead/").content.decode()
    assert _groups(page) == {"failed 1 of 1": 2}
    assert 'data-other-reasons="2"' in page and "… and 2 more dead letters under 2" in page


def test_the_endpoint_filter_keeps_its_choice_on_both_pages(signed_in, endpoint, make_endpoint):
    """One filter (board/_endpoint_filter.html) on the queue and the dead letters: the
    chosen endpoint stays selected, a revoked one says so."""
    other = make_endpoint("agent-b")
    transitions.revoke_endpoint(None, other)
    for url in (f"/queue/?endpoint={endpoint.pk}", f"/queue/dead/?endpoint={endpoint.pk}"):
        page = signed_in.get(url).content.decode()
        chosen = re.findall(r'<option value="(\d*)" selected>', page)
        assert chosen == [str(endpoint.pk)], url
        assert f'<option value="{other.pk}">agent-b (revoked)</option>' in page, url
    for url in ("/queue/", "/queue/dead/"):
        assert '" selected>' not in signed_in.get(url).content.decode()
