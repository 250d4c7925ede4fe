"""What fuzzing the agent API found, pinned as plain tests.

Each was a failure the fuzzer found (a 500, or the document and the API disagreeing); each is
fixed, and these keep it fixed.
"""

from __future__ import annotations

import httpx
import pytest
from django.urls import reverse

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
from tests import loopback

pytestmark = pytest.mark.django_db(transaction=True)

# Deep enough for msgspec's recursion guard (about 1,500 levels on CPython 3.12): 2 x 100 KB.
TOO_DEEP = 100_000
# Accepted by the API today, and past what json.dumps(indent=2) can walk (about 1,000).
DEEP_FOR_THE_BOARD = 1_200


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.fixture
def agent_api(live_server, vend):
    endpoint, token = vend("fuzzed")

    def post(verb: str, raw: bytes, *, path: str | None = None, **headers) -> httpx.Response:
        return loopback.post(
            f"{live_server.url}{path or f'/api/v1/{verb}'}",
            content=raw,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
                **headers,
            },
            timeout=30,
        )

    def held_todo() -> int:
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title="deep")
        transitions.claim(Actor.agent(endpoint), todo.id)
        return todo.id

    post.held_todo = held_todo
    return post


def assert_invalid(response: httpx.Response) -> None:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.headers["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "invalid"


@pytest.mark.parametrize("verb", ["complete", "fail"])
def test_a_deeply_nested_result_is_invalid_not_a_server_error(agent_api, verb):
    todo_id = agent_api.held_todo()
    response = agent_api(verb, b'{"todo_id": %d, "result": %s}' % (todo_id, nested(TOO_DEEP)))
    assert_invalid(response)


def test_a_deep_result_never_breaks_the_todo_drawer(agent_api, client, user):
    todo_id = agent_api.held_todo()
    response = agent_api(
        "complete", b'{"todo_id": %d, "result": %s}' % (todo_id, nested(DEEP_FOR_THE_BOARD))
    )
    assert response.status_code in (200, 400), response.status_code
    client.force_login(user)
    assert client.get(reverse("todo-detail", args=[todo_id])).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "complete",'
        b' "arguments": {"todo_id": 1, "result": %s}}}' % nested(TOO_DEEP),
        nested(TOO_DEEP),
    ],
    ids=["in-arguments", "whole-body"],
)
def test_deeply_nested_json_to_mcp_is_a_json_rpc_error(agent_api, body):
    response = agent_api("", body, path="/mcp", Accept="application/json, text/event-stream")
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert response.json()["error"]["code"] == -32700


@pytest.mark.parametrize("verb", ["list_todos", "claim_next"])
def test_a_verb_without_required_arguments_documents_its_body_optional(live_server, vend, verb):
    _, token = vend("fuzzed")
    document = loopback.get(f"{live_server.url}/api/v1/openapi.json").json()
    required = document["paths"][f"/api/v1/{verb}"]["post"]["requestBody"]["required"]
    response = loopback.post(
        f"{live_server.url}/api/v1/{verb}", headers={"Authorization": f"Bearer {token}"}
    )
    # Either the document says the body may be left out, or leaving it out is invalid.
    assert not required or response.status_code == 400, (required, response.status_code)


def test_attempt_seq_beyond_the_column_is_documented(agent_api, live_server):
    """One verb stands for the five: they share AttemptSeq and the transitions' check."""
    document = loopback.get(f"{live_server.url}/api/v1/openapi.json").json()
    schema = document["components"]["schemas"]["Heartbeat"]["properties"]["attempt_seq"]
    maximum = schema["anyOf"][0].get("maximum")
    todo_id = agent_api.held_todo()
    response = agent_api("heartbeat", b'{"todo_id": %d, "attempt_seq": %d}' % (todo_id, 2**31))
    # Either the document bounds it (and the API refuses past it), or the API takes it.
    assert (maximum is not None and maximum < 2**31) or response.status_code != 400


def test_not_before_with_any_rfc3339_offset_is_taken(agent_api):
    """Within the 30 days an agent's not_before may reach (+17:21 is past PostgreSQL's
    +-15:59, and RFC 3339's to take)."""
    from datetime import UTC, datetime, timedelta, timezone

    wake = (datetime.now(UTC) + timedelta(days=10)).replace(second=0, microsecond=0)
    local = wake.astimezone(timezone(timedelta(hours=17, minutes=21))).isoformat()
    response = agent_api("create_todo", b'{"title": "t", "not_before": "%s"}' % local.encode())
    assert response.status_code == 200, response.text
    assert response.json()["todo"]["not_before"] == wake.isoformat()


@pytest.mark.parametrize("not_before", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_not_before_out_of_range_stays_invalid(agent_api, not_before):
    """Guards the fix above: normalising to UTC overflows the year for these."""
    response = agent_api("create_todo", b'{"title": "t", "not_before": "%s"}' % not_before.encode())
    assert_invalid(response)
