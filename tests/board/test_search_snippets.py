"""A search explains itself: each hit says where it matched (the title, the body, a try's
summary or result) with the words marked in a stretch of that text, escaped first (a
worker's summary cannot add markup); a tab's count that stopped early says it is a lower
bound."""

from __future__ import annotations

import re

import pytest

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor

pytestmark = pytest.mark.django_db


def _row(page: str, todo_id: int) -> str:
    start = page.index(f'id="todo-{todo_id}"')
    return page[start : page.index("</tr>", start)]


def _ended(endpoint, title: str, **close) -> int:
    agent = Actor.agent(endpoint)
    todo = transitions.create_todo(agent, title=title)[0]
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, **close) if "retryable" in close else transitions.complete(
        agent, todo.id, **close
    )
    return todo.id


def test_each_hit_says_where_it_matched_with_the_words_marked(signed_in, endpoint, make_todo):
    titled = make_todo("Feed the quokka").id
    bodied = make_todo("Zoo chores", body="Remember the quokka's water bowl.").id
    summed = _ended(
        endpoint, "Nightly import", summary="Stopped: the quokka table is locked", retryable=True
    )
    resulted = _ended(endpoint, "Classify the animal", result={"verdict": "quokka"})
    make_todo("Feed the wombat")
    page = signed_in.get("/queue/?q=quokka").content.decode()

    assert "in the title:" in _row(page, titled)
    assert "Feed the <mark>quokka</mark>" in _row(page, titled)
    assert "in the body:" in _row(page, bodied)
    assert "<mark>quokka</mark>" in _row(page, bodied)
    # A try's words are a worker's: in the untrusted frame, with the try they came from.
    summary = _row(page, summed)
    assert "in try 1&#x27;s summary:" in summary or "in try 1's summary:" in summary
    assert "untrusted" in summary and "Stopped: the <mark>quokka</mark> table is locked" in summary
    result = _row(page, resulted)
    assert "1&#x27;s result:" in result or "1's result:" in result
    assert "<mark>quokka</mark>" in result
    assert "wombat" not in page


def test_a_snippet_is_escaped_before_it_is_marked(signed_in, endpoint):
    hostile = (
        'if 5 < 6 & "quokka" > 2 then <img src=x onerror="window.__pwned=1"> quokka'
        " </mark><script>x()</script> \x02wombat\x03 <b>bold</b>"
    )
    todo_id = _ended(endpoint, "Nightly import", summary=hostile, retryable=True)
    row = _row(signed_in.get("/queue/?q=quokka").content.decode(), todo_id)
    at = row.index('class="snippet-text">')
    snippet = row[at : row.index("</p>", at)]
    for markup in ("<img", "<script", "<b>", "</b>"):
        assert markup not in snippet
    assert "<mark>quokka</mark>&quot; &gt; 2" in snippet
    # Only the search's own words are marked (never the text's own control characters), and
    # every mark is closed.
    assert set(re.findall(r"<mark>(.*?)</mark>", snippet)) == {"quokka"}
    assert snippet.count("<mark>") == snippet.count("</mark>")
    assert "<mark>wombat" not in snippet


def test_a_count_that_stopped_early_says_at_least(signed_in, endpoint, make_todo):
    for n in range(105):
        make_todo(f"alpha {n}")
    page = signed_in.get("/queue/?q=alpha").content.decode()
    tabs = page[page.index('class="statetabs"') : page.index("</nav>", page.index("statetabs"))]
    pending = tabs[tabs.index('data-state="pending"') : tabs.index("</a>", tabs.index("pending"))]
    [n] = re.findall(r"≥(\d+)<", pending)
    assert 100 <= int(n) < 105 and f"At least {n}:" in pending and "(at least)" in pending
    assert "+" not in re.sub(r"<[^>]*>", "", tabs)  # no "100+" that reads as exact
    # Without a search the same counts are exact.
    plain = signed_in.get("/queue/").content.decode()
    assert "≥" not in plain[plain.index('class="statetabs"') :].split("</nav>")[0]
