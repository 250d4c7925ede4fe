"""MCP's tasks extension, ``io.modelcontextprotocol/tasks`` (SEP-2663, 2026-07-28), on ``/mcp``
(issue 45), by raw JSON-RPC against a live server, each rule quoted from the specification
(modelcontextprotocol/ext-tasks, specification/2026-07-28/tasks.md); the worker's side over
the HTTP API."""

from __future__ import annotations

import json

import httpx
import msgspec
import pytest
from django_mcpz.server import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION

from switchboard.agents import schemas
from switchboard.agents.task_view import ATTEMPTS_META, task_id
from switchboard.queues.models import Todo
from tests import loopback
from tests.agents.api_helpers import ok, post
from tests.queues.helpers import lapse_lease

pytestmark = pytest.mark.django_db(transaction=True)

TASKS = "io.modelcontextprotocol/tasks"


def mcp(
    url: str,
    token: str | None,
    method: str,
    params: dict,
    *,
    extensions=(TASKS,),
    name: str | None = None,
    headers: dict | None = None,
    request_id: object = 1,
):
    """A 2026-07-28 request: its metadata in ``_meta`` and the headers that must agree with it;
    ``extensions`` declared in the request's client capabilities."""
    capabilities = {"extensions": {e: {} for e in extensions}} if extensions else {}
    meta = {META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: capabilities}
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {**params, "_meta": meta},
    }
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": method,
    }
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if name is not None:
        sent["Mcp-Name"] = name
    elif method == "tools/call":
        sent["Mcp-Name"] = params["name"]
    elif method.startswith("tasks/") and isinstance(params.get("taskId"), str):
        sent["Mcp-Name"] = params["taskId"]
    sent.update(headers or {})
    return loopback.post(f"{url}/mcp", content=json.dumps(body).encode(), headers=sent, timeout=30)


def create(url, token, to="worker", title="Summarise the report", **arguments):
    return mcp(
        url,
        token,
        "tools/call",
        {"name": "create_todo", "arguments": {"to": to, "title": title, **arguments}},
    )


def get(url, token, task, **kw):
    return mcp(url, token, "tasks/get", {"taskId": task}, **kw)


def test_server_discover_declares_the_extension(live_server, vend):
    """ "The server declares support for the tasks extension ... in response to
    server/discover": ``capabilities.extensions["io.modelcontextprotocol/tasks"] = {}``."""
    _, token = vend("caller")
    said = mcp(live_server.url, token, "server/discover", {}).json()["result"]
    assert said["capabilities"]["extensions"][TASKS] == {}
    assert said["capabilities"]["extensions"][ATTEMPTS_META] == {}


def test_create_todo_answers_a_task_only_to_a_client_that_declared_it(live_server, vend):
    """ "A server MUST NOT return CreateTaskResult to a client that did not include the
    extension capability on its request"; "Servers MUST set resultType to "task" when
    returning a CreateTaskResult"; "A server MUST NOT return CreateTaskResult until the task
    is durably created — that is, until a tasks/get for the returned taskId would resolve"."""
    _, token = vend("sender")
    vend("worker")
    url = live_server.url
    plain = mcp(
        url,
        token,
        "tools/call",
        {"name": "create_todo", "arguments": {"to": "worker", "title": "plain"}},
        extensions=(),
    ).json()["result"]
    assert plain["resultType"] == "complete" and plain["structuredContent"]["todo"]["id"]
    answered = create(url, token)
    assert answered.status_code == 200
    result = answered.json()["result"]
    assert result["resultType"] == "task"
    assert result["status"] == "working"
    assert set(result) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"}
    assert result["ttlMs"] is None and result["pollIntervalMs"] == 1000  # kept while it runs
    todo = Todo.objects.get(title="Summarise the report")
    assert result["taskId"] == task_id(todo.endpoint.team_id, todo.pk)  # unguessable
    again = get(url, token, result["taskId"]).json()["result"]
    assert again["resultType"] == "complete" and again["taskId"] == result["taskId"]


