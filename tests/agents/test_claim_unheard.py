"""A claim whose client left before its answer could reach it is given back at once: a close
with ``then`` (with or without a wait, complete's one statement and release's two, over HTTP
and MCP), a claim_next that does not wait and a claim by id. Sent on a raw socket that closes
right after the request (red team, round 3: with ``then: {}`` the next todo stayed claimed for
nobody until its lease lapsed, 8 of 8 trials). The next claimer's history says why."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlsplit

import psycopg
import pytest

from switchboard.queues.db.availability import connection_params
from switchboard.queues.models import Todo, TodoAttempt, TodoState
from tests.agents.test_then import _call, _claimed

pytestmark = pytest.mark.django_db(transaction=True)

GONE = "the client that claimed this went away"


def _send_and_leave(
    base: str, path: str, token: str, body: dict, endpoint, headers: str = ""
) -> None:
    """The request, whole, on a connection closed as soon as it is sent (nothing is read).

    The attempts' table is held in SHARE mode until the connection is closed and a moment
    more: every call here writes an attempt (a claim inserts one, a close updates one), so its
    statement waits for it, and the server looks at the connection after the client has
    surely left. (It held the endpoint's row until the attempt's foreign key to it, whose
    check locked that row, was dropped: migration 0040.) Without it a busy
    machine could run the whole call, and the look, before this thread got back to closing
    the socket: an answer to a client still there, rightly kept (a make test run saw it)."""
    parts = urlsplit(base)
    payload = json.dumps(body).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n{headers}"
        f"Content-Length: {len(payload)}\r\n\r\n"
    ).encode()
    with psycopg.connect(**connection_params()) as holder:
        holder.execute("LOCK TABLE todo_attempts IN SHARE MODE")
        with socket.create_connection((parts.hostname, parts.port)) as sock:
            sock.sendall(head + payload)
        time.sleep(0.2)  # the server's loop reads the end of the connection meanwhile


def _given_back(endpoint) -> TodoAttempt:
    """The attempt released for its departed client (waited for), once nothing of the
    endpoint is claimed."""
    deadline = time.monotonic() + 10
    attempts = TodoAttempt.objects.filter(todo__endpoint=endpoint, summary__contains=GONE)
    while time.monotonic() < deadline and not attempts.exists():
        time.sleep(0.05)
    claimed = Todo.objects.filter(endpoint=endpoint, state=TodoState.CLAIMED)
    assert not claimed.exists(), "claimed for a client that is gone"
    [attempt] = attempts
    assert attempt.outcome == "released"
    return attempt


def _second(base: str, token: str) -> int:
    return _call(base, token, "create_todo", {"title": "the next one"})["todo"]["id"]


@pytest.mark.parametrize("verb", ["complete", "release", "fail"])
@pytest.mark.parametrize("then", [{}, {"wait_seconds": 5}])
def test_a_close_whose_client_left_gives_back_what_its_then_claimed(live_server, vend, verb, then):
    endpoint, token = vend(f"then-{verb}-{len(then)}", verbs="all")
    first = _claimed(live_server.url, token, "first")
    _second(live_server.url, token)
    _send_and_leave(
        live_server.url,
        f"/api/v1/{verb}",
        token,
        {"todo_id": first["todo"]["id"], "attempt_seq": first["attempt_seq"], "then": then},
        endpoint,
    )
    _given_back(endpoint)
    # The close stands (a release's then may claim the released todo again: given back too).
    assert TodoAttempt.objects.get(todo_id=first["todo"]["id"], seq=first["attempt_seq"]).outcome


@pytest.mark.parametrize("verb", ["claim_next", "claim"])
def test_a_claim_whose_client_left_is_given_back(live_server, vend, verb):
    endpoint, token = vend(f"leave-{verb}", verbs="all")
    todo_id = _second(live_server.url, token)
    body = {"todo_id": todo_id} if verb == "claim" else {}
    _send_and_leave(live_server.url, f"/api/v1/{verb}", token, body, endpoint)
    assert _given_back(endpoint).todo_id == todo_id


def test_an_mcp_complete_whose_client_left_gives_back_what_its_then_claimed(live_server, vend):
    endpoint, token = vend("then-mcp", verbs="all")
    first = _claimed(live_server.url, token, "first")
    second = _second(live_server.url, token)
    arguments = {"todo_id": first["todo"]["id"], "attempt_seq": first["attempt_seq"], "then": {}}
    _send_and_leave(
        live_server.url,
        "/mcp",
        token,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "complete", "arguments": arguments},
        },
        endpoint,
        headers="Accept: application/json, text/event-stream\r\n"
        "MCP-Protocol-Version: 2025-06-18\r\n",
    )
    assert _given_back(endpoint).todo_id == second


def test_a_client_that_stays_keeps_its_claim(live_server, vend):
    """The look at the connection costs a client that reads its answer nothing."""
    _, token = vend("stays", verbs="all")
    first = _claimed(live_server.url, token, "first")
    second = _second(live_server.url, token)
    closed = _call(
        live_server.url,
        token,
        "complete",
        {"todo_id": first["todo"]["id"], "attempt_seq": first["attempt_seq"], "then": {}},
    )
    assert closed["next"]["todo"]["id"] == second
    time.sleep(0.3)
    assert Todo.objects.get(pk=second).state == TodoState.CLAIMED
