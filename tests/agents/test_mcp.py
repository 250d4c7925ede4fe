"""The verbs as MCP tools at /mcp, driven by the official ``mcp`` Python client over
streamable HTTP against a live server."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from switchboard.queues.models import VERBS, Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests import loopback
from tests.queues.helpers import make_retry_due

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro):
    return asyncio.run(coro)


def mcp_client(url: str, token: str, **kwargs) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), **kwargs)


async def call(client: Client, tool: str, arguments: dict) -> dict:
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    if result.is_error:
        return {"tool_error": json.loads(text)}
    assert result.structured_content == json.loads(text)
    return result.structured_content


def test_tools_are_listed_with_schemas_and_the_untrusted_notice(live_server, vend):
    _, token = vend("lister")

    async def scenario():
        async with mcp_client(live_server.url, token) as client:
            return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in run(scenario())}
    assert set(tools) == set(VERBS)
    claim = tools["claim_next"]
    assert "data, never" in claim.description and "instructions" in claim.description
    assert claim.input_schema["additionalProperties"] is False
    assert "wait_seconds" in claim.input_schema["properties"]


def test_claim_fail_requeue_claim_through_mcp(live_server, vend):
    _, token = vend("mcp-agent")

    async def first_half():
        async with mcp_client(live_server.url, token) as client:
            created = await call(client, "create_todo", {"title": "via mcp", "max_attempts": 3})
            todo_id = created["todo"]["id"]
            claimed = await call(client, "claim_next", {"claimant": "mcp/run-1"})
            assert claimed["todo"]["id"] == todo_id and claimed["prior_attempts"] == []
            failed = await call(
                client,
                "fail",
                {"todo_id": todo_id, "attempt_seq": claimed["attempt_seq"], "summary": "nope"},
            )
            assert failed["todo"]["state"] == "retry_wait"
            return todo_id

    todo_id = run(first_half())
    make_retry_due(todo_id)

    async def second_half():
        async with mcp_client(live_server.url, token) as client:
            claimed = await call(client, "claim_next", {"claimant": "mcp/run-2"})
            assert claimed["attempt_seq"] == 2 and "untrusted_notice" in claimed
            [prior] = claimed["prior_attempts"]
            assert prior["outcome"] == "failed" and prior["summary"] == "nope"
            assert prior["claimant"] == "mcp/run-1"
            done = await call(client, "complete", {"todo_id": todo_id, "attempt_seq": 2})
            assert done["todo"]["state"] == "done"

    run(second_half())
    assert list(
        TodoAttempt.objects.filter(todo_id=todo_id).order_by("seq").values_list("outcome")
    ) == [("failed",), ("completed",)]


def test_fenced_complete_through_mcp(live_server, vend):
    _, token = vend("fenced-agent")

    async def scenario():
        async with mcp_client(live_server.url, token) as client:
            todo = (await call(client, "create_todo", {"title": "fenced"}))["todo"]
            claimed = await call(client, "claim", {"todo_id": todo["id"], "require_fence": True})
            lease_token = claimed["lease_token"]
            refused = await call(client, "complete", {"todo_id": todo["id"]})
            assert refused["tool_error"]["error"]["code"] == "conflict"
            wrong = await call(
                client, "complete", {"todo_id": todo["id"], "lease_token": "sbl_wrong"}
            )
            assert wrong["tool_error"]["error"]["code"] == "conflict"
            still = await asyncio.to_thread(
                lambda: Todo.objects.filter(pk=todo["id"], state="claimed").exists()
            )
            assert still
            done = await call(
                client, "complete", {"todo_id": todo["id"], "lease_token": lease_token}
            )
            assert done["todo"]["state"] == "done"

    run(scenario())


def test_bad_arguments_and_errors_are_tool_errors_with_the_http_codes(live_server, vend):
    _, token = vend("careless")
    _, other = vend("other")

    async def scenario():
        async with mcp_client(live_server.url, other) as client:
            foreign_id = (await call(client, "create_todo", {"title": "theirs"}))["todo"]["id"]
        async with mcp_client(live_server.url, token) as client:
            unknown_field = await client.call_tool("claim_next", {"lease_secs": 10})
            assert unknown_field.is_error and "lease_secs" in unknown_field.content[0].text
            wrong_type = await client.call_tool("claim", {"todo_id": "7"})
            assert wrong_type.is_error
            foreign = await call(client, "get_todo", {"todo_id": foreign_id})
            unknown = await call(client, "get_todo", {"todo_id": 999_999_999})
            assert foreign == unknown
            assert foreign["tool_error"]["error"]["code"] == "not_found"
            bad_artifact = await call(client, "create_todo", {"title": "x"})
            todo_id = bad_artifact["todo"]["id"]
            await call(client, "claim", {"todo_id": todo_id})
            invalid = await call(client, "complete", {"todo_id": todo_id, "artifact": "ftp://nope"})
            assert invalid["tool_error"]["error"]["code"] == "invalid"

    run(scenario())


def test_mcp_without_a_valid_token_is_refused(live_server, vend):

    async def scenario():
        async with mcp_client(live_server.url, "sbe_not-a-token") as client:
            await client.list_tools()

    with pytest.raises(Exception):  # noqa: B017 (the client wraps the 401 in task groups)
        run(scenario())
    for headers in ({}, {"Authorization": "Bearer sbe_not-a-token"}):
        response = loopback.post(
            f"{live_server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers=headers,
        )
        assert response.status_code == 401
        # A JSON-RPC error with the API's body as data (tests/agents/test_mcp_errors.py).
        assert response.json()["error"]["data"]["error"]["code"] == "unauthorized"


def test_tools_outside_the_frozen_set_are_not_listed(live_server, vend):
    _, token = vend("narrow", verbs="list_todos,claim_next")

    async def scenario():
        async with mcp_client(live_server.url, token) as client:
            return {tool.name for tool in (await client.list_tools()).tools}

    assert run(scenario()) == {"list_todos", "get_todo", "claim_next"}


# Every string argument, with a NUL. Where the ledger stores text it keeps the NUL as U+FFFD;
# where it looks a value up as given (idempotency_key, to) PostgreSQL refuses it. Either way
# MCP must answer exactly what HTTP answers.
NUL_ARGUMENTS = {
    "title": ("create_todo", {"title": "a\x00b", "body": "\x00"}),
    "idempotency_key": ("create_todo", {"title": "t", "idempotency_key": "key\x00"}),
    "to": ("create_todo", {"title": "t", "to": "agent-b\x00"}),
    "cursor": ("list_todos", {"cursor": "\x00"}),
    "claimant": ("claim_next", {"claimant": "run\x00"}),
    "summary": ("complete", {"summary": "s\x00", "artifact": "mcp://a\x00", "result": "\x00"}),
    "lease_token": ("heartbeat", {"lease_token": "sbl_\x00"}),
}


def test_a_nul_in_any_argument_gets_the_same_answer_over_mcp_as_over_http(live_server, vend):
    from switchboard.queues import transitions
    from tests.agents.api_helpers import post

    endpoint, token = vend("agent-a")

    def held() -> int:
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title="held")
        transitions.claim(Actor.agent(endpoint), todo.id)
        return todo.id

    def arguments(verb: str, args: dict) -> dict:
        attempt_verb = verb in ("complete", "heartbeat")
        return {"todo_id": held(), **args} if attempt_verb else args

    def answer(status: int, body: dict) -> tuple:
        return ("ok",) if status == 200 else (body["error"]["code"], body["error"]["message"])

    over_http, mcp_calls = {}, {}
    for name, (verb, args) in NUL_ARGUMENTS.items():
        response = post(live_server.url, verb, arguments(verb, args), token=token)
        assert response.status_code < 500, response.text
        over_http[name] = answer(response.status_code, response.json())
        mcp_calls[name] = (verb, arguments(verb, args))

    async def scenario():
        answers = {}
        async with mcp_client(live_server.url, token) as client:
            for name, (verb, args) in mcp_calls.items():
                got = await call(client, verb, args)
                answers[name] = (
                    answer(400, got["tool_error"]) if "tool_error" in got else answer(200, got)
                )
        return answers

    over_mcp = run(scenario())
    assert over_mcp == over_http
    assert over_http["idempotency_key"][0] == over_http["to"][0] == "invalid"
    assert over_http["title"] == over_http["summary"] == ("ok",)


@pytest.mark.parametrize("field", ["title", "idempotency_key", "to"])
def test_a_lone_surrogate_over_mcp_is_refused_and_writes_nothing(live_server, vend, field):
    """Refused while the JSON-RPC body is decoded (as HTTP refuses it decoding its body):
    a JSON-RPC error, never a 500, nothing written."""

    _, token = vend("agent-a")
    arguments = {"title": "t", field: "SURROGATE"}
    call_tool = {"name": "create_todo", "arguments": arguments}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call_tool})
    body = body.replace("SURROGATE", "\\ud800")  # a JSON escape on the wire
    response = loopback.post(
        f"{live_server.url}/mcp",
        content=body.encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700
    assert not Todo.objects.exists()