def test_a_task_follows_the_todo_to_completed_with_its_result(live_server, vend):
    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    task = create(url, token).json()["result"]["taskId"]
    claimed = ok(url, worker, "claim_next", {})
    assert get(url, token, task).json()["result"]["status"] == "working"
    ok(
        url,
        worker,
        "complete",
        {"todo_id": claimed["todo"]["id"], "result": {"pages": 3}, "summary": "Three pages."},
    )
    done = get(url, token, task).json()["result"]
    # "If the request completed with a result ..., the task uses completed status and the
    # result field MUST contain that result."
    assert done["status"] == "completed"
    assert done["result"]["isError"] is False
    # "The structure matches the result type of the original request": create_todo's, its
    # output schema's shape, and (2026-07-28) a Result with its resultType.
    assert done["result"]["resultType"] == "complete"
    said = done["result"]["structuredContent"]
    assert set(said) == {"todo", "created"} and said["todo"]["result"] == {"pages": 3}
    msgspec.convert(said, schemas.CreateTodoOut)  # the tool's declared output schema
    assert said["todo"]["state"] == "done" and said["todo"]["id"] == claimed["todo"]["id"]
    assert done["result"]["content"][1]["text"] == "Summary: Three pages."
    assert done["ttlMs"] > 29 * 24 * 3600 * 1000  # the retention, from creation


def test_a_dead_letter_is_completed_with_is_error_and_cancel_is_cancelled(live_server, vend):
    """ "completed: ... This includes tool calls that returned results with isError: true";
    "failed ... MUST NOT be used for non-JSON-RPC errors"."""
    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    task = create(url, token, max_attempts=1).json()["result"]["taskId"]
    claimed = ok(url, worker, "claim_next", {})
    ok(url, worker, "fail", {"todo_id": claimed["todo"]["id"], "summary": "Disk full"})
    dead = get(url, token, task).json()["result"]
    assert dead["status"] == "completed" and dead["result"]["isError"] is True
    assert "structuredContent" not in dead["result"]
    assert "Disk full" in dead["statusMessage"]
    other = create(url, token, title="cancel me").json()["result"]["taskId"]
    claimed = ok(url, worker, "claim_next", {})
    # "On success, the server MUST acknowledge the request with an empty result."
    ack = mcp(url, token, "tasks/cancel", {"taskId": other}).json()["result"]
    assert {k for k in ack if k != "_meta"} == {"resultType"} and ack["resultType"] == "complete"
    assert get(url, token, other).json()["result"]["status"] == "cancelled"
    fenced = post(url, "heartbeat", {"todo_id": claimed["todo"]["id"]}, token=worker)
    assert fenced.status_code == 409
    # Terminal states are final: a second cancel is acknowledged and changes nothing.
    assert mcp(url, token, "tasks/cancel", {"taskId": other}).json()["result"]["resultType"]
    assert get(url, token, other).json()["result"]["status"] == "cancelled"


