"""A2A v1.0 (the Agent2Agent protocol), JSON-RPC binding, at ``POST /a2a``, and its public
Agent Card at ``GET /.well-known/agent-card.json``: every todo a caller may read is an A2A task,
served straight from the ledger (docs/api.md, "A2A").

- The caller is an endpoint (``Authorization: Bearer <endpoint token>``); what it sends is a
  todo it sent, as ``create_todo`` with ``to`` makes one: ``SendMessage`` names the endpoint
  by ``metadata.to`` (or ``metadata.skill``: the extended card's skills are the team's
  endpoints). ``tenant``, when given, must be the caller's team's slug.
- Each method is a verb the caller's token must have been vended (a frozen verb set holds
  here too): SendMessage ``create_todo`` (its follow-up, an answer, ``answer``), GetTask,
  ListTasks and SubscribeToTask ``get_todo``, CancelTask ``cancel``.
- A blocking send, ``SendStreamingMessage`` and ``SubscribeToTask`` follow the todo on the
  process's LISTEN connection (agents/task_watch.py), never by polling, and hold a long-poll's
  place under its caps (agents/waiting.py ``Waiters``).
- The attempts extension (``task_view.ATTEMPTS_URI``): a client that lists it in its
  ``A2A-Extensions`` header reads each task's attempts in ``metadata[ATTEMPTS_URI]``.
- Push-notification configs are not served (the card says ``pushNotifications: false``).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from switchboard.agents import task_view, verbs, waiting, wire
from switchboard.agents.auth import endpoint_for
from switchboard.agents.task_view import ATTEMPTS_URI, TaskView
from switchboard.agents.task_watch import task_watch
from switchboard.client.about import VERSION
from switchboard.queues import bounds, db, endpoints, selectors
from switchboard.queues.db.availability import breaker
from switchboard.queues.errors import (
    DATABASE_ERRORS,
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    RateLimited,
    Unauthorized,
    Unavailable,
    from_database_error,
)
from switchboard.queues.models import Endpoint
from switchboard.queues.records import UNTRUSTED_NOTICE, TodoDetail

if TYPE_CHECKING:
    from switchboard.agents.front import _Exchange

log = logging.getLogger("switchboard.agents.a2a")

PATH = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
PROTOCOL_VERSION = "1.0"

# How long a blocking SendMessage waits for its task to settle (then it answers it working),
# and how long a stream lasts (then it ends; the client subscribes again); comments keep
# proxies from closing an idle stream.
SEND_WAIT_SECONDS = bounds.WAIT_SECONDS_MAX
STREAM_SECONDS = 300.0
KEEPALIVE_SECONDS = 15.0
PAGE_DEFAULT, PAGE_MAX = 50, 100

# JSON-RPC's codes and A2A's (a2a-sdk's JSON_RPC_ERROR_CODE_MAP).
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
TASK_NOT_FOUND, TASK_NOT_CANCELABLE, PUSH_NOT_SUPPORTED = -32001, -32002, -32003
UNSUPPORTED_OPERATION, CONTENT_TYPE_NOT_SUPPORTED, VERSION_NOT_SUPPORTED = -32004, -32005, -32009
SERVER_ERROR = -32000  # unauthorized, rate limited, unavailable: the HTTP status says which

_TASK_STATES = {
    task_view.SUBMITTED: "TASK_STATE_SUBMITTED",
    task_view.WORKING: "TASK_STATE_WORKING",
    task_view.INPUT_REQUIRED: "TASK_STATE_INPUT_REQUIRED",
    task_view.COMPLETED: "TASK_STATE_COMPLETED",
    task_view.FAILED: "TASK_STATE_FAILED",
    task_view.CANCELED: "TASK_STATE_CANCELED",
    task_view.REJECTED: "TASK_STATE_REJECTED",
}
_STATES_BY_NAME = {name: state for state, name in _TASK_STATES.items()}


class A2AError(Exception):
    """A JSON-RPC error: its code, message, HTTP status, and our error code as ErrorInfo."""

    def __init__(
        self, code: int, message: str, *, reason: str = "invalid", status: int = 200, **extra
    ) -> None:
        super().__init__(message)
        self.code, self.message, self.reason, self.status = code, message, reason, status
        self.extra = extra

    def body(self, rpc_id: object) -> dict:
        info = {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason.upper(),
            "domain": "switchboard",
            "metadata": {k: str(v) for k, v in self.extra.items()},
        }
        return {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "error": {"code": self.code, "message": self.message, "data": [info]},
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


class _Part(msgspec.Struct, rename="camel"):
    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any = msgspec.UNSET
    metadata: dict | None = None
    filename: str | None = None
    media_type: str | None = None


class _Message(msgspec.Struct, rename="camel"):
    message_id: str = ""
    context_id: str = ""
    task_id: str = ""
    role: str = ""
    parts: list[_Part] = []
    metadata: dict | None = None
    extensions: list[str] = []
    reference_task_ids: list[str] = []


class _Configuration(msgspec.Struct, rename="camel"):
    accepted_output_modes: list[str] = []
    task_push_notification_config: dict | None = None
    history_length: int | None = None
    return_immediately: bool = False


class _Send(msgspec.Struct, rename="camel"):
    message: _Message
    tenant: str = ""
    configuration: _Configuration = msgspec.field(default_factory=_Configuration)
    metadata: dict | None = None


class _Get(msgspec.Struct, rename="camel"):
    id: str
    tenant: str = ""
    history_length: int | None = None


class _Cancel(msgspec.Struct, rename="camel"):
    id: str
    tenant: str = ""
    metadata: dict | None = None


class _List(msgspec.Struct, rename="camel"):
    tenant: str = ""
    context_id: str = ""
    status: str = ""
    page_size: int | None = None
    page_token: str = ""
    history_length: int | None = None
    status_timestamp_after: str | None = None
    include_artifacts: bool = False


class _Tenant(msgspec.Struct, rename="camel"):
    tenant: str = ""


class _Envelope(msgspec.Struct):
    jsonrpc: str = ""
    method: Any = None
    params: Any = msgspec.UNSET
    id: Any = None


def _params[T](kind: type[T], params: object) -> T:
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
            {"url": base + PATH, "protocolBinding": "JSONRPC", "protocolVersion": PROTOCOL_VERSION}
        ],
        "provider": {"organization": "Switchboard", "url": base + "/"},
        "version": VERSION,
        "documentationUrl": base + "/api/v1/openapi.json",
        "capabilities": {
            "streaming": True,
            "pushNotifications": False,
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
        "state": _TASK_STATES[v.state],
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


def _artifacts(v: TaskView) -> list[dict]:
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
        made = _artifacts(v)
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


# ---------------------------------------------------------------------------------------
# Serving


class _Call:
    """One JSON-RPC request: its id, the caller, what it asked for, and the exchange."""

    def __init__(self, exchange: _Exchange, rpc_id: object, endpoint: Endpoint) -> None:
        self.exchange = exchange
        self.id = rpc_id
        self.endpoint = endpoint
        asked = exchange.headers.get("a2a-extensions", "")
        self.attempts = ATTEMPTS_URI in {uri.strip() for uri in asked.split(",")}
        self.headers = [("a2a-extensions", ATTEMPTS_URI)] if self.attempts else []

    async def answer(self, result: object) -> None:
        await self.exchange.json(
            {"jsonrpc": "2.0", "id": self.id, "result": result}, headers=self.headers
        )

    async def read(self, todo_id: int) -> TaskView:
        detail = await db.arun(
            selectors.get_todo_for_endpoint_plan(
                self.endpoint,
                todo_id,
                attempts_limit=task_view.ATTEMPTS_SHOWN,
                requester_attempts=True,
            )
        )
        return task_view.view(self.endpoint.team_id, detail)

    def task(self, v: TaskView, history_length: int | None = None, **kw) -> dict:
        return task_json(v, history_length=history_length, attempts=self.attempts, **kw)


async def serve(exchange: _Exchange, base: str) -> None:
    """``POST /a2a``: one JSON-RPC request (a batch is refused), answered or streamed."""
    rpc_id: object = None
    try:
        if exchange.method != "POST":
            await exchange.error(
                Invalid("Use POST with a JSON-RPC body."), status=405, headers=[("allow", "POST")]
            )
            return
        try:
            body = await exchange.body()
        except Invalid as error:
            raise A2AError(INVALID_REQUEST, error.message, status=400) from None
        envelope = _envelope(body)
        rpc_id = envelope.id
        version = exchange.headers.get("a2a-version", "").strip()
        if version and version.split(".")[:2] != ["1", "0"]:
            raise A2AError(
                VERSION_NOT_SUPPORTED,
                f"A2A version {version[:20]!r} is not served; this server speaks 1.0.",
                reason="version",
            )
        method = _METHODS.get(envelope.method) if isinstance(envelope.method, str) else None
        if method is None:
            raise A2AError(METHOD_NOT_FOUND, "No such method.", reason="not_found")
        if not await breaker.aadmit():
            raise from_domain(Unavailable("The database is unavailable; retry shortly."))
        try:
            endpoint = await endpoint_for(exchange.headers.get("authorization", ""))
        except Unauthorized as error:
            raise A2AError(SERVER_ERROR, error.message, reason=error.code, status=401) from None
        call = _Call(exchange, rpc_id, endpoint)
        await method(call, base, envelope.params)
    except waiting.ClientGone:
        raise
    except A2AError as error:
        await _refuse(exchange, rpc_id, error)
    except DomainError as error:
        await _refuse(exchange, rpc_id, from_domain(error))
    except DATABASE_ERRORS as exc:
        await _refuse(exchange, rpc_id, from_domain(from_database_error(exc, verb="a2a")))


async def _refuse(exchange: _Exchange, rpc_id: object, error: A2AError) -> None:
    if exchange.started:  # a stream had begun: its last event says it
        await exchange.push(_event(error.body(rpc_id), name="error"))
        await exchange.end_stream()
        return
    headers = [("www-authenticate", 'Bearer realm="switchboard"')] if error.status == 401 else []
    if "retry_after" in error.extra:
        headers.append(("retry-after", str(max(1, round(float(error.extra["retry_after"]))))))
    await exchange.json(error.body(rpc_id), status=error.status, headers=headers)


def _envelope(body: bytes) -> _Envelope:
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
    return _Envelope(
        jsonrpc="2.0",
        method=data.get("method"),
        params=data.get("params", msgspec.UNSET),
        id=rpc_id,
    )


def _allowed(call: _Call, verb_name: str) -> None:
    verbs.named(verb_name).check_allowed(call.endpoint)


# -- SendMessage, SendStreamingMessage


async def _send_message(call: _Call, base: str, params: object) -> None:
    asked = _params(_Send, params)
    await _check_team(call, asked.tenant)
    v = await _sent(call, asked)
    if isinstance(v, Rejected):
        await call.answer({"task": v.task()})
        return
    if not (asked.configuration.return_immediately or v.settled):
        v = await _until_settled(call, v)
    await call.answer({"task": call.task(v, asked.configuration.history_length)})


async def _send_streaming_message(call: _Call, base: str, params: object) -> None:
    asked = _params(_Send, params)
    await _check_team(call, asked.tenant)
    v = await _sent(call, asked)
    if isinstance(v, Rejected):
        await call.exchange.open_stream(call.headers)
        await call.exchange.push(_event(call, {"task": v.task()}))
        await call.exchange.end_stream()
        return
    await _stream(call, v, asked.configuration.history_length)


async def _check_team(call: _Call, tenant: str) -> None:
    if tenant:
        slug, _ = await db.arun(selectors.team_card_plan(call.endpoint.team_id))
        if tenant != slug:
            raise A2AError(INVALID_PARAMS, "No such tenant for this token.", reason="not_found")


async def _sent(call: _Call, asked: _Send) -> TaskView | Rejected:
    """The task a message makes (a todo on the endpoint it names), or answers (a follow-up
    naming an input-required task); a rejected one when its endpoint is paused."""
    message = asked.message
    if message.role and message.role != "ROLE_USER":
        raise A2AError(INVALID_PARAMS, "A message sent to Switchboard has role ROLE_USER.")
    if message.context_id and not message.task_id:
        raise A2AError(
            INVALID_PARAMS,
            "contextId names a conversation Switchboard does not keep: send a new task"
            " without it, or follow up a task by its taskId.",
        )
    texts, data = _contents(message.parts)
    if message.task_id:
        return await _answered(call, message, texts, data)
    _allowed(call, "create_todo")
    meta = {**(message.metadata or {}), **(asked.metadata or {})}
    to = meta.get("to", meta.get("skill"))
    if not isinstance(to, str) or not to:
        raise A2AError(
            INVALID_PARAMS,
            "Say which endpoint the task is for: metadata.to = an agent id of your team"
            " (the extended Agent Card lists them as skills).",
        )
    target = call.endpoint
    if to != call.endpoint.agent_id:
        found = await db.arun(endpoints.live_in_team_plan(call.endpoint.team_id, to))
        if found is None:
            raise A2AError(INVALID_PARAMS, "No such endpoint in this team.", reason="not_found")
        target = found
    if target.paused:
        return Rejected(f"The endpoint {to!r} is paused; nothing was queued.")
    arguments = _create_arguments(call, meta, texts, data)
    verb = verbs.named("create_todo")
    created = await waiting.call(call.endpoint, verb, wire.convert(verb, arguments))
    return await call.read(created["todo"]["id"])


def _contents(parts: list[_Part]) -> tuple[list[str], list[Any]]:
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


def _create_arguments(call: _Call, meta: dict, texts: list[str], data: list[Any]) -> dict:
    body_parts = list(texts)
    body_parts += [json.dumps(d, ensure_ascii=False, indent=2) for d in data]
    body = "\n\n".join(body_parts)
    arguments: dict[str, Any] = {"to": meta.get("to", meta.get("skill")), "body": body}
    for name, argument in _CREATE_FIELDS.items():
        if name in meta:
            arguments[argument] = meta[name]
    if "title" not in arguments:
        arguments["title"] = _title(texts, call.endpoint.agent_id)
    after = meta.get("after")
    if after is not None:
        if not isinstance(after, list) or len(after) > 100:
            raise A2AError(INVALID_PARAMS, "metadata.after is a list of at most 100 task ids.")
        arguments["after"] = [task_view.todo_id_of(call.endpoint.team_id, t) for t in after]
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
            "state": _TASK_STATES[task_view.REJECTED],
            "message": said,
            "timestamp": _iso(datetime.now(UTC)),
        }
        return {"id": self.id, "contextId": self.id, "status": status}


async def _answered(call: _Call, message: _Message, texts: list[str], data: list[Any]) -> TaskView:
    """A follow-up message: the answer to the task's question (the ``answer`` verb)."""
    _allowed(call, "answer")
    todo_id = task_view.todo_id_of(call.endpoint.team_id, message.task_id)
    if len(data) == 1 and not texts:
        value: Any = data[0]
    elif not data:
        value = "\n\n".join(texts)
    else:
        raise A2AError(INVALID_PARAMS, "An answer is one data part, or text.")
    verb = verbs.named("answer")
    try:
        await waiting.call(
            call.endpoint, verb, wire.convert(verb, {"todo_id": todo_id, "value": value})
        )
    except NotFound as error:
        raise from_domain(error) from None
    except Conflict as error:
        raise A2AError(
            INVALID_PARAMS,
            f"The task is not waiting for an answer: {error.message}",
            reason=error.code,
        ) from None
    return await call.read(todo_id)


