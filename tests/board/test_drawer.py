"""The todo drawer over Django's test client: content, escaping, scoping, query counts."""

from __future__ import annotations

from django.test import Client

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
from tests.board.history import XSS_SUMMARY, done_with_history, mixed_history

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "drawer"}


def test_drawer_shows_every_attempt_outcome_and_the_died_sentence(signed_in, endpoint, user):
    todo_id = done_with_history(endpoint, user)
    page = signed_in.get(f"/todos/{todo_id}/", **HTMX).content.decode()
    assert f"todo #{todo_id} · try 4 · round 1" in page  # the completing try is selected
    assert 'id="drawer-panel"' in page and "<html" not in page  # a partial for htmx
    for words in ("try 1: failed", "try 2: died: lease lapsed, reaped", "try 3: released"):
        assert words in page
    assert "Rebuilt the docs; 2 warnings fixed." in page
    assert "&quot;pages&quot;: 41" in page  # the result of record
    died = signed_in.get(f"/todos/{todo_id}/?attempt=2").content.decode()
    assert "after its last heartbeat at" in died and "died — reported nothing" in died
    assert "<html" in died  # without htmx it is a whole page


def test_untrusted_summary_is_escaped_and_framed(signed_in, endpoint):
    todo_id = mixed_history(endpoint)
    page = signed_in.get(f"/todos/{todo_id}/?attempt=1").content.decode()
    assert XSS_SUMMARY not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "written by its worker (harness/buildbox/ci-fixer/run-41)" in page
    assert "mcp://cairn/r-41" in page and 'href="mcp://' not in page


def test_only_an_untruncated_https_artifact_is_a_link(signed_in, endpoint, user):
    todo_id = done_with_history(endpoint, user)
    page = signed_in.get(f"/todos/{todo_id}/?attempt=4").content.decode()
    assert '<a href="https://ci.example.com/builds/43" rel="noopener noreferrer nofollow"' in page
    agent = Actor.agent(endpoint)
    other, _ = transitions.create_todo(Actor.agent(endpoint), title="long artifact")
    transitions.claim(agent, other.id)
    long_url = "https://example.com/" + "a" * 600
    transitions.complete(agent, other.id, artifact=long_url)
    page = signed_in.get(f"/todos/{other.id}/").content.decode()
    assert "truncated from 620 bytes: not a link" in page
    assert 'href="https://example.com/aaaa' not in page


def test_foreign_and_unknown_todos_are_the_same_404(make_user, endpoint):
    todo_id = mixed_history(endpoint)
    stranger = Client()
    stranger.force_login(make_user("mallory"))
    foreign = stranger.get(f"/todos/{todo_id}/")
    unknown = stranger.get("/todos/987654321/")
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.content == unknown.content
    foreign_htmx = stranger.get(f"/todos/{todo_id}/", **HTMX)
    assert foreign_htmx.content == unknown.content
    for action in ("claim", "cancel", "rerun"):
        refused = stranger.post(f"/todos/{todo_id}/{action}/", {"seen": "x"})
        assert refused.status_code == 404 and refused.content == unknown.content


def test_drawer_query_count_does_not_grow_with_attempts(
    signed_in, endpoint, user, django_assert_num_queries
):
    small = done_with_history(endpoint, user, title="small")
    big = done_with_history(endpoint, user, title="big")
    agent = Actor.agent(endpoint)
    transitions.rerun(Actor.human(user), big)
    for _ in range(6):
        transitions.claim(agent, big)
        transitions.release(agent, big)
    # session, user, the todo (scoped to the user's teams), its attempts, people's actions
    for todo_id in (small, big):
        with django_assert_num_queries(5):
            assert signed_in.get(f"/todos/{todo_id}/", **HTMX).status_code == 200


def test_signed_out_drawer_goes_to_sign_in(client, endpoint):
    todo_id = mixed_history(endpoint)
    response = client.get(f"/todos/{todo_id}/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_a_history_cap_over_fifty_shows_every_kept_attempt_in_the_same_queries(
    signed_in, endpoint, settings, django_assert_num_queries
):
    settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO = 60
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="churn")
    for _ in range(55):
        transitions.claim(agent, todo.id)
        transitions.release(agent, todo.id)
    # session, user, the todo, its attempts (all 55 kept), people's actions
    with django_assert_num_queries(5):
        page = signed_in.get(f"/todos/{todo.id}/?attempt=1", **HTMX).content.decode()
    assert "Try 1 of round 1" in page and "+53 more released" in page
