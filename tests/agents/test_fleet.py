"""Fleets of waiting agents (issue 12): a served process (``switchboard serve``, one uvicorn
worker) holds hundreds of idle long-polls while the API and the Board answer; a ring wakes
one waiter; a client that left claims nothing; the caps answer at once; slow bodies cost
nothing. Timing was in bench/'s fleet section, retired with issue 42 (docs/benchmarks.md,
"Retired sections", has its last figures); these assert behaviour, with bounds loose enough
for two shared cores."""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import psutil
import pytest

from switchboard.queues import endpoints, transitions
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests import loopback
from tests.crash.conftest import base_env
from tests.crash.harness import Procs, until_quiet

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WAITERS = 500
# Other requests answer "normally": in a small fraction of a long-poll's wait. Loose on
# purpose (2 shared cores, 500 open connections in this very test process too).
NORMAL_SECONDS = 2.0


@pytest.fixture
def served(tmp_path, test_db_url):
    procs = Procs(tmp_path)
    env = {
        **base_env(),
        "DATABASE_URL": test_db_url,
        "SWITCHBOARD_BODY_TIMEOUT_SECONDS": "2",
        "SWITCHBOARD_WAITERS_PER_ENDPOINT": "5000",
    }
    try:
        _server, base = procs.serve(env, workers=1)
        yield base, procs
    finally:
        procs.close()


@pytest.fixture
def test_db_url(transactional_db):
    from django.db import connection

    from switchboard import dburl

    return dburl.build(connection.settings_dict)


def _tokens(team, count: int) -> list[tuple]:
    return [endpoints.vend(team, f"fleet-{n}") for n in range(count)]


async def _claim_next(
    client: httpx.AsyncClient, token: str, wait: float
) -> tuple[int, dict, float]:
    started = time.monotonic()
    response = await client.post(
        "/api/v1/claim_next",
        json={"wait_seconds": wait},
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code, response.json(), time.monotonic() - started


def _server_tree(procs) -> list[psutil.Process]:
    tree = []
    for proc in procs.started:
        try:
            root = psutil.Process(proc.pid)
            tree += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return tree


def _established(procs) -> int:
    """The served process tree's established sockets."""
    established = 0
    for each in _server_tree(procs):
        try:
            established += sum(
                1 for c in each.net_connections(kind="tcp") if c.status == psutil.CONN_ESTABLISHED
            )
        except psutil.NoSuchProcess:
            continue
    return established


def test_hundreds_of_idle_long_polls_leave_the_api_and_the_board_answering(served, team):
    base, procs = served
    vended = _tokens(team, 10)
    wait = 12.0

    async def scenario():
        limits = httpx.Limits(max_connections=WAITERS + 20, max_keepalive_connections=WAITERS + 20)
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=wait + 20) as client:
            waiters = [
                asyncio.create_task(_claim_next(client, vended[n % 10][1], wait))
                for n in range(WAITERS)
            ]
            # Every waiter read, authenticated and parked: all connected, the server quiet.
            await asyncio.to_thread(
                until_quiet,
                lambda: _server_tree(procs),
                seconds=wait - 4,
                what=f"{WAITERS} waiters parked",
                ready=lambda: _established(procs) >= WAITERS,
            )
            others = []
            for _ in range(5):
                started = time.monotonic()
                listed = await client.post(
                    "/api/v1/list_todos",
                    json={},
                    headers={"Authorization": f"Bearer {vended[0][1]}"},
                )
                board = await client.get("/login/")
                others.append((listed.status_code, board.status_code, time.monotonic() - started))
            return await asyncio.gather(*waiters), others

    results, others = asyncio.run(scenario())
    assert all(listed == 200 and board == 200 for listed, board, _ in others), others
    assert max(took for *_, took in others) < NORMAL_SECONDS, others
    assert [status for status, _, _ in results] == [200] * WAITERS
    assert all(body["todo"] is None for _, body, _ in results)
    assert min(took for *_, took in results) >= wait - 0.1  # each waited its whole wait


def test_a_new_todo_wakes_exactly_one_of_its_endpoints_waiters(served, team):
    base, _ = served
    [(endpoint, token), (_, other_token)] = _tokens(team, 2)

    async def scenario():
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            mine = [asyncio.create_task(_claim_next(client, token, 5)) for _ in range(20)]
            theirs = [asyncio.create_task(_claim_next(client, other_token, 5)) for _ in range(20)]
            await asyncio.sleep(1.5)
            created_at = time.monotonic()
            await asyncio.to_thread(transitions.create_todo, Actor.agent(endpoint), title="one")
            done, _ = await asyncio.wait(mine + theirs, timeout=3, return_when="FIRST_COMPLETED")
            first_answer = time.monotonic() - created_at
            rest = await asyncio.gather(*mine, *theirs)
            return first_answer, rest

    first_answer, results = asyncio.run(scenario())
    claimed = [body for status, body, _ in results if body["todo"] is not None]
    assert len(claimed) == 1 and claimed[0]["todo"]["endpoint"] == endpoint.agent_id
    assert first_answer < 1.0  # woken by the ring (bench: p95 under 100 ms), not a re-check
    assert all(status == 200 for status, _, _ in results)