# -- following a task


async def _until_settled(call: _Call, v: TaskView) -> TaskView:
    """The task once it ends or needs input, or as it is after SEND_WAIT_SECONDS; the client
    leaving ends the wait (ClientGone)."""
    crowd = waiting.waiters()
    crowd.enter(call.endpoint.pk)
    gone = call.exchange.watch_disconnect()
    try:
        async with task_watch().follow(call.endpoint.team_id, v.todo.id) as follower:
            gone.add_done_callback(lambda _: follower.changed.set())
            deadline = time.monotonic() + SEND_WAIT_SECONDS
            v = await call.read(v.todo.id)
            while not v.settled:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or waiting.drain.started:
                    break
                await follower.wait(remaining)
                if gone.done():
                    raise waiting.ClientGone
                v = await call.read(v.todo.id)
            return v
    finally:
        crowd.leave(call.endpoint.pk)


async def _stream(call: _Call, v: TaskView, history_length: int | None) -> None:
    """Server-Sent Events: the task, then a status update at each change (and the result's
    artifact before a completion's), until it ends or needs input, the client leaves, or
    STREAM_SECONDS pass."""
    crowd = waiting.waiters()
    crowd.enter(call.endpoint.pk)
    gone = call.exchange.watch_disconnect()
    try:
        async with task_watch().follow(call.endpoint.team_id, v.todo.id) as follower:
            gone.add_done_callback(lambda _: follower.changed.set())
            v = await call.read(v.todo.id)
            await call.exchange.open_stream(call.headers)
            await call.exchange.push(_event(call, {"task": call.task(v, history_length)}))
            said = (v.state, v.message, v.todo.updated_at)
            deadline = time.monotonic() + STREAM_SECONDS
            while not v.settled:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or waiting.drain.started:
                    break
                woken = await follower.wait(min(KEEPALIVE_SECONDS, remaining))
                if gone.done():
                    return
                if not woken:
                    await call.exchange.push(b": keepalive\n\n")
                    continue
                v = await call.read(v.todo.id)
                now = (v.state, v.message, v.todo.updated_at)
                if now == said:
                    continue
                said = now
                for update in _updates(call, v):
                    await call.exchange.push(_event(call, update))
            await call.exchange.end_stream()
    finally:
        crowd.leave(call.endpoint.pk)


