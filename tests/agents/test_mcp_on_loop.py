"""MCP is answered on the event loop (agents/mcp.py): a plain tools/call without django-mcpz's
view (``run_plain_call``), whose answer must be the view's byte for byte, and everything else
through the view, run on the loop itself (no thread), in its own words."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django_mcpz.server import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION

from switchboard.agents import mcp
from switchboard.queues import db
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor, create_todo
from tests import loopback

pytestmark = pytest.mark.django_db(transaction=True)


def _body(verb: str, arguments: object, *, version: str = PROTOCOL_VERSION) -> bytes:
    meta = {META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}}
    params = {"name": verb, "arguments": arguments, "_meta": meta}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    ).encode()


def _headers(verb: str, token: str, *, version: str = PROTOCOL_VERSION) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": version,
        "Mcp-Method": "tools/call",
        "Mcp-Name": verb,
    }


def _raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode(), value.encode()) for name, value in headers.items()]


def _scope(headers: dict[str, str]) -> dict:
    return {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "query_string": b"",
        "headers": _raw(headers),
        "server": ("testserver", 80),
        "scheme": "http",
    }


def _both_ways(headers: dict[str, str], body: bytes) -> tuple[bytes, bytes]:
    """The answer without the view, and through it."""

    async def go() -> tuple[bytes, bytes]:
        scope = _scope(headers)
        call = mcp.plain_tool_call(scope["headers"], body)
        assert call is not None
        try:
            plain = await mcp.run_plain_call(scope, body, call, watch_disconnect=None)
            viewed = await mcp.through_view(scope, body, watch_disconnect=None)
            assert plain is not None
            return plain.content, viewed.content
        finally:
            await db.close_async_pool()

    return asyncio.run(go())


def test_a_plain_call_answers_what_the_view_answers_byte_for_byte(vend):
    endpoint, token = vend("loop-agent")
    todo, _ = create_todo(Actor.agent(endpoint), title="the same either way")
    todo_id = todo.id
    calls = [
        ("get_todo", {"todo_id": todo_id}),  # ok
        ("get_todo", {"todo_id": 987654321}),  # not_found
        ("list_todos", {"limit": 5}),
        ("create_todo", {"title": 5}),  # invalid: a wrong type
        ("create_todo", {"title": "x", "bogus": 1}),  # invalid: an unknown field
        ("heartbeat", {"todo_id": todo_id, "attempt_seq": 3}),  # not held
        ("complete", {"todo_id": "seven", "attempt_seq": 1}),
    ]
    for verb, arguments in calls:
        plain, viewed = _both_ways(_headers(verb, token), _body(verb, arguments))
        assert plain == viewed, (verb, arguments, plain, viewed)
    # The answers were the tools' (not a protocol error): a success and the refusals.
    assert json.loads(plain)["result"]["isError"] is True
    # Each way runs the verb once: a create through the view's two passes makes one todo.
    plain, viewed = _both_ways(_headers("create_todo", token), _body("create_todo", {"title": "t"}))
    assert plain != viewed  # two todos, two ids
    assert Todo.objects.filter(title="t").count() == 2


@pytest.mark.parametrize(
    "change",
    [
        {"MCP-Protocol-Version": "2025-06-18"},  # a legacy client: the view's legacy path
        {"MCP-Protocol-Version": "1999-01-01"},
        {"Mcp-Method": "tools/list"},
        {"Mcp-Name": "list_todos"},
        {"Mcp-Name": "=?base64?***?="},
        {"Origin": "https://elsewhere.example"},
    ],
)
def test_a_call_the_view_would_refuse_or_treat_otherwise_is_not_plain(change):
    headers = {**_headers("get_todo", "t"), **change}
    assert mcp.plain_tool_call(_raw(headers), _body("get_todo", {"todo_id": 1})) is None


def test_bodies_that_are_not_a_plain_call_are_not_plain():
    headers = _raw(_headers("get_todo", "t"))
    message = json.loads(_body("get_todo", {"todo_id": 1}))
    variants = [
        b"{not json",
        json.dumps({**message, "id": None}),
        json.dumps({k: v for k, v in message.items() if k != "id"}),  # a notification
        json.dumps({**message, "method": "tools/list"}),
        json.dumps({**message, "params": {**message["params"], "name": "nonesuch"}}),
        json.dumps({**message, "params": {**message["params"], "name": ["get_todo"]}}),
        json.dumps({**message, "params": {**message["params"], "arguments": [1]}}),
        json.dumps({**message, "params": {**message["params"], "requestState": "x"}}),
        json.dumps({**message, "params": {**message["params"], "_meta": {}}}),
    ]
    for body in variants:
        raw = body if isinstance(body, bytes) else body.encode()
        assert mcp.plain_tool_call(headers, raw) is None, body
    # A header sent twice is the view's to judge (Django joins the values).
    twice = [*headers, (b"mcp-name", b"get_todo")]
    assert mcp.plain_tool_call(twice, _body("get_todo", {"todo_id": 1})) is None


def test_over_http_plain_calls_skip_the_view_and_the_rest_run_it_on_the_loop(
    live_server, vend, make_user, monkeypatch
):
    _, token = vend("loop-served")
    _, reader = vend("loop-reader", verbs="list_todos,get_todo")
    viewed: list[bool] = []
    real = mcp._view

    def counting(request):
        try:
            asyncio.get_running_loop()  # called from the loop's own thread: no thread hop
            viewed.append(True)
        except RuntimeError:
            viewed.append(False)
        return real(request)

    monkeypatch.setattr(mcp, "_view", counting)
    url = f"{live_server.url}/mcp"

    def ask(verb, arguments, token=token, **change):
        headers = {**_headers(verb, token), **change}
        return loopback.post(url, content=_body(verb, arguments), headers=headers, timeout=30)

    created = ask("create_todo", {"title": "on the loop"})
    assert created.status_code == 200, created.text
    todo = created.json()["result"]["structuredContent"]["todo"]
    got = ask("get_todo", {"todo_id": todo["id"]})
    assert got.json()["result"]["structuredContent"]["todo"]["title"] == "on the loop"
    missing = ask("get_todo", {"todo_id": 987654321})
    assert (
        json.loads(missing.json()["result"]["content"][0]["text"])["error"]["code"] == "not_found"
    )
    assert "structuredContent" not in missing.json()["result"]
    # Another team's todo answers as an unknown one does, word for word.
    elsewhere, _ = vend("loop-elsewhere", team=make_user("mallory").teams.get())
    foreign, _ = create_todo(Actor.agent(elsewhere), title="not yours")
    theirs = ask("get_todo", {"todo_id": foreign.id})
    unknown = ask("get_todo", {"todo_id": foreign.id + 10_000_000})
    assert theirs.json()["result"] == unknown.json()["result"]
    assert "not yours" not in theirs.text
    assert viewed == []  # none of those ran django-mcpz's view

    # The view answers the rest, in its own words, on the loop.
    mismatch = ask("get_todo", {"todo_id": todo["id"]}, **{"Mcp-Name": "list_todos"})
    assert mismatch.status_code == 400 and "Mcp-Name" in mismatch.json()["error"]["message"]
    wrong_token = ask("get_todo", {"todo_id": todo["id"]}, token="sb_not-a-token")
    assert wrong_token.status_code == 401
    assert wrong_token.json()["error"]["data"]["error"]["code"] == "unauthorized"
    not_in_its_set = ask("create_todo", {"title": "no"}, token=reader)
    assert "Unknown tool" in not_in_its_set.json()["error"]["message"]
    listed = loopback.post(
        url,
        content=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/list",
                "params": {
                    "_meta": {META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: {}}
                },
            }
        ).encode(),
        headers={**_headers("x", reader), "Mcp-Method": "tools/list"},
        timeout=30,
    )
    assert [t["name"] for t in listed.json()["result"]["tools"]] == ["list_todos", "get_todo"]
    assert viewed == [True] * 4


def test_a_legacy_clients_long_poll_still_waits_in_the_view_and_claims(live_server, vend):
    """A 2025-revision client is not a plain call: django-mcpz's view answers it, and its
    claim_next waits on the loop between the view's two passes."""
    endpoint, token = vend("legacy-waiter")
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "claim_next", "arguments": {"wait_seconds": 10}},
        }
    ).encode()
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-06-18",
    }
    assert mcp.plain_tool_call(_raw(headers), body) is None

    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(
            httpx.post, f"{live_server.url}/mcp", content=body, headers=headers, timeout=30
        )
        time.sleep(0.5)
        assert not answer.done()  # waiting
        todo, _ = create_todo(Actor.agent(endpoint), title="for a legacy client")
        response = answer.result(timeout=10)
    assert response.status_code == 200, response.text
    claimed = response.json()["result"]["structuredContent"]
    assert claimed["todo"]["id"] == todo.id
