"""The token cache (agents/token_cache.py): an agent's request runs no statement for its token
while the server's doorbell connection listens, and every change to the endpoint (a revoke, a
rotation, a pause, its verbs, a change by hand in SQL) is heard and applied within a second
(measured: milliseconds); a lost LISTEN connection empties it."""

from __future__ import annotations

import time

import pytest
from django.db import connection

from switchboard.agents.token_cache import TokenCache
from switchboard.queues import endpoints, transitions
from switchboard.queues.models import Endpoint
from switchboard.queues.notify import ENDPOINT_CHANGED
from switchboard.queues.notify.listener import APPLICATION_NAME
from tests.agents.api_helpers import post, statements_run

LOOKUP = "endpoint_by_token"
# A change must be heard within this (it takes milliseconds); the tests report the time.
HEARD_WITHIN_SECONDS = 1.0


def _warm(live_server, token, monkeypatch) -> None:
    """Ask until a request runs no lookup: the server's doorbell connection is listening and
    the token is kept (the first request starts that connection, so its fill may be early)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with statements_run(monkeypatch) as names:
            assert post(live_server.url, "list_todos", {}, token=token).status_code == 200
        if LOOKUP not in names:
            return
        time.sleep(0.02)
    raise AssertionError("the token was looked up on every request for 10 s")


def test_a_token_is_looked_up_once_then_kept(live_server, vend, monkeypatch):
    _, token = vend("kept")
    with statements_run(monkeypatch) as first:
        assert post(live_server.url, "list_todos", {}, token=token).status_code == 200
    assert first[0] == LOOKUP
    _warm(live_server, token, monkeypatch)
    for verb, body in (("create_todo", {"title": "t"}), ("claim_next", {}), ("list_todos", {})):
        with statements_run(monkeypatch) as names:
            assert post(live_server.url, verb, body, token=token).status_code == 200
        assert LOOKUP not in names and names, (verb, names)


def test_unknown_and_revoked_tokens_are_never_kept(live_server, vend, monkeypatch):
    endpoint, token = vend("never-kept")
    transitions.revoke_endpoint(None, endpoint)
    for bad in (token, "sbe_nosuchtoken"):
        for _ in range(3):
            with statements_run(monkeypatch) as names:
                assert post(live_server.url, "list_todos", {}, token=bad).status_code == 401
            assert names == [LOOKUP]
    assert not live_server.token_cache().holds(endpoint.pk)


def _heard(live_server, endpoint) -> float:
    took = live_server.forgets(endpoint)
    assert took < HEARD_WITHIN_SECONDS, f"heard after {took:.3f} s"
    return took


def test_a_revoke_is_heard_and_refused(live_server, vend, monkeypatch):
    endpoint, token = vend("revoked-kept")
    _warm(live_server, token, monkeypatch)
    transitions.revoke_endpoint(None, endpoint)
    _heard(live_server, endpoint)
    response = post(live_server.url, "claim_next", {}, token=token)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "This endpoint has been revoked."


def test_a_rotation_is_heard_and_the_old_token_refused(live_server, vend, monkeypatch):
    endpoint, token = vend("rotated-kept")
    _warm(live_server, token, monkeypatch)
    new_token = endpoints.rotate(endpoint)
    _heard(live_server, endpoint)
    assert post(live_server.url, "list_todos", {}, token=token).status_code == 401
    assert post(live_server.url, "list_todos", {}, token=new_token).status_code == 200


def test_a_pause_and_a_resume_are_heard(live_server, vend, monkeypatch, user):
    endpoint, token = vend("paused-kept")
    _warm(live_server, token, monkeypatch)
    post(live_server.url, "create_todo", {"title": "waits"}, token=token)
    endpoints.pause(endpoint, user=user)
    _heard(live_server, endpoint)
    assert post(live_server.url, "claim_next", {}, token=token).json()["paused"] is True
    _warm(live_server, token, monkeypatch)  # kept again, paused
    endpoints.resume(endpoint, user=user)
    _heard(live_server, endpoint)
    answer = post(live_server.url, "claim_next", {}, token=token).json()
    assert answer["paused"] is False and answer["todo"]["title"] == "waits"


def test_a_change_by_hand_in_sql_is_heard(live_server, vend, monkeypatch):
    """Whatever writes the row: here an UPDATE of the verbs, as an operator would type it."""
    endpoint, token = vend("by-hand")
    _warm(live_server, token, monkeypatch)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE endpoints SET verbs = '{list_todos}' WHERE id = %s", [endpoint.pk])
    _heard(live_server, endpoint)
    assert post(live_server.url, "claim_next", {}, token=token).status_code == 403


def test_the_admission_window_a_claim_writes_is_not_a_change(live_server, vend, monkeypatch):
    """SWITCHBOARD_CLAIMS_PER_MINUTE writes the endpoint's row on every claim: that must not
    make every process forget the endpoint (the trigger's WHEN leaves those columns out)."""
    endpoint, token = vend("admitted")
    _warm(live_server, token, monkeypatch)
    Endpoint.objects.filter(pk=endpoint.pk).update(admission_claims=7)
    time.sleep(0.3)  # what would be heard is heard in milliseconds
    assert live_server.token_cache().holds(endpoint.pk)


def test_a_lost_listen_connection_empties_the_cache(live_server, vend, monkeypatch):
    endpoint, token = vend("lost-listener")
    _warm(live_server, token, monkeypatch)
    cache = live_server.token_cache()
    generation = cache.generation
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND datname = current_database()",
            [APPLICATION_NAME],
        )
        assert cursor.fetchall(), "no LISTEN connection to end"
    deadline = time.monotonic() + 5
    while cache.generation == generation and time.monotonic() < deadline:
        time.sleep(0.005)
    assert not cache.holds(endpoint.pk)
    with statements_run(monkeypatch) as names:
        assert post(live_server.url, "list_todos", {}, token=token).status_code == 200
    assert names[0] == LOOKUP
    _warm(live_server, token, monkeypatch)  # and it is kept again once the connection is back


