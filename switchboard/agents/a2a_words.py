"""A2A v1.0 in its own words (agents/a2a.py serves it): the JSON-RPC and A2A error codes, the
requests as lenient structs (unknown members ignored, as protobuf's JSON is read), the Agent
Cards, a task view (agents/task_view.py) written as an A2A Task, and a message's parts read
as a todo's title and body."""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from typing import Any

import msgspec

from switchboard.agents import task_view
from switchboard.agents.openapi import capabilities
from switchboard.agents.task_view import ATTEMPTS_URI, TaskView
from switchboard.queues import bounds
from switchboard.queues.errors import (
    DomainError,
    Forbidden,
    NotFound,
    RateLimited,
    Unauthorized,
    Unavailable,
)
from switchboard.queues.models import Endpoint
from switchboard.queues.records import UNTRUSTED_NOTICE

PATH = "/a2a"  # the JSON-RPC binding's address
REST_PATH = "/a2a/rest"  # the HTTP+JSON binding's (agents/a2a_rest.py)
PROTOCOL_VERSION = "1.0"

# JSON-RPC's codes and A2A's (a2a-sdk's JSON_RPC_ERROR_CODE_MAP).
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
TASK_NOT_FOUND, TASK_NOT_CANCELABLE, PUSH_NOT_SUPPORTED = -32001, -32002, -32003
UNSUPPORTED_OPERATION, CONTENT_TYPE_NOT_SUPPORTED, VERSION_NOT_SUPPORTED = -32004, -32005, -32009
SERVER_ERROR = -32000  # unauthorized, rate limited, unavailable: the HTTP status says which

TASK_STATES = {
    task_view.SUBMITTED: "TASK_STATE_SUBMITTED",
    task_view.WORKING: "TASK_STATE_WORKING",
    task_view.INPUT_REQUIRED: "TASK_STATE_INPUT_REQUIRED",
    task_view.COMPLETED: "TASK_STATE_COMPLETED",
    task_view.FAILED: "TASK_STATE_FAILED",
    task_view.CANCELED: "TASK_STATE_CANCELED",
    task_view.REJECTED: "TASK_STATE_REJECTED",
}
STATES_BY_NAME = {name: state for state, name in TASK_STATES.items()}