def test_a_question_is_input_required_and_tasks_update_answers_it(live_server, vend):
    """ "For input_required ... MUST return a Task object with status input_required and an
    inputRequests field"; tasks/update's inputResponses are "keyed by the task's outstanding
    inputRequests keys"; "A server SHOULD ignore any inputResponses responses mapped to a key
    that is not currently outstanding"."""
    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    task = create(url, token).json()["result"]["taskId"]
    claimed = ok(url, worker, "claim_next", {})
    ok(
        url,
        worker,
        "release",
        {"todo_id": claimed["todo"]["id"], "question": "Which format?", "choices": ["pdf", "html"]},
    )
    waiting = get(url, token, task).json()["result"]
    assert waiting["status"] == "input_required"
    [(key, asked)] = waiting["inputRequests"].items()
    assert key == "q1" and asked["method"] == "elicitation/create"
    assert asked["params"]["message"] == "Which format?"
    assert asked["params"]["requestedSchema"]["properties"]["answer"]["enum"] == ["pdf", "html"]

    def accept(answer: str):
        return mcp(
            url,
            token,
            "tasks/update",
            {
                "taskId": task,
                "inputResponses": {key: {"action": "accept", "content": {"answer": answer}}},
            },
        )

    ignored = mcp(
        url,
        token,
        "tasks/update",
        {
            "taskId": task,
            "inputResponses": {
                "q9": {"action": "accept", "content": {"answer": "pdf"}},
                key: {"action": "decline"},
            },
        },
    )
    assert ignored.json()["result"]["resultType"] == "complete"
    assert get(url, token, task).json()["result"]["status"] == "input_required"
    wrong = accept("doc")
    assert wrong.json()["error"]["code"] == -32602 and "choices" in wrong.json()["error"]["message"]
    answered = accept("pdf")
    assert answered.json()["result"]["resultType"] == "complete"
    assert get(url, token, task).json()["result"]["status"] == "working"
    # The same key again, another answer: no longer outstanding, so ignored (the first stands).
    stale = accept("html")
    assert stale.json()["result"]["resultType"] == "complete", stale.json()
    assert get(url, token, task).json()["result"]["status"] == "working"
    again = ok(url, worker, "claim_next", {})
    assert again["prior_attempts"][0]["question"]["answer"]["value"] == "pdf"


def test_the_attempts_meta_says_attempt_one_died_after_its_last_heartbeat(live_server, vend):
    from switchboard.queues.transitions import reap_lapsed

    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    task = create(url, token).json()["result"]["taskId"]
    first = ok(url, worker, "claim_next", {"claimant": "w-1"})
    ok(url, worker, "heartbeat", {"todo_id": first["todo"]["id"]})
    lapse_lease(first["todo"]["id"])
    reap_lapsed()
    ok(url, worker, "claim_next", {"claimant": "w-2"})
    plain = get(url, token, task).json()["result"]
    assert ATTEMPTS_META not in plain["_meta"]
    said = get(url, token, task, extensions=(TASKS, ATTEMPTS_META)).json()["result"]
    second, first_attempt = said["_meta"][ATTEMPTS_META]["attempts"]
    assert first_attempt["died"] is True and first_attempt["claimant"] == "w-1"
    assert first_attempt["last_heartbeat_at"] and first_attempt["outcome"] == "reaped"
    assert second["ended_at"] is None and second["claimant"] == "w-2"


def test_the_extensions_rules_for_a_request_that_breaks_them(live_server, vend, make_user):
    _, token = vend("sender")
    vend("worker")
    url = live_server.url
    task = create(url, token).json()["result"]["taskId"]
    # "Servers MUST return this error for non-declaring clients issuing tasks/get,
    # tasks/update, and tasks/cancel requests" (-32021; "For HTTP, the response status code
    # MUST be 400 Bad Request").
    for method in ("tasks/get", "tasks/update", "tasks/cancel"):
        said = mcp(url, token, method, {"taskId": task, "inputResponses": {}}, extensions=())
        assert said.status_code == 400, method
        error = said.json()["error"]
        assert error["code"] == -32021
        assert error["data"]["requiredCapabilities"] == {"extensions": {TASKS: {}}}
    # "the client MUST set the Mcp-Name header to the value of params.taskId".
    for name in ("", "someone-else"):
        said = get(url, token, task, name=name)
        assert said.status_code == 400 and said.json()["error"]["code"] == -32020
    # Unknown, malformed and another team's ids: -32602, "Failed to retrieve task: Task not
    # found", alike.
    bob_team = make_user("bob").teams.get()
    _, bobs_token = vend("bobs", team=bob_team)
    vend("bobs-worker", team=bob_team)
    bobs_task = create(url, bobs_token, to="bobs-worker").json()["result"]["taskId"]
    todo_id = int(task.split("-")[0])
    answers = []
    for asked in (bobs_task, f"{todo_id}", f"{todo_id}-AAAA", "x" * 100, "1-" + task[-22:]):
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            said = mcp(url, token, method, {"taskId": asked, "inputResponses": {}})
            assert said.status_code == 200
            answers.append(said.json()["error"])
    assert all(a == answers[0] for a in answers), answers
    assert answers[0] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    assert Todo.objects.get(title="Summarise the report", endpoint__team=bob_team).state == (
        "pending"
    )
    # Bad params: a taskId not a string, inputResponses not an object.
    said = mcp(url, token, "tasks/get", {"taskId": 5}, name="5")
    assert said.json()["error"]["code"] == -32602
    said = mcp(url, token, "tasks/update", {"taskId": task, "inputResponses": []})
    assert said.json()["error"]["code"] == -32602
    # No token: the 401 every MCP request gets; the old revision's methods stay unknown.
    assert mcp(url, None, "tasks/get", {"taskId": task}).status_code == 401
    assert mcp(url, token, "tasks/result", {"taskId": task}).json()["error"]["code"] == -32601
    assert mcp(url, token, "tasks/list", {}).json()["error"]["code"] == -32601