# --- The cache itself ----------------------------------------------------------------------


@pytest.fixture
def cache() -> TokenCache:
    cache = TokenCache()
    cache.listening(True)
    return cache


def test_a_fill_begun_before_a_forgetting_is_not_kept(cache):
    generation = cache.generation
    cache.forget(99)  # another endpoint's change heard while this lookup ran
    cache.fill("d", 1, ("row",), generation)
    assert cache.get("d") is None
    cache.fill("d", 1, ("row",), cache.generation)
    assert cache.get("d") == ("row",)


def test_nothing_is_kept_or_trusted_while_not_listening(cache):
    cache.fill("d", 1, ("row",), cache.generation)
    cache.listening(False)
    assert cache.get("d") is None
    cache.fill("d", 1, ("row",), cache.generation)
    cache.listening(True)
    assert cache.get("d") is None and len(cache) == 0


def test_what_is_heard(cache):
    for endpoint_id, digest in ((1, "a"), (2, "b")):
        cache.fill(digest, endpoint_id, (endpoint_id,), cache.generation)
    cache.heard(ENDPOINT_CHANGED.read("1"))
    assert cache.get("a") is None and cache.get("b") == (2,)
    cache.heard(ENDPOINT_CHANGED.read("*"))
    assert cache.get("b") is None
    cache.fill("c", 3, (3,), cache.generation)
    cache.fill("c2", 3, (3,), cache.generation)  # a rotation seen by its new token
    assert cache.get("c") is None and cache.get("c2") == (3,) and len(cache) == 1


def test_a_todo_with_then_is_one_statement(live_server, vend, monkeypatch):
    """The agents' path at its leanest (issue 31): the close and the next claim in one
    statement (tests/agents/test_then.py has its edges), nothing for the token once it is
    kept."""
    _, token = vend("one-statement")
    for n in range(3):
        post(live_server.url, "create_todo", {"title": f"t{n}"}, token=token)
    _warm(live_server, token, monkeypatch)
    claimed = post(live_server.url, "claim_next", {}, token=token).json()
    for _ in range(2):
        ids = {"todo_id": claimed["todo"]["id"], "attempt_seq": claimed["attempt_seq"]}
        with statements_run(monkeypatch) as names:
            response = post(live_server.url, "complete", {**ids, "then": {}}, token=token)
        claimed = response.json()["next"]
        assert claimed["todo"] is not None
        assert names == ["close_then_claim_next"]


def test_a_full_cache_starts_again_empty(cache, monkeypatch):
    from switchboard.agents import token_cache

    monkeypatch.setattr(token_cache, "MAX_ENDPOINTS", 2)
    for endpoint_id in (1, 2, 3):
        cache.fill(f"d{endpoint_id}", endpoint_id, (endpoint_id,), cache.generation)
    assert len(cache) == 1 and cache.get("d3") == (3,) and not cache.holds(1)