def _raw_request(base: str, path: str, body: bytes, headers: dict[str, str]) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return sock


def test_a_waiter_whose_client_left_claims_nothing_over_http(served, vend):
    base, _ = served
    endpoint, token = vend("leaves")
    sock = _raw_request(
        base,
        "/api/v1/claim_next",
        b'{"wait_seconds": 10}',
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    time.sleep(1.0)  # parked on the doorbell
    sock.close()  # the client goes away
    time.sleep(0.5)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="nobody to give it to")
    time.sleep(1.5)
    assert Todo.objects.get(pk=todo.id).state == "pending"
    assert not TodoAttempt.objects.filter(todo_id=todo.id).exists()


def _mcp_claim_next_body(wait: float) -> bytes:
    import json

    return json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "claim_next",
                "arguments": {"wait_seconds": wait},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()


MCP_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
    "Mcp-Method": "tools/call",
    "Mcp-Name": "claim_next",
}


def test_a_waiter_whose_client_left_claims_nothing_over_mcp(served, vend):
    base, _ = served
    endpoint, token = vend("leaves-mcp")
    sock = _raw_request(
        base, "/mcp", _mcp_claim_next_body(10), {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    )
    time.sleep(1.0)
    sock.close()
    time.sleep(0.5)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="nobody over mcp")
    time.sleep(1.5)
    assert Todo.objects.get(pk=todo.id).state == "pending"
    assert not TodoAttempt.objects.filter(todo_id=todo.id).exists()


def test_an_mcp_long_poll_waits_and_claims_when_a_todo_comes(served, vend):
    base, _ = served
    endpoint, token = vend("mcp-waiter")

    async def scenario():
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            call = asyncio.create_task(
                client.post(
                    "/mcp",
                    content=_mcp_claim_next_body(10),
                    headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
                )
            )
            await asyncio.sleep(1.0)
            todo, _ = await asyncio.to_thread(
                transitions.create_todo, Actor.agent(endpoint), title="for mcp"
            )
            response = await call
            return todo, response

    todo, response = asyncio.run(scenario())
    content = response.json()["result"]["structuredContent"]
    assert content["todo"]["id"] == todo.id and content["attempt_seq"] == 1


def test_slow_bodies_without_a_token_cost_nothing_and_are_dropped(served, vend):
    base, _ = served
    _, token = vend("patient")
    host, port = base.removeprefix("http://").split(":")
    slow = []
    for _ in range(300):
        sock = socket.create_connection((host, int(port)))
        sock.sendall(
            f"POST /api/v1/list_todos HTTP/1.1\r\nHost: {host}\r\nContent-Length: 100\r\n\r\n".encode()
        )
        slow.append(sock)
    try:
        started = time.monotonic()
        listed = loopback.post(
            f"{base}/api/v1/list_todos", json={}, headers={"Authorization": f"Bearer {token}"}
        )
        board = loopback.get(f"{base}/login/")
        took = time.monotonic() - started
        assert listed.status_code == 200 and board.status_code == 200
        assert took < NORMAL_SECONDS
        # Each silent client is answered 408 and dropped once its body is late (2 s here).
        slow[0].settimeout(10)
        answer = slow[0].recv(200)
        assert answer.startswith(b"HTTP/1.1 408")
    finally:
        for sock in slow:
            sock.close()


def test_the_caps_answer_at_once_with_the_documented_codes(live_server, vend, settings):
    """In-process server (the settings fixture applies): 2 waiters an endpoint, 3 a process."""
    settings.SWITCHBOARD_WAITERS_PER_ENDPOINT = 2
    settings.SWITCHBOARD_WAITERS_PER_PROCESS = 3
    _, one = vend("capped-one")
    _, two = vend("capped-two")

    async def scenario():
        async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
            held = [asyncio.create_task(_claim_next(client, one, 4)) for _ in range(2)]
            held.append(asyncio.create_task(_claim_next(client, two, 4)))
            await asyncio.sleep(1.0)
            per_endpoint = await _claim_next(client, one, 4)
            per_process = await _claim_next(client, two, 4)
            await asyncio.gather(*held)
            return per_endpoint, per_process

    (status1, body1, took1), (status2, body2, took2) = asyncio.run(scenario())
    assert status1 == 429 and body1["error"]["code"] == "rate_limited" and took1 < 1
    assert status2 == 503 and body2["error"]["code"] == "unavailable" and took2 < 1
    assert body1["error"]["retry_after"] > 0
