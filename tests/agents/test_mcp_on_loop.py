"""A plain MCP tools/call runs on the ASGI front's event loop (agents/mcp.py, ``arun_tool``)
rather than in django-mcpz's synchronous view: the answer must be the view's, byte for byte,
and everything that is not a plain call must still reach the view."""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.test import RequestFactory
from django_mcpz.server import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION

from agents import asgi, mcp
from queues import db
from queues.transitions import create_todo

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


def _on_loop(endpoint, call: mcp.ToolCall) -> bytes:
    async def go() -> bytes:
        try:
            response = await mcp.arun_tool(endpoint, call, mcp_session_id=None, gone=None)
            return response.content
        finally:
            await db.close_async_pool()

    return asyncio.run(go())


def test_a_plain_call_answers_what_the_view_answers_byte_for_byte(vend):
    endpoint, token = vend("loop-agent")
    todo, _ = create_todo(endpoint=endpoint, title="the same either way")
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
    factory = RequestFactory()
    for verb, arguments in calls:
        body = _body(verb, arguments)
        headers = _headers(verb, token)
        call = mcp.plain_tool_call(_raw(headers), body)
        assert call is not None, (verb, arguments)
        on_loop = _on_loop(endpoint, call)
        request = factory.post("/mcp", data=body, content_type="application/json", headers=headers)
        in_view = mcp.view(request).content
        assert on_loop == in_view, (verb, arguments, on_loop, in_view)
    # The answers were the tools' (not a protocol error): a success and the refusals.
    assert json.loads(on_loop)["result"]["isError"] is True


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


def test_over_http_plain_calls_stay_on_the_loop_and_the_rest_reach_the_view(
    live_server, vend, make_user, monkeypatch
):
    _, token = vend("loop-served")
    _, reader = vend("loop-reader", verbs="list_todos,get_todo")
    threaded: list[object] = []
    real = asgi._in_thread

    async def counting(view, request):
        threaded.append(view)
        return await real(view, request)

    monkeypatch.setattr(asgi, "_in_thread", counting)
    url = f"{live_server.url}/mcp"

    def ask(verb, arguments, token=token, **change):
        headers = {**_headers(verb, token), **change}
        return httpx.post(url, content=_body(verb, arguments), headers=headers, timeout=30)

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
    foreign, _ = create_todo(endpoint=elsewhere, title="not yours")
    theirs = ask("get_todo", {"todo_id": foreign.id})
    unknown = ask("get_todo", {"todo_id": foreign.id + 10_000_000})
    assert theirs.json()["result"] == unknown.json()["result"]
    assert "not yours" not in theirs.text
    assert threaded == []  # none of those ran django-mcpz's view

    # The view answers the rest, in its own words.
    mismatch = ask("get_todo", {"todo_id": todo["id"]}, **{"Mcp-Name": "list_todos"})
    assert mismatch.status_code == 400 and "Mcp-Name" in mismatch.json()["error"]["message"]
    wrong_token = ask("get_todo", {"todo_id": todo["id"]}, token="sb_not-a-token")
    assert wrong_token.status_code == 401
    assert wrong_token.json()["error"]["data"]["error"]["code"] == "unauthorized"
    not_in_its_set = ask("create_todo", {"title": "no"}, token=reader)
    assert "Unknown tool" in not_in_its_set.json()["error"]["message"]
    assert len(threaded) == 3


def test_a_legacy_clients_long_poll_still_waits_in_the_view_and_claims(live_server, vend):
    """A 2025-revision client is not a plain call: django-mcpz's view answers it, and the
    front still does the waiting of its claim_next between the view's tries."""
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
        todo, _ = create_todo(endpoint=endpoint, title="for a legacy client")
        response = answer.result(timeout=10)
    assert response.status_code == 200, response.text
    claimed = response.json()["result"]["structuredContent"]
    assert claimed["todo"]["id"] == todo.id
