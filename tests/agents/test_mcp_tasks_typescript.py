"""MCP's tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28) as a real client
library drives it: ``@modelcontextprotocol/ext-tasks`` 0.2.2, the extension's TypeScript
requester, on ``@modelcontextprotocol/client`` 2.4.0, run by node against a live server
(tests/agents/mcp_tasks_ts/client.mjs). The client calls create_todo and is handed a task
(``session.callTool`` → ``execution.settle()``); the worker, over the HTTP API, completes it,
asks a question (the client's elicitation handler answers it through ``tasks/update``), or
the client cancels it (``execution.cancel()``).

The package sends tools/call and tasks/* through a raw dispatch its host supplies (its SDK's
codecs reject ``resultType: "task"``): client.mjs's is one JSON-RPC POST per request, with
the package's framed ``_meta`` and the 2026-07-28 headers (``Mcp-Name`` = taskId on tasks/*).

The package validates a completed task's ``result`` with its own codec, as a 2026-07-28
``CallToolResult`` (its ``resultType`` required: the server once left it out, and the
package failed the execution for it)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from django_mcpz.server import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, PROTOCOL_VERSION

from switchboard.queues.models import Todo
from tests.agents.api_helpers import ok, post
from tests.agents.node_packages import installed
from tests.agents.test_mcp_tasks import TASKS, get

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = Path(__file__).with_name("mcp_tasks_ts")


@pytest.fixture(scope="session")
def tasks_client() -> Path:
    """The packages installed from the npm registry into tests/agents/mcp_tasks_ts."""
    return installed(CLIENT, "@modelcontextprotocol/ext-tasks")


class Run:
    """client.mjs running: its lines by step as they come."""

    def __init__(self, url: str, token: str, client: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            ["node", str(client), *args],
            env={**os.environ, "SWITCHBOARD_URL": url, "SWITCHBOARD_TOKEN": token},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.steps: dict[str, dict] = {}

    def _take(self, line: str) -> None:
        said = json.loads(line)
        self.steps[said["step"]] = said

    def until(self, step: str) -> dict:
        """Read lines until ``step`` is said (the client says each line as it happens)."""
        while step not in self.steps:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(
                    f"the client ended before {step!r}: {self.finish(check=False)}"
                )
            self._take(line)
        return self.steps[step]

    def tell(self) -> None:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def finish(self, *, check: bool = True) -> dict[str, dict]:
        """What the client said, by step; it must exit cleanly, having thrown nothing."""
        try:
            out, err = self.process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, err = self.process.communicate()
            raise AssertionError(f"the client hung:\n{self.steps}\n{out}\n{err}") from None
        for line in out.splitlines():
            self._take(line)
        if check:
            assert self.process.returncode == 0, err
            assert "thrown" not in self.steps, self.steps
        return self.steps


def connected_with_the_extension(steps: dict) -> None:
    """server/discover (no initialize): a 2026-07-28 connection and the extension declared,
    so the package chose its V2 (2026-07-28) task wire."""
    seen = steps["connected"]
    assert seen["era"] == "modern" and seen["protocolVersion"] == PROTOCOL_VERSION, seen
    assert seen["extensions"][TASKS] == {}, seen
    capabilities = steps["session"]["capabilities"]
    assert capabilities["execution"] and capabilities["cancellation"], capabilities
    assert capabilities["inputResponses"], capabilities


def wire(steps: dict) -> list[dict]:
    """The requests the package framed: each declared the extension and the protocol version
    in its _meta and was answered 200; tools/call was answered a task."""
    sent = steps["wire"]["sent"]
    assert steps["wire"]["errors"] == [], steps["wire"]
    for request in sent:
        meta = request["meta"]
        assert meta[META_PROTOCOL_VERSION] == PROTOCOL_VERSION, request
        assert meta[META_CLIENT_CAPABILITIES]["extensions"][TASKS] == {}, request
        assert request["http"] == 200, request
    call = sent[0]
    assert call["method"] == "tools/call" and call["mcpName"] == "create_todo", call
    assert call["answer"]["resultType"] == "task" and call["answer"]["status"] == "working"
    assert call["answer"]["taskId"] == steps["created"]["taskId"]
    for request in sent[1:]:  # "the client MUST set the Mcp-Name header to ... params.taskId"
        assert request["method"].startswith("tasks/"), request
        assert request["mcpName"] == steps["created"]["taskId"], request
    return sent


def test_the_client_settles_a_task_the_worker_completes(live_server, sender, worker, tasks_client):
    url = live_server.url
    run = Run(url, sender, tasks_client, "complete", "Render the report")
    try:
        # The server reads the task after create_todo commits: a worker that claimed and
        # completed in between would make the call's answer "completed" (truthfully). The
        # wire's promise is about a task answered while it works, so claim after the answer.
        run.until("created")
        claimed = ok(url, worker, "claim_next", {"wait_seconds": 20})
        assert claimed["todo"]["title"] == "Render the report"
        ok(
            url,
            worker,
            "complete",
            {"todo_id": claimed["todo"]["id"], "result": {"pages": 3}, "summary": "Three pages."},
        )
    finally:
        steps = run.finish()
    connected_with_the_extension(steps)
    created = steps["created"]
    assert created["kind"] == "task" and created["taskId"], created
    settled = steps["settled"]
    assert settled["status"] == "completed", settled
    assert settled["lastTask"] == {
        "taskId": created["taskId"],
        "status": "completed",
        "statusMessage": "Three pages.",
    }
    result = settled["result"]
    assert result["isError"] is False and result["resultType"] == "complete"
    said = result["structuredContent"]  # create_todo's own output shape
    assert set(said) == {"todo", "created"} and said["todo"]["id"] == claimed["todo"]["id"]
    assert said["todo"]["state"] == "done" and said["todo"]["result"] == {"pages": 3}
    assert json.loads(result["content"][0]["text"]) == said
    assert result["content"][1]["text"] == "Summary: Three pages."
    sent = wire(steps)
    assert {r["method"] for r in sent[1:]} == {"tasks/get"}  # it polled, and only that


def test_the_clients_elicitation_handler_answers_the_workers_question(
    live_server, sender, worker, tasks_client
):
    url = live_server.url
    run = Run(url, sender, tasks_client, "question", "Pick a format", "html")
    try:
        run.until("created")  # as above: the question comes after the call's answer
        claimed = ok(url, worker, "claim_next", {"wait_seconds": 20})
        todo_id = claimed["todo"]["id"]
        ok(
            url,
            worker,
            "release",
            {"todo_id": todo_id, "question": "Which format?", "choices": ["pdf", "html"]},
        )
        # The client polls, sees input_required, asks its handler, answers by tasks/update;
        # the answer makes the todo claimable again.
        again = ok(url, worker, "claim_next", {"wait_seconds": 20})
        assert again["todo"]["id"] == todo_id
        assert again["prior_attempts"][0]["question"]["answer"]["value"] == "html"
        ok(url, worker, "complete", {"todo_id": todo_id, "result": {"format": "html"}})
    finally:
        steps = run.finish()
    connected_with_the_extension(steps)
    asked = steps["asked"]
    assert asked["message"] == "Which format?" and asked["mode"] == "form"
    assert asked["schema"]["properties"]["answer"] == {"type": "string", "enum": ["pdf", "html"]}
    assert asked["taskId"] == steps["created"]["taskId"]
    assert asked["inputId"] == "q1" and asked["delivery"] == "task-update"
    settled = steps["settled"]
    assert settled["status"] == "completed", settled
    assert settled["result"]["structuredContent"]["todo"]["result"] == {"format": "html"}
    sent = wire(steps)
    [update] = [r for r in sent if r["method"] == "tasks/update"]
    assert update["answer"]["resultType"] == "complete"
    # The input_required poll came before the update; the key was answered once.
    methods = [r["method"] for r in sent]
    assert methods.index("tasks/update") > 1 and methods[1] == "tasks/get"
    polled = [r["answer"]["status"] for r in sent if r["method"] == "tasks/get"]
    assert "input_required" in polled and polled[-1] == "completed", polled


def test_a_cancel_through_the_client_is_cancelled(live_server, sender, worker, tasks_client):
    url = live_server.url
    run = Run(url, sender, tasks_client, "cancel", "Never mind")
    try:
        task = run.until("created")["taskId"]
        claimed = ok(url, worker, "claim_next", {"wait_seconds": 20})
        assert claimed["todo"]["title"] == "Never mind"
        run.tell()  # now the client cancels it, while the worker holds it
    finally:
        steps = run.finish()
    connected_with_the_extension(steps)
    # The client's own tasks/get, after its cancel was acknowledged: cancelled.
    assert steps["cancelled"]["snapshot"]["taskId"] == task
    assert steps["cancelled"]["snapshot"]["status"] == "cancelled", steps["cancelled"]
    sent = wire(steps)
    assert [r["method"] for r in sent] == ["tools/call", "tasks/cancel", "tasks/get"]
    assert {k for k in sent[1]["answer"] if k != "_meta"} == {"resultType"}  # an empty ack
    # tasks/get as any other client reads it: cancelled; the worker's lease is fenced.
    said = get(url, sender, task).json()["result"]
    assert said["status"] == "cancelled"
    assert Todo.objects.get(pk=claimed["todo"]["id"]).state == "canceled"
    fenced = post(url, "heartbeat", {"todo_id": claimed["todo"]["id"]}, token=worker)
    assert fenced.status_code == 409