def test_a_frozen_verb_set_holds_for_tasks(live_server, vend):
    _, sender = vend("sender")
    vend("worker")
    _, reader = vend("reader", verbs=["create_todo"])
    task = create(live_server.url, sender).json()["result"]["taskId"]
    said = get(live_server.url, reader, task).json()
    assert said["error"]["code"] == -32602  # a get without get_todo: refused
    assert "get_todo" in said["error"]["message"]


def test_subscriptions_listen_pushes_notifications_tasks_until_the_task_ends(live_server, vend):
    """ "Servers MAY push status updates via notifications/tasks"; "Each notification carries a
    complete DetailedTask for the current status, identical to what tasks/get would have
    returned"; the acknowledgement names "the list of task IDs it has agreed to send task
    status notifications for" (another team's and a made-up id are not agreed to); "Servers
    MUST return this error [-32021] for non-declaring clients requesting task notifications on
    subscriptions/listen"."""
    import threading

    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    task = create(url, token).json()["result"]["taskId"]
    refused = mcp(
        url, token, "subscriptions/listen", {"notifications": {"taskIds": [task]}}, extensions=()
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32021
    capabilities = {"extensions": {TASKS: {}}}
    meta = {META_PROTOCOL_VERSION: PROTOCOL_VERSION, META_CLIENT_CAPABILITIES: capabilities}
    body = {
        "jsonrpc": "2.0",
        "id": "sub-1",
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [task, "1-made-up"]}, "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": PROTOCOL_VERSION,
        "Mcp-Method": "subscriptions/listen",
    }
    said: list[dict] = []
    with httpx.stream("POST", f"{url}/mcp", json=body, headers=headers, timeout=30) as stream:
        assert stream.headers["content-type"] == "text/event-stream"
        lines = stream.iter_lines()

        def next_message() -> dict:
            for line in lines:
                if line.startswith("data: "):
                    said.append(json.loads(line[6:]))
                    return said[-1]
            raise AssertionError("the stream ended")

        ack = next_message()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"]["taskIds"] == [task]
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"
        now = next_message()
        assert now["method"] == "notifications/tasks" and now["params"]["status"] == "working"

        def work() -> None:
            claimed = ok(url, worker, "claim_next", {"wait_seconds": 5})
            ok(url, worker, "complete", {"todo_id": claimed["todo"]["id"], "result": 7})

        worker_thread = threading.Thread(target=work)
        worker_thread.start()
        while True:
            message = next_message()
            if "result" in message:
                break
            assert message["method"] == "notifications/tasks"
        worker_thread.join()
    statuses = [m["params"]["status"] for m in said if m.get("method") == "notifications/tasks"]
    assert statuses[-1] == "completed" and "resultType" not in said[-2]["params"]
    final = said[-2]["params"]
    assert final["result"]["structuredContent"]["todo"]["result"] == 7
    got = get(url, token, task).json()["result"]
    assert {k: v for k, v in got.items() if k not in ("resultType", "_meta")} == {
        k: v for k, v in final.items() if k != "_meta"
    }
    assert said[-1] == {
        "jsonrpc": "2.0",
        "id": "sub-1",
        "result": {
            "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"},
        },
    }