class A2AError(Exception):
    """A JSON-RPC error: its code, message, HTTP status, and our error code as ErrorInfo."""

    def __init__(
        self, code: int, message: str, *, reason: str = "invalid", status: int = 200, **extra
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.reason, self.status = code, message, reason, status
        self.extra = extra

    def info(self) -> dict:
        """A ``google.rpc.ErrorInfo``: A2A's reason for A2A's codes (what the SDKs map back to
        their typed errors), the HTTP API's error code in its metadata."""
        a2a = _REASONS.get(self.code)
        return {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": a2a[1] if a2a else self.reason.upper(),
            "domain": "a2a-protocol.org" if a2a else "switchboard",
            "metadata": {"code": self.reason, **{k: str(v) for k, v in self.extra.items()}},
        }

    def body(self, rpc_id: object) -> dict:
        """The JSON-RPC binding's error response."""
        return {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "error": {"code": self.code, "message": self.message, "data": [self.info()]},
        }

    def rest_status(self) -> int:
        a2a = _REASONS.get(self.code)
        return a2a[0] if a2a else (self.status if self.status != 200 else 400)

    def rest_body(self) -> dict:
        """The HTTP+JSON binding's error: a ``google.rpc.Status``."""
        status = self.rest_status()
        return {
            "error": {
                "code": status,
                "status": _STATUS_NAMES.get(status, "UNKNOWN"),
                "message": self.message,
                "details": [self.info()],
            }
        }


# A2A's code -> (the HTTP+JSON binding's status, A2A's ErrorInfo reason): a2a-sdk's
# A2A_ERROR_MAPPING, the protocol's table.
_REASONS = {
    TASK_NOT_FOUND: (404, "TASK_NOT_FOUND"),
    TASK_NOT_CANCELABLE: (400, "TASK_NOT_CANCELABLE"),
    PUSH_NOT_SUPPORTED: (400, "PUSH_NOTIFICATION_NOT_SUPPORTED"),
    UNSUPPORTED_OPERATION: (400, "UNSUPPORTED_OPERATION"),
    CONTENT_TYPE_NOT_SUPPORTED: (400, "CONTENT_TYPE_NOT_SUPPORTED"),
    VERSION_NOT_SUPPORTED: (400, "VERSION_NOT_SUPPORTED"),
    INVALID_PARAMS: (400, "INVALID_PARAMS"),
    INVALID_REQUEST: (400, "INVALID_REQUEST"),
    PARSE_ERROR: (400, "INVALID_REQUEST"),
    METHOD_NOT_FOUND: (404, "METHOD_NOT_FOUND"),
}
_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def from_domain(error: DomainError, *, not_found: int = TASK_NOT_FOUND) -> A2AError:
    """A domain error in A2A's words: a task's NotFound is TaskNotFound (unknown and foreign
    alike), a refused verb UnsupportedOperation, the transport's refusals keep their status."""
    reason = error.code
    if isinstance(error, NotFound):
        return A2AError(not_found, error.message, reason=reason)
    if isinstance(error, Forbidden):
        return A2AError(UNSUPPORTED_OPERATION, error.message, reason=reason)
    if isinstance(error, Unauthorized | RateLimited | Unavailable):
        return A2AError(
            SERVER_ERROR, error.message, reason=reason, status=error.status, **error.extra
        )
    return A2AError(INVALID_PARAMS, error.message, reason=reason)


# ---------------------------------------------------------------------------------------
# The wire: requests as lenient structs (unknown members ignored, as protobuf's JSON is read),
# the values checked where they are used.


class Part(msgspec.Struct, rename="camel"):
    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any = msgspec.UNSET
    metadata: dict | None = None
    filename: str | None = None
    media_type: str | None = None


class MessageIn(msgspec.Struct, rename="camel"):
    message_id: str = ""
    context_id: str = ""
    task_id: str = ""
    role: str = ""
    parts: list[Part] = []
    metadata: dict | None = None
    extensions: list[str] = []
    reference_task_ids: list[str] = []


class Configuration(msgspec.Struct, rename="camel"):
    accepted_output_modes: list[str] = []
    task_push_notification_config: dict | None = None
    history_length: int | None = None
    return_immediately: bool = False


class Send(msgspec.Struct, rename="camel"):
    message: MessageIn
    tenant: str = ""
    configuration: Configuration = msgspec.field(default_factory=Configuration)
    metadata: dict | None = None


class GetParams(msgspec.Struct, rename="camel"):
    id: str
    tenant: str = ""
    history_length: int | None = None


class CancelParams(msgspec.Struct, rename="camel"):
    id: str
    tenant: str = ""
    metadata: dict | None = None


class TenantParams(msgspec.Struct, rename="camel"):
    tenant: str = ""


class PageParams(TenantParams):
    """What an A2A list request asks of its list (tasks, a task's push configs): a page."""

    page_size: int | None = None
    page_token: str = ""


class ListParams(PageParams):
    context_id: str = ""
    status: str = ""
    history_length: int | None = None
    status_timestamp_after: str | None = None
    include_artifacts: bool = False


class Envelope(msgspec.Struct):
    jsonrpc: str = ""
    method: Any = None
    params: Any = msgspec.UNSET
    id: Any = None


def params_of[T](kind: type[T], params: object) -> T:
    if params is msgspec.UNSET:
        params = {}
    if not isinstance(params, dict):
        raise A2AError(INVALID_PARAMS, "params must be an object.")
    try:
        return msgspec.convert(params, kind)
    except msgspec.ValidationError as exc:
        raise A2AError(INVALID_PARAMS, f"Invalid params: {exc}") from None


# ---------------------------------------------------------------------------------------
# The cards


def _card(base: str, skills: list[dict], *, description: str) -> dict:
    return {
        "name": "Switchboard",
        "description": description,
        "supportedInterfaces": [
            {"url": base + PATH, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION},
            {
                "url": base + REST_PATH,
                "protocolBinding": "HTTP+JSON",
                "protocolVersion": PROTOCOL_VERSION,
            },
        ],
        "provider": {"organization": "Switchboard", "url": base + "/"},
        "version": capabilities()["version"],
        "documentationUrl": base + "/api/v1/openapi.json",
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,
            "extendedAgentCard": True,
            "extensions": [
                {
                    "uri": ATTEMPTS_URI,
                    "description": "Each task's attempts: who claimed it, how each ended"
                    " (died: its lease lapsed; failed: its worker said so), their summaries,"
                    " questions and answers, in metadata under this URI. Ask for it in the"
                    " A2A-Extensions header. " + UNTRUSTED_NOTICE,
                    "required": False,
                }
            ],
        },
        "securitySchemes": {
            "endpointToken": {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    "description": "An endpoint token of your team (the Board's Endpoints"
                    " page vends one): the tasks you send are sent by that endpoint.",
                }
            }
        },
        "securityRequirements": [{"schemes": {"endpointToken": {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    }


def public_card(base: str) -> dict:
    """What anyone may read: what Switchboard is and how to authenticate; no team, endpoint
    or todo."""
    skill = {
        "id": "todo",
        "name": "Queue work for an agent",
        "description": "A message becomes a todo on the endpoint named by metadata.to (an agent"
        " id of your team; the extended card lists them as skills), claimed by one of its"
        " agents as a lease, retried with backoff, and answered as a task with its attempts.",
        "tags": ["queue", "todo", "lease"],
        "examples": ["metadata: {to: 'reviewer'}; text: 'Review pull request 12'"],
        "inputModes": ["text/plain", "application/json"],
        "outputModes": ["text/plain", "application/json"],
    }
    return _card(
        base,
        [skill],
        description="A work queue for AI agents: send a task to one of your team's endpoints;"
        " its agents claim it as a lease, and you follow it to its end.",
    )


def extended_card(base: str, slug: str, live: list[tuple[str, str, bool]]) -> dict:
    skills = [
        {
            "id": agent_id,
            "name": name or agent_id,
            "description": f"Todos for the endpoint {agent_id!r} of team {slug!r}"
            + (" (paused: a message to it is rejected)." if paused else "."),
            "tags": ["endpoint", "paused"] if paused else ["endpoint"],
            "inputModes": ["text/plain", "application/json"],
            "outputModes": ["text/plain", "application/json"],
        }
        for agent_id, name, paused in live
    ]
    return _card(base, skills, description=f"Switchboard, team {slug!r}: its endpoints as skills.")


# ---------------------------------------------------------------------------------------
# Tasks in A2A's words


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None


def _value_parts(value: object) -> list[dict]:
    if isinstance(value, str):
        return [{"text": value}]
    return [{"data": value, "mediaType": "application/json"}]


def _question_parts(question: dict) -> list[dict]:
    parts: list[dict] = [{"text": question.get("text") or ""}]
    asks = {k: question[k] for k in ("choices", "answer_schema") if question.get(k) is not None}
    if asks:
        parts.append({"data": asks, "mediaType": "application/json"})
    return parts


def _message(v: TaskView, key: str, role: str, parts: list[dict]) -> dict:
    return {
        "messageId": f"{v.id}:{key}",
        "contextId": v.id,
        "taskId": v.id,
        "role": role,
        "parts": parts,
    }


def status_json(v: TaskView) -> dict:
    status: dict[str, Any] = {
        "state": TASK_STATES[v.state],
        "timestamp": _iso(v.todo.updated_at),
    }
    if v.state == task_view.INPUT_REQUIRED and v.question is not None:
        status["message"] = _message(
            v, f"q{v.question.get('attempt_seq')}", "ROLE_AGENT", _question_parts(v.question)
        )
    elif v.message:
        status["message"] = _message(
            v, f"status:{v.todo.updated_at.timestamp():.6f}", "ROLE_AGENT", [{"text": v.message}]
        )
    return status


def _history(v: TaskView) -> list[dict]:
    todo = v.todo
    said = [
        {
            **_message(v, "request", "ROLE_USER", [{"text": todo.body or todo.title}]),
            "metadata": {"title": todo.title},
        }
    ]
    for question in reversed(v.questions):  # oldest first
        seq = question.get("attempt_seq")
        said.append(_message(v, f"q{seq}", "ROLE_AGENT", _question_parts(question)))
        answer = question.get("answer")
        if answer:
            said.append(_message(v, f"a{seq}", "ROLE_USER", _value_parts(answer.get("value"))))
    return said


def artifacts_of(v: TaskView) -> list[dict]:
    if v.state != task_view.COMPLETED:
        return []
    parts = [] if v.todo.result is None else _value_parts(v.todo.result)
    if v.summary:
        parts.append({"text": v.summary, "metadata": {"kind": "summary"}})
    if not parts:
        return []
    return [{"artifactId": f"{v.id}:result", "name": "result", "parts": parts}]


def task_json(
    v: TaskView, *, history_length: int | None = None, attempts: bool, artifacts: bool = True
) -> dict:
    todo = v.todo
    task: dict[str, Any] = {"id": v.id, "contextId": v.id, "status": status_json(v)}
    if artifacts:
        made = artifacts_of(v)
        if made:
            task["artifacts"] = made
    if history_length != 0:
        history = _history(v)
        task["history"] = history[-history_length:] if history_length else history
    meta: dict[str, Any] = {
        "switchboard": {
            "todo_id": todo.id,
            "endpoint": todo.endpoint,
            "state": todo.state,
            "attempt": todo.attempt,
            "created_at": _iso(todo.created_at),
        }
    }
    if attempts:
        meta[ATTEMPTS_URI] = v.attempts_extension()
    task["metadata"] = meta
    return task


def envelope(body: bytes) -> Envelope:
    try:
        data = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        raise A2AError(PARSE_ERROR, "The body is not JSON.", status=400) from None
    if isinstance(data, list):
        raise A2AError(INVALID_REQUEST, "Batches are not served: send one request at a time.")
    if not isinstance(data, dict):
        raise A2AError(INVALID_REQUEST, "The body must be a JSON-RPC request object.")
    rpc_id = data.get("id")
    if rpc_id is not None and (not isinstance(rpc_id, str | int) or isinstance(rpc_id, bool)):
        raise A2AError(INVALID_REQUEST, "id must be a string, a number or null.")
    if data.get("jsonrpc") != "2.0":
        raise A2AError(INVALID_REQUEST, 'jsonrpc must be "2.0".')
    return Envelope(
        jsonrpc="2.0",
        method=data.get("method"),
        params=data.get("params", msgspec.UNSET),
        id=rpc_id,
    )


def contents(parts: list[Part]) -> tuple[list[str], list[Any]]:
    texts: list[str] = []
    data: list[Any] = []
    for part in parts:
        if part.raw is not None or part.url is not None:
            raise A2AError(
                CONTENT_TYPE_NOT_SUPPORTED,
                "File parts are not accepted: a todo holds text. Send text or data parts"
                " (a file's address may go in a text part).",
                reason="invalid",
            )
        if part.text is not None:
            texts.append(part.text)
        elif part.data is not msgspec.UNSET:
            data.append(part.data)
        else:
            raise A2AError(INVALID_PARAMS, "Each part holds text or data.")
    if not texts and not data:
        raise A2AError(INVALID_PARAMS, "A message needs at least one text or data part.")
    return texts, data


# metadata's words for create_todo's arguments (an A2A client writes camelCase, ours snake_case)
_CREATE_FIELDS = {
    "priority": "priority",
    "maxAttempts": "max_attempts",
    "max_attempts": "max_attempts",
    "notBefore": "not_before",
    "not_before": "not_before",
    "idempotencyKey": "idempotency_key",
    "idempotency_key": "idempotency_key",
    "key": "key",
    "uniqueWhileActive": "unique_while_active",
    "unique_while_active": "unique_while_active",
    "afterPolicy": "after_policy",
    "after_policy": "after_policy",
    "title": "title",
}


def create_arguments(endpoint: Endpoint, meta: dict, texts: list[str], data: list[Any]) -> dict:
    body_parts = list(texts)
    body_parts += [json.dumps(d, ensure_ascii=False, indent=2) for d in data]
    body = "\n\n".join(body_parts)
    arguments: dict[str, Any] = {"to": meta.get("to", meta.get("skill")), "body": body}
    for name, argument in _CREATE_FIELDS.items():
        if name in meta:
            arguments[argument] = meta[name]
    if "title" not in arguments:
        arguments["title"] = _title(texts, endpoint.agent_id)
    after = meta.get("after")
    if after is not None:
        if not isinstance(after, list) or len(after) > 100:
            raise A2AError(INVALID_PARAMS, "metadata.after is a list of at most 100 task ids.")
        arguments["after"] = [task_view.todo_id_of(endpoint.team_id, t) for t in after]
    return arguments


def _title(texts: list[str], sender: str) -> str:
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                line = line.strip()
                limit = bounds.TITLE_MAX_CHARS
                return line if len(line) <= limit else line[: limit - 1] + "…"
    return f"Data from {sender}"


class Rejected:
    """A task refused before anything was queued: not kept (GetTask does not find it)."""

    def __init__(self, why: str) -> None:
        self.id = f"rejected-{secrets.token_urlsafe(12)}"
        self.why = why

    def task(self) -> dict:
        said = {
            "messageId": f"{self.id}:status",
            "contextId": self.id,
            "taskId": self.id,
            "role": "ROLE_AGENT",
            "parts": [{"text": self.why}],
        }
        status = {
            "state": TASK_STATES[task_view.REJECTED],
            "message": said,
            "timestamp": _iso(datetime.now(UTC)),
        }
        return {"id": self.id, "contextId": self.id, "status": status}


def updates(v: TaskView, *, attempts: bool) -> list[dict]:
    updates = [
        {"artifactUpdate": {"taskId": v.id, "contextId": v.id, "artifact": a, "lastChunk": True}}
        for a in artifacts_of(v)
    ]
    status: dict[str, Any] = {"taskId": v.id, "contextId": v.id, "status": status_json(v)}
    if attempts:
        status["metadata"] = {ATTEMPTS_URI: v.attempts_extension()}
    updates.append({"statusUpdate": status})
    return updates