def _updates(call: _Call, v: TaskView) -> list[dict]:
    updates = [
        {"artifactUpdate": {"taskId": v.id, "contextId": v.id, "artifact": a, "lastChunk": True}}
        for a in _artifacts(v)
    ]
    status: dict[str, Any] = {"taskId": v.id, "contextId": v.id, "status": status_json(v)}
    if call.attempts:
        status["metadata"] = {ATTEMPTS_URI: v.attempts_extension()}
    updates.append({"statusUpdate": status})
    return updates


def _event(call_or_body: _Call | dict, result: dict | None = None, *, name: str = "") -> bytes:
    if isinstance(call_or_body, _Call):
        body = {"jsonrpc": "2.0", "id": call_or_body.id, "result": result}
    else:
        body = call_or_body
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + wire.encode(body) + b"\n\n"


# -- GetTask, ListTasks, CancelTask, SubscribeToTask


async def _get_task(call: _Call, base: str, params: object) -> None:
    asked = _params(_Get, params)
    await _check_team(call, asked.tenant)
    _allowed(call, "get_todo")
    _history_length(asked.history_length)
    todo_id = task_view.todo_id_of(call.endpoint.team_id, asked.id)
    await call.answer(call.task(await call.read(todo_id), asked.history_length))


async def _list_tasks(call: _Call, base: str, params: object) -> None:
    asked = _params(_List, params)
    await _check_team(call, asked.tenant)
    _allowed(call, "get_todo")
    _history_length(asked.history_length)
    size = PAGE_DEFAULT if asked.page_size is None else asked.page_size
    if not 1 <= size <= PAGE_MAX:
        raise A2AError(INVALID_PARAMS, f"pageSize is 1 to {PAGE_MAX}.")
    state = None
    if asked.status and asked.status != "TASK_STATE_UNSPECIFIED":
        state = _STATES_BY_NAME.get(asked.status)
        if state is None:
            raise A2AError(
                INVALID_PARAMS, f"status must be one of {', '.join(_TASK_STATES.values())}."
            )
    before = selectors.decode_cursor(asked.page_token) if asked.page_token else None
    after = None
    if asked.status_timestamp_after:
        try:
            after = datetime.fromisoformat(asked.status_timestamp_after.replace("Z", "+00:00"))
        except ValueError:
            raise A2AError(INVALID_PARAMS, "statusTimestampAfter is an RFC 3339 time.") from None
        if after.tzinfo is None:
            raise A2AError(INVALID_PARAMS, "statusTimestampAfter needs a time zone.")
    if asked.context_id:  # a context is one task here
        todo_id = task_view.todo_id_of(call.endpoint.team_id, asked.context_id)
        before = todo_id + 1
    todos, more = await db.arun(
        selectors.list_tasks_plan(
            call.endpoint, task_state=state, limit=size, before_id=before, updated_after=after
        )
    )
    if asked.context_id:
        todos, more = [t for t in todos if t.id == before - 1], False
    history = 0 if asked.history_length is None else asked.history_length
    tasks = []
    for todo in todos:  # a list carries no attempts: GetTask reads them
        v = task_view.view(call.endpoint.team_id, TodoDetail(todo=todo, attempts=[]))
        tasks.append(
            task_json(v, history_length=history, attempts=False, artifacts=asked.include_artifacts)
        )
    await call.answer(
        {
            "tasks": tasks,
            "nextPageToken": selectors.encode_cursor(todos[-1].id) if more else "",
            "pageSize": size,
            "totalSize": len(tasks),
        }
    )


