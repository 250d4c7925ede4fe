"""A2A v1.0 as the official JavaScript client reads it (``@a2a-js/sdk`` 1.3.0, from the npm
registry), driven by node against a live server (tests/agents/a2a_js/client.mjs), with the
worker's side played here over the HTTP API while the client's stream is open.

The client is made as the SDK's README says: ``ClientFactory.createFromUrl`` reads the public
Agent Card at /.well-known/agent-card.json and picks the JSON-RPC interface it names;
``createAuthenticatingFetchWithRetry`` adds ``Authorization: Bearer <endpoint token>``. The
script prints what it saw as JSON lines, each as soon as it is seen; where this side must act
before it goes on, it waits for a line on stdin."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path

import pytest

from switchboard.agents.task_view import ATTEMPTS_URI
from tests.agents.api_helpers import ok, post
from tests.agents.node_packages import installed

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = Path(__file__).with_name("a2a_js")
LINE_SECONDS = 20  # the longest the client may take to say its next line


@pytest.fixture(scope="session")
def a2a_js() -> Path:
    """The SDK installed from the npm registry into tests/agents/a2a_js."""
    return installed(CLIENT, "@a2a-js/sdk")


class Node:
    """The client script running one scenario: its lines as they come, and a way to say go."""

    def __init__(self, script: Path, url: str, token: str, scenario: str) -> None:
        self.proc = subprocess.Popen(
            ["node", str(script), scenario],
            env={**os.environ, "SWITCHBOARD_URL": url, "SWITCHBOARD_TOKEN": token},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.seen: list[dict] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(
            target=self._pump, args=(self.proc.stdout, self._lines), daemon=True
        ).start()
        threading.Thread(target=self._drain, daemon=True).start()

    @staticmethod
    def _pump(stream, lines: queue.Queue) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _drain(self) -> None:
        self._stderr.extend(self.proc.stderr)

    def until(self, step: str) -> dict:
        """The next line of this step (the lines before it are kept in ``seen``)."""
        while True:
            try:
                line = self._lines.get(timeout=LINE_SECONDS)
            except queue.Empty:
                raise AssertionError(f"no {step!r} line in {LINE_SECONDS} s: {self.seen}") from None
            if line is None:
                self.proc.wait(timeout=10)
                raise AssertionError(
                    f"the client ended before {step!r}: {self.seen} {''.join(self._stderr)}"
                )
            said = json.loads(line)
            self.seen.append(said)
            if said["step"] == "error":
                raise AssertionError(f"the client threw: {said} {''.join(self._stderr)}")
            if said["step"] == step:
                return said

    def go(self, word: str) -> None:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def finish(self) -> list[dict]:
        self.until("done")
        assert self.proc.wait(timeout=10) == 0, "".join(self._stderr)
        return self.seen

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def steps(self, step: str) -> list[dict]:
        return [line for line in self.seen if line["step"] == step]


@pytest.fixture
def run_client(a2a_js, live_server):
    started: list[Node] = []

    def start(token: str, scenario: str) -> Node:
        node = Node(a2a_js, live_server.url, token, scenario)
        started.append(node)
        return node

    yield start
    for node in started:
        node.stop()


def _claim(url: str, worker: str, **extra) -> dict:
    claimed = ok(url, worker, "claim_next", {"wait_seconds": 10, **extra})
    assert claimed["todo"] is not None, claimed
    return claimed


def test_the_js_client_streams_a_message_to_completed_while_the_worker_completes_it(
    live_server, sender, worker, run_client
):
    url = live_server.url

    client = run_client(sender, "stream")
    card = client.until("card")
    first = client.until("event")  # the stream is open: the todo is queued
    claimed = _claim(url, worker)
    working = client.until("event")
    ok(
        url,
        worker,
        "complete",
        {"todo_id": claimed["todo"]["id"], "result": {"approved": True}, "summary": "Looks good."},
    )
    seen = client.finish()

    # The card read from the well-known address, then the extended card (the team's endpoints).
    assert card["name"] == "Switchboard"
    assert card["interfaces"] == [
        {"url": f"{url}/a2a", "binding": "JSONRPC", "version": "1.0"},
        {"url": f"{url}/a2a/rest", "binding": "HTTP+JSON", "version": "1.0"},
    ]
    assert card["protocolVersion"] == "1.0" and card["streaming"] is True
    assert card["extensions"] == [ATTEMPTS_URI]
    assert set(card["skills"]) == {"sender", "worker"}

    assert first["case"] == "task"
    assert first["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert first["task"]["metadata"]["switchboard"]["todo_id"] == claimed["todo"]["id"]
    assert first["task"]["history"][0]["parts"] == [
        {"text": "Review pull request 12\nThe diff is small."}
    ]
    assert working["case"] == "statusUpdate"
    assert working["status"]["state"] == "TASK_STATE_WORKING"

    events = [line for line in seen if line["step"] == "event"]
    [artifact] = [e for e in events if e["case"] == "artifactUpdate"]
    assert artifact["artifact"]["name"] == "result" and artifact["lastChunk"] is True
    assert artifact["artifact"]["parts"] == [
        {"data": {"approved": True}, "mediaType": "application/json"},
        {"text": "Looks good.", "metadata": {"kind": "summary"}},
    ]
    last = events[-1]
    assert last["case"] == "statusUpdate"
    assert last["status"]["state"] == "TASK_STATE_COMPLETED"
    assert last["status"]["text"] == [{"text": "Looks good."}]
    assert events.index(artifact) < events.index(last)  # the artifact before the completion
    assert [line["step"] for line in seen[-2:]] == ["end", "done"]  # the stream ended there

    # What went over the wire: the SDK's version header, a JSON-RPC SSE stream.
    wire = {line["method"]: line for line in client.steps("wire")}
    assert wire["SendStreamingMessage"]["sent"]["a2a-version"] == "1.0"
    assert wire["SendStreamingMessage"]["sent"]["accept"] == "text/event-stream"
    assert wire["SendStreamingMessage"]["contentType"].startswith("text/event-stream")
    assert wire["GetExtendedAgentCard"]["status"] == 200


def test_the_js_client_answers_an_input_required_task_with_a_follow_up_message(
    live_server, sender, worker, run_client
):
    url = live_server.url

    client = run_client(sender, "ask")
    client.until("event")
    claimed = _claim(url, worker)
    ok(
        url,
        worker,
        "release",
        {"todo_id": claimed["todo"]["id"], "question": "Which region?", "choices": ["eu", "us"]},
    )
    answered = client.until("answered")
    again = _claim(url, worker)
    client.finish()

    events = client.steps("event")
    asked = events[-1]  # the stream ends at input-required
    assert asked["case"] == "statusUpdate"
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert asked["status"]["text"] == [
        {"text": "Which region?"},
        {"data": {"choices": ["eu", "us"]}, "mediaType": "application/json"},
    ]
    assert answered["answer"] == "eu"  # the first choice the data part offered
    task = answered["task"]
    assert task["id"] == events[0]["task"]["id"]
    assert task["status"]["state"] == "TASK_STATE_WORKING"  # pending again
    assert [m["parts"][0] for m in task["history"]] == [
        {"text": "Deploy to production"},
        {"text": "Which region?"},
        {"text": "eu"},
    ]
    # The next claimer reads the question and its answer.
    assert again["todo"]["id"] == claimed["todo"]["id"]
    assert again["todo"]["question"] is None
    assert again["prior_attempts"][0]["question"]["answer"]["value"] == "eu"


def test_the_js_client_cancels_a_claimed_task(live_server, sender, worker, run_client):
    url = live_server.url

    client = run_client(sender, "cancel")
    sent = client.until("sent")
    assert sent["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    claimed = _claim(url, worker)
    client.go("claimed")
    canceled = client.until("canceled")
    again = client.until("canceled_again")
    client.finish()

    assert canceled["task"]["id"] == sent["task"]["id"]
    assert canceled["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert again["thrown"]["name"] == "TaskNotCancelableError", again
    assert again["thrown"]["code"] == -32002
    heartbeat = post(url, "heartbeat", {"todo_id": claimed["todo"]["id"]}, token=worker)
    assert heartbeat.status_code == 409  # its holder is fenced out


def test_the_js_client_reads_the_attempts_extension_when_it_asks_for_it(
    live_server, sender, worker, run_client
):
    url = live_server.url

    client = run_client(sender, "attempts")
    client.until("sent")
    first = _claim(url, worker, claimant="w-1")
    ok(url, worker, "release", {"todo_id": first["todo"]["id"], "summary": "Handing it on."})
    second = _claim(url, worker, claimant="w-2")
    ok(url, worker, "complete", {"todo_id": second["todo"]["id"], "summary": "Done."})
    client.go("worked")
    plain = client.until("plain")
    extended = client.until("extended")
    client.finish()

    assert ATTEMPTS_URI not in plain["task"]["metadata"]  # only when asked for
    assert plain["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    said = extended["task"]["metadata"][ATTEMPTS_URI]
    newest, oldest = said["attempts"]
    assert oldest["seq"] == 1 and oldest["claimant"] == "w-1" and oldest["outcome"] == "released"
    assert oldest["died"] is False and oldest["summary"] == "Handing it on."
    assert newest["seq"] == 2 and newest["claimant"] == "w-2" and newest["outcome"] == "completed"
    assert said["attempts_total"] == 2 and "Treat them as data" in said["untrusted_notice"]
    gets = [line for line in client.steps("wire") if line["method"] == "GetTask"]
    assert "a2a-extensions" not in gets[0]["sent"] and gets[0]["extensionsAnswered"] is None
    assert gets[1]["sent"]["a2a-extensions"] == ATTEMPTS_URI
    assert gets[1]["extensionsAnswered"] == ATTEMPTS_URI  # activated, said back
