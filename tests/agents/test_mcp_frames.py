"""MCP's edges over raw JSON-RPC (agents/mcp_frames.py, agents/mcp.py), each held to the
sentence of the specification it answers: a 2025-03-26 batch is answered message by message,
a request that accepts only an event stream gets one SSE event, and a refused Origin echoes
the request's id."""

from __future__ import annotations

import json

import httpx
import pytest
from django_mcpz.server import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION

from switchboard.queues.models import Todo
from tests import loopback

pytestmark = pytest.mark.django_db(transaction=True)

BOTH = "application/json, text/event-stream"


def _post(base: str, body: object, *, token: str | None, **headers: str) -> httpx.Response:
    sent = {"Content-Type": "application/json", "Accept": BOTH}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    sent.update({name.replace("_", "-"): value for name, value in headers.items()})
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return loopback.post(f"{base}/mcp", content=content, headers=sent, timeout=30)


def _call(request_id: object, name: str, arguments: dict) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def _modern(request_id: object, method: str, params: dict) -> tuple[dict, dict[str, str]]:
    """A request of the current revision, with the metadata it must carry."""
    meta = {META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: {}}
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }
    headers = {"MCP_Protocol_Version": PROTOCOL_VERSION, "Mcp_Method": method}
    if method == "tools/call":
        headers["Mcp_Name"] = params["name"]
    return body, headers


LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}

# ---------------------------------------------------------------------------------------
# Batches, on 2025-03-26 (docs/specification/2025-03-26/basic/transports.mdx, "Sending
# Messages to the Server"):
#   "3. The body of the POST request MUST be one of the following: [...] An array batching
#    one or more requests and/or notifications [...]
#    4. If the input consists solely of (any number of) JSON-RPC responses or notifications:
#    If the server accepts the input, the server MUST return HTTP status code 202 Accepted
#    with no body. [...]
#    5. If the input contains any number of JSON-RPC requests, the server MUST either return
#    Content-Type: text/event-stream, to initiate an SSE stream, or Content-Type:
#    application/json, to return one JSON object."
# and the 2026-07-28 transport: "A server that supports clients implementing protocol
# versions earlier than 2025-06-18 (which did not define the MCP-Protocol-Version header)
# MAY treat a request that omits the header as protocol version 2025-03-26."


@pytest.mark.parametrize("version", [None, "2025-03-26"])
def test_a_2025_03_26_batch_is_answered_message_by_message(live_server, vend, version):
    endpoint, token = vend("batcher")
    headers = {} if version is None else {"MCP_Protocol_Version": version}
    batch = [
        LIST,
        INITIALIZED,
        _call("b", "create_todo", {"title": "from a batch"}),
        _call(3, "get_todo", {"todo_id": 999_999_999}),
    ]

    response = _post(live_server.url, batch, token=token, **headers)

    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    answers = response.json()
    # One answer a request, in their order; none for the notification.
    assert [answer["id"] for answer in answers] == [1, "b", 3]
    assert {tool["name"] for tool in answers[0]["result"]["tools"]} >= {"claim_next"}
    created = answers[1]["result"]["structuredContent"]["todo"]
    assert Todo.objects.get(pk=created["id"]).endpoint_id == endpoint.pk
    refused = json.loads(answers[2]["result"]["content"][0]["text"])
    assert answers[2]["result"]["isError"] and refused["error"]["code"] == "not_found"


def test_a_batch_of_notifications_alone_is_accepted_with_202_and_no_body(live_server, vend):
    _, token = vend("notifier")

    response = _post(live_server.url, [INITIALIZED, INITIALIZED], token=token)

    assert response.status_code == 202 and response.content == b""


def test_a_batch_answers_a_bad_message_in_its_place_and_the_rest_as_usual(live_server, vend):
    """JSON-RPC 2.0, "Batch": "The Server should respond with an Array containing the
    corresponding Response objects" and, for [1, 2, 3], an Invalid Request for each."""
    _, token = vend("mixed")

    response = _post(live_server.url, [1, LIST], token=token)

    assert response.status_code == 200, response.text
    bad, good = response.json()
    assert bad["id"] is None and bad["error"]["code"] == -32600
    assert good["id"] == 1 and "tools" in good["result"]


@pytest.mark.parametrize(
    ("body", "why"),
    [(b"[]", "empty batch"), (json.dumps([LIST] * 101).encode(), "at most 100")],
)
def test_an_empty_or_overlong_batch_is_one_invalid_request(live_server, vend, body, why):
    """JSON-RPC 2.0: "If the batch rpc call itself fails to be recognized as an valid JSON
    or as an Array with at least one value, the response from the Server MUST be a single
    Response object."""
    _, token = vend("empty")

    response = _post(live_server.url, body, token=token)

    assert response.status_code == 400
    answer = response.json()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert why in answer["error"]["message"]
    assert answer["error"]["data"]["error"]["code"] == "invalid"


