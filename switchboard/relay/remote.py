"""``switchboard relay --a2a URL``: each claimed todo is sent to a remote A2A agent (A2A v1.0,
JSON-RPC) instead of a command, and the remote task's end is the attempt's report
(docs/relay.md, "A remote A2A agent"). Standard library only, as the rest of the relay.

Per attempt: the todo's title and body, then the attempt's ``context.md`` (the todo and what
earlier attempts tried, under the untrusted-data notice), are sent as two text parts with
``SendMessage`` (``returnImmediately``;
``metadata.to`` from ``--a2a-to``), the task is read with ``GetTask`` every POLL_SECONDS while
the relay heartbeats, and its end is reported:

| remote task | the attempt |
|---|---|
| completed | complete: the artifacts' first data part as the result, their text and the status message as the summary |
| failed | fail (retried) |
| canceled, rejected, auth required | fail, not retryable |
| input required | release with the question (its text; ``choices`` from a data part) |

Each report's summary ends with ``A2A task: <id>``, the remote task's id (for people reading
the attempt, and for the relay's next attempt).

An answered question's next attempt sends the answer to that same remote task (a follow-up
message with its ``taskId``) rather than a new one. A heartbeat answered ``conflict`` (the
attempt ended elsewhere) and a relay told to stop cancel the remote task (``CancelTask``).
The remote agent's token comes from ``SWITCHBOARD_A2A_TOKEN`` (never an argument).
"""

from __future__ import annotations

import json
import re
import secrets
import time
import urllib.error
import urllib.request
from typing import Any

from switchboard.relay.attempt import Attempt
from switchboard.relay.context import AttemptFolder

POLL_SECONDS = 1.0
TIMEOUT_SECONDS = 30.0
TASK_LINE = re.compile(r"A2A task: (\S+)\Z")  # the last line of each report's summary
ENDED = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
         "TASK_STATE_REJECTED", "TASK_STATE_AUTH_REQUIRED"}  # fmt: skip
WAITING = "TASK_STATE_INPUT_REQUIRED"


class RemoteError(Exception):
    """The remote agent refused a call (a JSON-RPC error) or could not be reached."""


