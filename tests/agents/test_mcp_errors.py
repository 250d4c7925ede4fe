"""Errors over MCP, as the official ``mcp`` client sees them from a served process
(``switchboard serve``): every error carries the HTTP API's error body, as a tool error's
text with ``isError`` (the call reached a tool) or as a JSON-RPC error's ``data`` echoing the
request's id (it did not: a missing token, a body that is not JSON-RPC, an unknown tool)."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from django.db import connection
from django_mcpz.server import PROTOCOL_VERSION
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from switchboard import dburl
from switchboard.queues import endpoints, transitions
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests import loopback
from tests.agents.api_helpers import post
from tests.crash.conftest import base_env
from tests.crash.harness import Procs

# Only the tests that vend an endpoint write (and commit, for the served process to see).
writes = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def served(django_db_setup, tmp_path_factory):
    """One ``switchboard serve`` (a uvicorn worker under gunicorn) for the module, on the
    test database; each test commits its own rows (transaction=True) and they are flushed."""
    procs = Procs(tmp_path_factory.mktemp("served"))
    env = {**base_env(), "DATABASE_URL": dburl.build(connection.settings_dict)}
    try:
        _server, base = procs.serve(env, workers=1)
        yield base
    finally:
        procs.close()


@pytest.fixture
def vend(team):
    def make(agent_id: str, verbs: str = "all") -> tuple:
        return endpoints.vend(team, agent_id, verbs=verbs)

    return make


def client(base: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    return Client(streamable_http_client(f"{base}/mcp", http_client=http))


def run(coro):
    return asyncio.run(coro)


def refused_at_connect(coro) -> MCPError:
    """The client raises a refusal while connecting from inside its transport's task groups:
    the MCPError, out of its groups."""
    with pytest.RaisesGroup(MCPError, flatten_subgroups=True) as raised:
        run(coro)
    error: BaseException = raised.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError)
    return error


def http_error(base: str, verb: str, arguments: dict, token: str) -> dict:
    response = post(base, verb, arguments, token=token)
    assert 400 <= response.status_code < 500, response.text
    return response.json()


# ---------------------------------------------------------------------------------------
# No token, a wrong one: before any tool


@pytest.mark.parametrize("token", [None, "sbe_not-a-token"])
def test_the_client_reads_a_refused_token_as_a_jsonrpc_error(served, token):
    async def connect():
        async with client(served, token) as mcp:
            await mcp.list_tools()

    refused = refused_at_connect(connect())
    assert refused.code == -32001
    assert "valid endpoint token" in refused.message
    assert refused.data["error"]["code"] == "unauthorized"


@pytest.mark.parametrize("request_id", [7, "call-abc"])
def test_a_refused_token_keeps_401_and_www_authenticate_and_echoes_the_id(served, request_id):
    response = loopback.post(
        f"{served}/mcp",
        json={"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}},
        headers={"Authorization": "Bearer sbe_not-a-token"},
    )

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="switchboard"'
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id
    assert body["error"]["code"] == -32001
    assert body["error"]["data"] == {
        "error": {
            "code": "unauthorized",
            "message": "A valid endpoint token is required (Authorization: Bearer …).",
        }
    }


def test_a_refused_token_on_a_body_without_an_id_answers_id_null(served):
    response = loopback.post(f"{served}/mcp", content=b"{not json", headers={})

    assert response.status_code == 401
    assert response.json()["id"] is None
    assert response.json()["error"]["data"]["error"]["code"] == "unauthorized"


@writes
def test_a_revoked_endpoint_says_so_over_mcp(served, vend):
    endpoint, token = vend("gone")
    transitions.revoke_endpoint(None, endpoint)

    async def connect():
        async with client(served, token) as mcp:
            await mcp.list_tools()

    assert refused_at_connect(connect()).data == {
        "error": {"code": "unauthorized", "message": "This endpoint has been revoked."}
    }


# ---------------------------------------------------------------------------------------
# A tool refuses: bad arguments, not_found, conflict


BAD_ARGUMENTS = {
    "misspelt field": ("create_todo", {"titel": "rebuild the docs"}),
    "missing field": ("create_todo", {}),
    "wrong type": ("claim", {"todo_id": "7"}),
    "a float for an int": ("create_todo", {"title": "t", "priority": 1.5}),
    "out of range": ("claim_next", {"wait_seconds": 31}),
    "no zone": ("create_todo", {"title": "t", "not_before": "2026-01-01T00:00:00"}),
    "empty title": ("create_todo", {"title": ""}),
}


def _both_ways(served, token: str, calls: dict) -> tuple[dict, dict]:
    """Each named (verb, arguments) call's error body over HTTP, and over MCP (where it must
    be a tool error, its body as text and no structured content: see test_mcp_typescript)."""
    over_http = {
        name: http_error(served, verb, args, token) for name, (verb, args) in calls.items()
    }

    async def scenario():
        answers = {}
        async with client(served, token) as mcp:
            for name, (verb, args) in calls.items():
                result = await mcp.call_tool(verb, args)
                assert result.is_error, name
                assert result.structured_content is None, name
                answers[name] = json.loads(result.content[0].text)
        return answers

    return over_http, run(scenario())


@writes
def test_bad_arguments_are_tool_errors_with_the_http_error_body(served, vend):
    _, token = vend("careless")
    over_http, over_mcp = _both_ways(served, token, BAD_ARGUMENTS)

    assert over_mcp == over_http
    assert over_mcp["misspelt field"] == {
        "error": {
            "code": "invalid",
            "message": "Invalid arguments: Object contains unknown field `titel`",
        }
    }
    assert not Todo.objects.exists()


@writes
def test_not_found_and_conflict_are_tool_errors_in_the_same_shape(served, vend):
    endpoint, token = vend("agent-a")
    other, _ = vend("agent-b")
    foreign, _ = transitions.create_todo(Actor.agent(other), title="theirs")
    pending, _ = transitions.create_todo(Actor.agent(endpoint), title="not claimed")
    held, _ = transitions.create_todo(Actor.agent(endpoint), title="held, fenced")
    transitions.claim(Actor.agent(endpoint), held.id, require_fence=True)
    calls = {
        "foreign": ("get_todo", {"todo_id": foreign.id}),
        "unknown": ("get_todo", {"todo_id": 999_999_999}),
        "not held": ("complete", {"todo_id": pending.id, "summary": "done?"}),
        "wrong fence": ("complete", {"todo_id": held.id, "lease_token": "sbl_wrong"}),
        "bad artifact": ("release", {"todo_id": held.id, "artifact": "ftp://nope"}),
    }
    over_http, over_mcp = _both_ways(served, token, calls)

    assert over_mcp == over_http
    codes = {name: body["error"]["code"] for name, body in over_mcp.items()}
    assert codes == {
        "foreign": "not_found",
        "unknown": "not_found",
        "not held": "conflict",
        "wrong fence": "conflict",
        "bad artifact": "invalid",
    }
    assert over_mcp["foreign"] == over_mcp["unknown"]
    assert Todo.objects.get(pk=held.id).state == "claimed"
    assert Todo.objects.get(pk=pending.id).state == "pending"


# ---------------------------------------------------------------------------------------
# Before any tool: an unknown tool, a body that is not JSON-RPC


@writes
def test_an_unknown_tool_and_one_outside_the_verb_set_are_jsonrpc_errors_with_not_found(
    served, vend
):
    _, token = vend("narrow", verbs="list_todos,claim_next")

    async def scenario():
        refusals = []
        async with client(served, token) as mcp:
            for name in ("claim_nxt", "cancel"):
                with pytest.raises(MCPError) as refused:
                    await mcp.call_tool(name, {})
                refusals.append(refused.value)
        return refusals

    for refusal in run(scenario()):
        assert refusal.code == -32602
        assert refusal.message.startswith("Unknown tool")
        assert refusal.data == {"error": {"code": "not_found", "message": refusal.message}}


NOT_JSONRPC = [
    (b'{"jsonrpc": "2.0", "id": 5, "method": ', -32700, None),  # not JSON
    (b'{"jsonrpc": "2.0", "id": 5, "params": {}}', -32600, 5),  # no method
    (b"[" * 5000 + b"]" * 5000, -32700, None),  # nested past the parser
]


@writes
def test_a_body_that_is_not_jsonrpc_is_a_jsonrpc_error_with_invalid(served, vend):
    _, token = vend("sloppy")
    for body, jsonrpc_code, request_id in NOT_JSONRPC:
        response = loopback.post(
            f"{served}/mcp",
            content=body,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )

        assert response.status_code == 400
        error = response.json()["error"]
        assert response.json()["id"] == request_id
        assert error["code"] == jsonrpc_code
        assert error["data"]["error"]["code"] == "invalid"
        assert error["data"]["error"]["message"] == error["message"]


@writes
def test_an_unknown_method_is_a_jsonrpc_error_with_not_found(served, vend):
    _, token = vend("curious")
    response = loopback.post(
        f"{served}/mcp",
        json={"jsonrpc": "2.0", "id": "m-1", "method": "tools/lisst", "params": {}},
        headers={"Authorization": f"Bearer {token}"},
    )

    body = response.json()
    assert body["id"] == "m-1" and body["error"]["code"] == -32601
    assert body["error"]["data"]["error"]["code"] == "not_found"


# ---------------------------------------------------------------------------------------
# Schemas


def _undescribed(schema, path: str = "$") -> list[str]:
    """Subschemas that say nothing of their value (no type, reference, enum, const or union)."""
    found = []
    if isinstance(schema, dict):
        saying = {"type", "$ref", "enum", "const", "anyOf", "oneOf", "allOf", "not"}
        if not saying & set(schema) and path.rsplit("/", 1)[-1] not in ("properties", "$defs"):
            found.append(path)
        for key, value in schema.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    found += _undescribed(sub, f"{path}/{key}/{name}")
            elif isinstance(value, dict) and key not in ("default", "examples"):
                found += _undescribed(value, f"{path}/{key}")
            elif isinstance(value, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems"):
                for n, sub in enumerate(value):
                    found += _undescribed(sub, f"{path}/{key}[{n}]")
    return found


@writes
def test_no_tool_schema_is_bare(served, vend):
    _, token = vend("inspector")

    async def scenario():
        async with client(served, token) as mcp:
            return (await mcp.list_tools()).tools

    tools = {tool.name: tool for tool in run(scenario())}
    bare = {
        name: _undescribed(tool.input_schema) + _undescribed(tool.output_schema)
        for name, tool in tools.items()
    }
    assert bare == {name: [] for name in tools}
    result_out = tools["complete"].output_schema["$defs"]["TodoOut"]["properties"]["result"]
    assert "any JSON value" in result_out["description"]
    assert "null" in result_out["type"] and "object" in result_out["type"]
    assert "any JSON value" in tools["complete"].input_schema["properties"]["result"]["description"]


# ---------------------------------------------------------------------------------------
# Hardening, second round (docs/reliability.md): nesting on every decode path


def _current_call_headers(token: str | None) -> dict:
    """The headers of a current-revision tools/call: the path answered on the event loop."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "create_todo",
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@writes
@pytest.mark.parametrize("depth", [80, 1100, 2000, 100_000])
@pytest.mark.parametrize("with_token", [False, True])
def test_deep_nesting_is_a_parse_error_on_every_path(served, vend, depth, with_token):
    """2,000 brackets to the current revision's tools/call was a RecursionError (500) in the
    plain call's decode, before the token was looked at."""
    token = vend(f"nester-{depth}")[1] if with_token else None
    bodies = [
        b"[" * depth + b"]" * depth,
        # Deep inside a well-formed call's arguments.
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "create_todo",'
        b' "arguments": {"title": "x", "result": ' + b"[" * depth + b"]" * depth + b"}}}",
    ]
    for body in bodies:
        for headers in (_current_call_headers(token), {"Content-Type": "application/json"}):
            response = loopback.post(f"{served}/mcp", content=body, headers=headers, timeout=30)
            assert response.status_code == 400, (depth, response.status_code, response.text[:300])
            error = response.json()["error"]
            assert error["code"] == -32700
            assert "nests" in error["message"]
            assert error["data"]["error"]["code"] == "invalid"


@writes
def test_brackets_inside_strings_are_not_nesting(served, vend):
    _, token = vend("bracketeer")
    title = "[" * 150 + "{" * 150 + '\\"]' + "}" * 3
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 8,
            "method": "tools/call",
            "params": {
                "name": "create_todo",
                "arguments": {"title": title},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()
    response = loopback.post(
        f"{served}/mcp", content=body, headers=_current_call_headers(token), timeout=30
    )
    assert response.status_code == 200, response.text[:300]
    result = response.json()["result"]
    assert result["isError"] is False, result
    assert result["structuredContent"]["todo"]["title"] == title