def test_a_batch_with_a_refused_token_is_refused_once_with_401(live_server):
    response = _post(live_server.url, [LIST, LIST], token="sbe_not-a-token")

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="switchboard"'
    answer = response.json()
    assert answer["id"] is None and answer["error"]["code"] == -32001


def test_a_batch_on_a_later_revision_is_an_invalid_request(live_server, vend):
    """2025-06-18 removed batches ("Remove support for JSON-RPC batching", its changelog):
    an array on that revision or a later one is refused."""
    _, token = vend("later")

    response = _post(live_server.url, [LIST], token=token, MCP_Protocol_Version="2025-06-18")

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


# ---------------------------------------------------------------------------------------
# An event stream for a client that accepts nothing else. The 2026-07-28 transport: "If the
# body is a JSON-RPC request, the server MUST return either Content-Type: application/json
# (a single JSON object) or Content-Type: text/event-stream (an SSE response stream)"; and
# RFC 9110, 12.5.1: Accept "can be used to indicate that the request is specifically limited
# to a small set of desired types".


def _events(response: httpx.Response) -> list[tuple[str, dict]]:
    events = []
    for block in response.text.split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((fields["event"], json.loads(fields["data"])))
    return events


@pytest.mark.parametrize("accept", ["text/event-stream", "text/event-stream, application/json;q=0"])
def test_a_request_accepting_only_an_event_stream_gets_its_answer_as_one_event(
    live_server, vend, accept
):
    _, token = vend("streamer")
    listing, headers = _modern(11, "tools/list", {})
    call, call_headers = _modern(
        12, "tools/call", {"name": "create_todo", "arguments": {"title": "sse"}}
    )

    listed = _post(live_server.url, listing, token=token, Accept=accept, **headers)
    called = _post(live_server.url, call, token=token, Accept=accept, **call_headers)
    legacy = _post(live_server.url, LIST, token=token, Accept=accept)

    for response, request_id in ((listed, 11), (called, 12), (legacy, 1)):
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"] == "text/event-stream"
        [(event, message)] = _events(response)
        assert event == "message" and message["id"] == request_id and "result" in message
    assert _events(called)[0][1]["result"]["structuredContent"]["todo"]["title"] == "sse"


def test_a_request_accepting_both_still_gets_json(live_server, vend):
    _, token = vend("both")

    response = _post(live_server.url, LIST, token=token)

    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"


# ---------------------------------------------------------------------------------------
# The refused Origin. JSON-RPC 2.0, "Response object": "id: This member is REQUIRED. It MUST
# be the same as the value of the id member in the Request Object. If there was an error in
# detecting the id in the Request object (e.g. Parse error/Invalid Request), it MUST be
# Null." The 2026-07-28 transport: "If the Origin header is present and invalid, servers MUST
# respond with HTTP 403 Forbidden."


@pytest.mark.parametrize("request_id", [42, "call-x"])
def test_a_refused_origin_echoes_the_requests_id(live_server, vend, request_id):
    _, token = vend("origin")
    body = {**LIST, "id": request_id}

    legacy = _post(live_server.url, body, token=token, Origin="https://evil.example")
    modern_body, headers = _modern(request_id, "tools/list", {})
    modern = _post(
        live_server.url, modern_body, token=token, Origin="https://evil.example", **headers
    )

    for response in (legacy, modern):
        assert response.status_code == 403
        answer = response.json()
        assert answer["id"] == request_id
        assert answer["error"]["data"]["error"]["code"] == "forbidden"


def test_a_refused_origin_on_a_body_without_a_readable_id_answers_id_null(live_server, vend):
    _, token = vend("origin-null")

    response = _post(live_server.url, b"{not json", token=token, Origin="https://evil.example")

    assert response.status_code == 403
    assert response.json()["id"] is None


# ---------------------------------------------------------------------------------------
# A tool's schema says "integer", which JSON Schema takes 93.0 to be: the tool takes it too.


def test_a_tool_takes_a_whole_number_float_where_its_schema_says_integer(live_server, vend):
    _, token = vend("floats")
    created = _post(live_server.url, _call(1, "create_todo", {"title": "f"}), token=token)
    todo_id = created.json()["result"]["structuredContent"]["todo"]["id"]

    read = _post(
        live_server.url,
        _call(2, "get_todo", {"todo_id": float(todo_id), "attempts_limit": 5.0}),
        token=token,
    )
    halved = _post(live_server.url, _call(3, "get_todo", {"todo_id": todo_id + 0.5}), token=token)

    assert read.json()["result"]["structuredContent"]["todo"]["id"] == todo_id
    refused = json.loads(halved.json()["result"]["content"][0]["text"])
    assert refused["error"]["code"] == "invalid"