def _history_length(value: int | None) -> None:
    if value is not None and not 0 <= value <= 1000:
        raise A2AError(INVALID_PARAMS, "historyLength is 0 to 1000.")


async def _cancel_task(call: _Call, base: str, params: object) -> None:
    asked = _params(_Cancel, params)
    await _check_team(call, asked.tenant)
    _allowed(call, "cancel")
    todo_id = task_view.todo_id_of(call.endpoint.team_id, asked.id)
    v = await call.read(todo_id)
    if v.terminal:
        raise A2AError(TASK_NOT_CANCELABLE, f"The task has ended ({v.state}).", reason="conflict")
    verb = verbs.named("cancel")
    try:
        await waiting.call(call.endpoint, verb, wire.convert(verb, {"todo_id": todo_id}))
    except Conflict as error:
        raise A2AError(TASK_NOT_CANCELABLE, error.message, reason=error.code) from None
    await call.answer(call.task(await call.read(todo_id)))


async def _subscribe_to_task(call: _Call, base: str, params: object) -> None:
    asked = _params(_Get, params)
    await _check_team(call, asked.tenant)
    _allowed(call, "get_todo")
    todo_id = task_view.todo_id_of(call.endpoint.team_id, asked.id)
    v = await call.read(todo_id)
    if v.terminal:
        raise A2AError(
            UNSUPPORTED_OPERATION, f"The task has ended ({v.state}); read it with GetTask."
        )
    await _stream(call, v, None)


async def _extended_card(call: _Call, base: str, params: object) -> None:
    asked = _params(_Tenant, params)
    slug, live = await db.arun(selectors.team_card_plan(call.endpoint.team_id))
    if asked.tenant and asked.tenant != slug:
        raise A2AError(INVALID_PARAMS, "No such tenant for this token.", reason="not_found")
    await call.answer(extended_card(base, slug, live))


async def _no_push(call: _Call, base: str, params: object) -> None:
    raise A2AError(
        PUSH_NOT_SUPPORTED,
        "Push-notification configs are not served: follow a task with SubscribeToTask, or"
        " set the endpoint's webhook on the Board.",
        reason="unsupported",
    )


_METHODS = {
    "SendMessage": _send_message,
    "SendStreamingMessage": _send_streaming_message,
    "GetTask": _get_task,
    "ListTasks": _list_tasks,
    "CancelTask": _cancel_task,
    "SubscribeToTask": _subscribe_to_task,
    "GetExtendedAgentCard": _extended_card,
    "CreateTaskPushNotificationConfig": _no_push,
    "GetTaskPushNotificationConfig": _no_push,
    "ListTaskPushNotificationConfigs": _no_push,
    "DeleteTaskPushNotificationConfig": _no_push,
}