class Agent:
    """A remote A2A agent over JSON-RPC: its interface read from its Agent Card once."""

    def __init__(self, url: str, token: str) -> None:
        self.token = token
        self.url = self._interface(url.rstrip("/"))

    def _interface(self, base: str) -> str:
        """The card's JSON-RPC interface; the URL itself when it has no card."""
        try:
            card = self._request(f"{base}/.well-known/agent-card.json", None)
        except RemoteError:
            return base
        for interface in card.get("supportedInterfaces") or []:
            if interface.get("protocolBinding") == "JSONRPC" and interface.get("url"):
                return str(interface["url"])
        return base

    def call(self, method: str, params: dict) -> dict:
        said = self._request(
            self.url,
            {"jsonrpc": "2.0", "id": secrets.token_hex(6), "method": method, "params": params},
        )
        if "error" in said:
            error = said["error"] if isinstance(said["error"], dict) else {}
            raise RemoteError(f"{method}: {error.get('code')} {error.get('message')}")
        return said.get("result") or {}

    def _request(self, url: str, body: dict | None) -> dict:
        headers = {"A2A-Version": "1.0", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310 -- http(s) checked
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
                said = json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise RemoteError(f"HTTP {exc.code} {exc.reason}") from None
        except (OSError, ValueError) as exc:
            raise RemoteError(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(said, dict):
            raise RemoteError("the A2A agent answered with something other than a JSON object")
        return said


def _task(result: object, *, inside: bool = False) -> dict:
    """The task in a remote answer (``result.task`` for SendMessage, the result itself for
    GetTask), its shape checked: RemoteError for an answer that holds none (a bare message, a
    list); a status or artifacts of another shape read as none."""
    task = result.get("task") if inside and isinstance(result, dict) else result
    if not isinstance(task, dict) or not isinstance(task.get("id"), str):
        raise RemoteError("the A2A agent's answer holds no task")
    status = task.get("status") if isinstance(task.get("status"), dict) else {}
    if not isinstance(status.get("message"), dict):
        status = {k: v for k, v in status.items() if k != "message"}
    artifacts = task.get("artifacts") if isinstance(task.get("artifacts"), list) else []
    return task | {"status": status, "artifacts": [a for a in artifacts if isinstance(a, dict)]}


def _parts(parts: object) -> list[dict]:
    """A message's or an artifact's parts, of whatever shape the remote sent: the dicts of a
    list, else none."""
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _texts(parts: object) -> list[str]:
    return [p["text"] for p in _parts(parts) if isinstance(p.get("text"), str)]


def _data(parts: object) -> list:
    return [p["data"] for p in _parts(parts) if "data" in p]


class RemoteAttempt(Attempt):
    """One claimed todo worked by the remote A2A agent (the relay's ``agent``)."""

    def run(self) -> None:
        prior = self.claimed.get("prior_attempts") or []
        self.say(f"claimed as {self.claimant}; sending it to the A2A agent at {self.config.a2a}")
        agent: Agent = self.relay.agent  # type: ignore[attr-defined]
        try:
            task = self._send(agent, prior)
        except (RemoteError, OSError) as exc:
            self.say(f"the A2A agent did not take it ({exc}): failing")
            self._close("fail", summary=f"the A2A agent did not take it: {exc}")
            return
        ending = self._follow(agent, task)
        if ending is not None:
            self._report(ending)

    def _send(self, agent: Agent, prior: list) -> dict:
        followup = _answered(prior)
        if followup is not None:
            remote_id, value = followup
            self.say(f"sending the answer to the A2A task {remote_id}")
            parts = [{"text": value}] if isinstance(value, str) else [{"data": value}]
            message = {"messageId": secrets.token_hex(8), "role": "ROLE_USER", "taskId": remote_id,
                       "parts": parts}  # fmt: skip
            try:
                return _task(
                    agent.call(
                        "SendMessage",
                        {"message": message, "configuration": {"returnImmediately": True}},
                    ),
                    inside=True,
                )
            except RemoteError as exc:  # answered already (an attempt that died after it)
                self.say(f"the answer was not taken ({exc}); following the A2A task")
                return _task(agent.call("GetTask", {"id": remote_id, "historyLength": 0}))
        folder = AttemptFolder.make(
            self.relay.workdir, todo_id=self.todo["id"], seq=self.seq, say=self.say
        )
        folder.write_context(self.claimed, claimant=self.claimant)
        context = (folder.path / "context.md").read_text(encoding="utf-8")
        # The todo first (its title its first line: what the agent names the task by), then
        # the attempt's context: the todo again and what earlier attempts tried.
        asked = "\n\n".join(part for part in (self.todo["title"], self.todo.get("body")) if part)
        message = {
            "messageId": secrets.token_hex(8),
            "role": "ROLE_USER",
            "parts": [{"text": asked}, {"text": context}],
        }
        params: dict[str, Any] = {"message": message, "configuration": {"returnImmediately": True}}
        if self.config.a2a_to:
            params["metadata"] = {"to": self.config.a2a_to}
        return _task(agent.call("SendMessage", params), inside=True)

    def _follow(self, agent: Agent, task: dict) -> dict | None:
        """The remote task once it ends or needs input, heartbeating meanwhile; None when the
        attempt was lost or the relay stopped (the remote task canceled; the todo released)."""
        remote_id = task["id"]
        next_beat = time.monotonic() + self.config.heartbeat_seconds
        while _state(task) not in ENDED and _state(task) != WAITING:
            if self.relay.stopping.is_set():
                self._cancel(agent, remote_id)
                self.release("the relay was stopped while the A2A agent worked; released")
                return None
            if time.monotonic() >= next_beat:
                beat = self._heartbeat()
                if beat == "lost":
                    self._cancel(agent, remote_id)
                    return None
                next_beat = time.monotonic() + self.config.heartbeat_seconds
            self.relay.stopping.wait(min(POLL_SECONDS, self.config.heartbeat_seconds))
            try:
                task = _task(agent.call("GetTask", {"id": remote_id, "historyLength": 0}))
            except RemoteError as exc:
                self.say(f"GetTask failed ({exc}); trying again")
        return task

    def _cancel(self, agent: Agent, remote_id: str) -> None:
        try:
            agent.call("CancelTask", {"id": remote_id})
            self.say(f"canceled the A2A task {remote_id}")
        except RemoteError as exc:
            self.say(f"could not cancel the A2A task {remote_id}: {exc}")

    def _report(self, task: dict) -> None:
        state = _state(task)
        said = (task.get("status") or {}).get("message") or {}
        words = _texts(said.get("parts"))
        parts = [p for artifact in task.get("artifacts") or [] for p in artifact.get("parts") or []]
        said_text = "\n".join([*_texts(parts), *words]) or f"The A2A task ended {state}."
        summary = f"{said_text}\n\nA2A task: {task['id']}"
        if state == "TASK_STATE_COMPLETED":
            data = _data(parts)
            self.say("the A2A task completed: completing")
            arguments: dict[str, Any] = {"summary": summary}
            if data:
                arguments["result"] = data[0]
            self._close("complete", **arguments)
        elif state == WAITING:
            choices = next((d["choices"] for d in _data(said.get("parts")) if isinstance(d, dict)
                            and isinstance(d.get("choices"), list)), None)  # fmt: skip
            self.say("the A2A task needs input: asking a person")
            question = " ".join(words) or "The A2A agent needs input."
            self._close("release", question=question, choices=choices,
                        summary=f"The A2A agent needs input.\n\nA2A task: {task['id']}")  # fmt: skip
        else:
            retryable = state == "TASK_STATE_FAILED"
            self.say(
                f"the A2A task ended {state}: failing" + ("" if retryable else " (not retryable)")
            )
            self._close("fail", summary=summary, retryable=retryable)


def _state(task: dict) -> str:
    return str((task.get("status") or {}).get("state") or "")


def _answered(prior: list) -> tuple[str, Any] | None:
    """The remote task the newest earlier attempt asked about, and the answer, if it was
    answered (its summary's last line names the remote task)."""
    for attempt in prior:  # newest first
        question = attempt.get("question") or {}
        if attempt.get("outcome") != "asked" or not question.get("answer"):
            continue
        named = TASK_LINE.search(attempt.get("summary") or "")
        return (named.group(1), question["answer"].get("value")) if named else None
    return None
