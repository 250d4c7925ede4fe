"""MCP's tasks extension, ``io.modelcontextprotocol/tasks`` (SEP-2663, protocol 2026-07-28),
on ``/mcp``: a ``create_todo`` call from a client that declared the extension is answered with
a ``CreateTaskResult`` (the todo is the task), and ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` read, answer and cancel it, straight from the ledger (docs/api.md, "MCP tasks").

The rules kept (the specification's words, quoted in tests/agents/test_mcp_tasks.py):
- a client declares the extension per request, in ``_meta``'s client capabilities; a task
  is never answered to a request that did not (the call's plain result instead), and
  ``tasks/*`` from one is ``-32021`` (HTTP 400) naming the capability;
- ``Mcp-Name`` must carry ``params.taskId`` on ``tasks/*`` (else ``-32020``, HTTP 400);
- an unknown, malformed or another team's task id is ``-32602`` alike (task ids are
  unguessable and bound to the caller's team: agents/task_view.py);
- ``ttlMs`` is how long the ledger keeps an ended todo (SWITCHBOARD_RETENTION_DAYS), from its
  creation once it has ended, null before; ``pollIntervalMs`` POLL_MS;
- a dead letter is a tool failure: ``completed`` with ``isError`` (``failed`` is only for a
  JSON-RPC error, which a todo never ends with); canceled is ``cancelled``;
- a question is ``input_required`` with one ``elicitation/create`` form per asking attempt
  (its key ``q<attempt>``: never reused), answered by ``tasks/update`` (``accept`` with the
  form's content; ``decline`` and ``cancel`` leave it waiting, as an unknown key is ignored).

Attempts beside each task: a client that also declares ``io.switchboard/attempts`` reads
them in the task's ``_meta`` under that key (agents/task_view.py ``attempts_extension``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from http import HTTPStatus
from typing import Any

import msgspec
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django_mcpz.headers import decode_header_value
from django_mcpz.server import META_CLIENT_CAPABILITIES, META_SERVER_INFO, MCPServer

from switchboard.agents import task_view, verbs, waiting, wire
from switchboard.agents.auth import endpoint_for
from switchboard.agents.task_view import ATTEMPTS_META, TaskView
from switchboard.agents.task_watch import task_watch
from switchboard.queues.errors import DATABASE_ERRORS, Conflict, DomainError, from_database_error
from switchboard.queues.models import Endpoint

EXTENSION = "io.modelcontextprotocol/tasks"
METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
MISSING_CAPABILITY = -32021
HEADER_MISMATCH = -32020
INVALID_PARAMS = -32602
POLL_MS = 1000

_STATUS = {
    task_view.SUBMITTED: "working",
    task_view.WORKING: "working",
    task_view.INPUT_REQUIRED: "input_required",
    task_view.COMPLETED: "completed",
    task_view.FAILED: "completed",  # a tool failure: isError
    task_view.CANCELED: "cancelled",
}


class _Message(msgspec.Struct):
    jsonrpc: Any = None
    id: Any = None
    method: Any = None
    params: Any = None


def declared(params: object, extension: str = EXTENSION) -> bool:
    """Did this request's ``_meta`` declare ``extension`` in its client capabilities?"""
    if not isinstance(params, dict):
        return False
    meta = params.get("_meta")
    capabilities = meta.get(META_CLIENT_CAPABILITIES) if isinstance(meta, dict) else None
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    return isinstance(extensions, dict) and extension in extensions


def peek(body: bytes) -> _Message | None:
    """The request's envelope, if it reads as a JSON-RPC object (else the view says why)."""
    try:
        message = msgspec.json.decode(body, type=_Message)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return message if isinstance(message.method, str) else None


_DECLARED = EXTENSION.encode()


def route(scope: dict, body: bytes) -> tuple[_Message | None, bool]:
    """Is this POST the extension's? A ``tasks/*`` request (its message, to ``answer``), or a
    create_todo call that declared the extension (True: its answer is made a task by
    ``as_task``); else (None, False), and nothing was decoded for a body that cannot be."""
    if scope["method"] != "POST" or (b'"tasks/' not in body and _DECLARED not in body):
        return None, False
    message = peek(body)
    if message is None:
        return None, False
    if message.method in METHODS:
        return message, False
    params = message.params
    return None, (
        message.method == "tools/call"
        and isinstance(params, dict)
        and params.get("name") == "create_todo"
        and declared(params)
    )


# ---------------------------------------------------------------------------------------
# A task in the extension's words


def task_json(v: TaskView, *, attempts: bool) -> dict[str, Any]:
    todo = v.todo
    task: dict[str, Any] = {
        "taskId": v.id,
        "status": _STATUS[v.state],
        "createdAt": _iso(todo.created_at),
        "lastUpdatedAt": _iso(todo.updated_at),
        "ttlMs": _ttl_ms(v),
        "pollIntervalMs": POLL_MS,
    }
    if v.message:
        task["statusMessage"] = v.message
    if v.state == task_view.INPUT_REQUIRED and v.question is not None:
        task["inputRequests"] = {_key(v.question): _elicitation(v.question)}
    elif v.state in (task_view.COMPLETED, task_view.FAILED):
        task["result"] = _tool_result(v)
    if attempts:
        task["_meta"] = {ATTEMPTS_META: v.attempts_extension()}
    return task


def _iso(moment) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _ttl_ms(v: TaskView) -> int | None:
    days = settings.SWITCHBOARD_RETENTION_DAYS
    if not days or v.todo.ended_at is None:
        return None  # kept while it runs, and for good when retention is off
    kept_until = v.todo.ended_at + timedelta(days=days)
    return max(0, int((kept_until - v.todo.created_at).total_seconds() * 1000))


def _key(question: dict) -> str:
    return f"q{question.get('attempt_seq')}"


def _elicitation(question: dict) -> dict[str, Any]:
    """The question as an ``elicitation/create`` form: its schema, one pick of its choices, or
    one line of text (the answer is then ``content.answer``)."""
    if question.get("answer_schema"):
        schema = question["answer_schema"]
    elif question.get("choices"):
        schema = {
            "type": "object",
            "properties": {"answer": {"type": "string", "enum": question["choices"]}},
            "required": ["answer"],
        }
    else:
        schema = {
            "type": "object",
            "properties": {"answer": {"type": "string"}},
            "required": ["answer"],
        }
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": question.get("text") or "",
            "requestedSchema": schema,
        },
    }


def _tool_result(v: TaskView) -> dict[str, Any]:
    """The CallToolResult the task ends with, as create_todo's own (its output schema): the
    todo as its sender reads it (``created``: the call made it, or found it by its idempotency
    key), with the last attempt's summary as text; for a dead letter, ``isError`` with the
    reason as text and no structured content (as every tool error here)."""
    if v.state == task_view.FAILED:
        text = v.message or "It ended as a dead letter."
        return {
            "resultType": "complete",
            "content": [{"type": "text", "text": text}],
            "isError": True,
        }
    said = {"todo": verbs.shown_to_sender(v.todo), "created": True}
    content = [{"type": "text", "text": wire.encode(said).decode()}]
    if v.summary:
        content.append({"type": "text", "text": f"Summary: {v.summary}"})
    return {
        "resultType": "complete",
        "content": content,
        "structuredContent": said,
        "isError": False,
    }


# ---------------------------------------------------------------------------------------
# Serving


def _response(body: dict, status: int = HTTPStatus.OK) -> HttpResponse:
    response = HttpResponse(msgspec.json.encode(body), status=status)
    response["Content-Type"] = "application/json"
    response["Cache-Control"] = "no-store"
    return response


def _error(
    rpc_id: object, code: int, message: str, status: int = HTTPStatus.OK, **data
) -> HttpResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if data:
        error["data"] = data
    return _response({"jsonrpc": "2.0", "id": rpc_id, "error": error}, status)


def _result(rpc_id: object, result: dict, server_info: dict) -> HttpResponse:
    body = {"resultType": "complete", **result}
    meta = dict(body.get("_meta") or {})
    meta[META_SERVER_INFO] = server_info
    body["_meta"] = meta
    return _response({"jsonrpc": "2.0", "id": rpc_id, "result": body})


async def answer(
    scope: dict,
    body: bytes,
    message: _Message,
    *,
    server: MCPServer,
    authenticate: Callable[[HttpRequest], Awaitable[HttpResponse | None]],
) -> HttpResponse:
    """A ``tasks/*`` request (the caller checked the method): checked as django-mcpz checks
    every request of the current revision (``server``'s metadata rules), its token by
    ``authenticate`` (agents/mcp.py: a refusal, or None with ``request.endpoint`` set)."""
    request = ASGIRequest(scope, io.BytesIO(body))
    admitted = await _admitted(request, message, server, authenticate)
    if isinstance(admitted, HttpResponse):
        return admitted
    rpc_id, params = admitted
    task = params.get("taskId")
    if not isinstance(task, str):
        return _error(rpc_id, INVALID_PARAMS, "params.taskId must be a string.")
    try:
        named = decode_header_value(request.headers.get("Mcp-Name", ""))
    except ValueError:
        named = None
    if named != task:
        return _error(
            rpc_id,
            HEADER_MISMATCH,
            "Header mismatch: the Mcp-Name header must carry params.taskId.",
            HTTPStatus.BAD_REQUEST,
        )
    endpoint: Endpoint = request.endpoint  # type: ignore[attr-defined]
    attempts = declared(params, ATTEMPTS_META)
    server_info = server.server_info_for(request)
    try:
        todo_id = task_view.todo_id_of(endpoint.team_id, task)
        if message.method == "tasks/get":
            verbs.named("get_todo").check_allowed(endpoint)
            v = await read(endpoint, todo_id)
            return _result(rpc_id, task_json(v, attempts=attempts), server_info)
        if message.method == "tasks/update":
            await _update(endpoint, todo_id, params.get("inputResponses"))
        else:
            await _cancel(endpoint, todo_id)
        return _result(rpc_id, {}, server_info)
    except DomainError as error:
        return _refused(rpc_id, error)
    except DATABASE_ERRORS as exc:
        return _refused(rpc_id, from_database_error(exc, verb=message.method))


async def _admitted(
    request: HttpRequest,
    message: _Message,
    server: MCPServer,
    authenticate: Callable[[HttpRequest], Awaitable[HttpResponse | None]],
) -> tuple[str | int, dict] | HttpResponse:
    """The request's id and params once it is a request of the current revision (``server``'s
    metadata rules), its token good (``authenticate``: ``request.endpoint`` then set) and the
    extension declared (else -32021); or the refusal."""
    rpc_id = message.id
    if rpc_id is None or isinstance(rpc_id, bool) or not isinstance(rpc_id, str | int):
        return _error(None, -32600, f"A {message.method} request needs an id.", 400)
    params = message.params if message.params is not None else {}
    if not isinstance(params, dict):
        return _error(rpc_id, INVALID_PARAMS, "params must be an object.", 400)
    refused = server._validate_metadata(request, rpc_id, message.method, params)
    if refused is None:
        refused = await authenticate(request)
    if refused is not None:
        return refused
    if not declared(params):
        return _error(
            rpc_id,
            MISSING_CAPABILITY,
            "Missing required client capability",
            HTTPStatus.BAD_REQUEST,
            requiredCapabilities={"extensions": {EXTENSION: {}}},
        )
    return rpc_id, params


def _refused(rpc_id: object, error: DomainError) -> HttpResponse:
    """NotFound is "Failed to retrieve task: Task not found" (the specification's words);
    every other refusal its HTTP API error body as data, at its status when it is the
    server's (unavailable, rate limited)."""
    if error.code == "not_found":
        return _error(rpc_id, INVALID_PARAMS, "Failed to retrieve task: Task not found")
    status = error.status if error.status in (429, 503) else HTTPStatus.OK
    code = -32000 if status != HTTPStatus.OK else INVALID_PARAMS
    response = _error(rpc_id, code, error.message, status, **error.as_dict())
    if "retry_after" in error.extra:
        response["Retry-After"] = str(max(1, round(error.extra["retry_after"])))
    return response


read = task_view.read


async def _update(endpoint: Endpoint, todo_id: int, responses: object) -> None:
    """Answer the task's open question from the response under its key; any other key, and a
    declined or canceled form, is ignored (the task stays ``input_required``)."""
    if not isinstance(responses, dict):
        raise _Invalid("params.inputResponses must be an object.")
    verbs.named("answer").check_allowed(endpoint)
    v = await read(endpoint, todo_id)
    question = v.question
    if question is None:
        return  # nothing outstanding: every key is ignored
    said = responses.get(_key(question))
    if not isinstance(said, dict) or said.get("action") != "accept":
        return
    content = said.get("content")
    if not isinstance(content, dict):
        raise _Invalid("An accepted elicitation has its content, an object.")
    value = content if question.get("answer_schema") else content.get("answer")
    verb = verbs.named("answer")
    try:
        await waiting.call(endpoint, verb, wire.convert(verb, {"todo_id": todo_id, "value": value}))
    except Conflict:
        return  # answered meanwhile (by a person, say): nothing outstanding any more


async def _cancel(endpoint: Endpoint, todo_id: int) -> None:
    """Cancel the todo; an ended one is acknowledged as it is (cancellation is cooperative)."""
    verbs.named("cancel").check_allowed(endpoint)
    v = await read(endpoint, todo_id)  # not found first, whatever the state
    if v.terminal:
        return
    verb = verbs.named("cancel")
    try:
        await waiting.call(endpoint, verb, wire.convert(verb, {"todo_id": todo_id}))
    except Conflict:
        return


class _Invalid(DomainError):
    code, status = "invalid", 400


async def as_task(scope: dict, response: HttpResponse) -> HttpResponse:
    """A create_todo call's answer made a ``CreateTaskResult`` (the call declared the
    extension): the todo it made, or found by its idempotency key, is the task. A refusal
    (``isError``) or a JSON-RPC error stays as it is."""
    if response.status_code != HTTPStatus.OK or not response.get("Content-Type", "").startswith(
        "application/json"
    ):
        return response
    reply = msgspec.json.decode(response.content)
    result = reply.get("result") if isinstance(reply, dict) else None
    if not isinstance(result, dict) or result.get("isError"):
        return response
    made = result.get("structuredContent") or {}
    todo = made.get("todo") if isinstance(made, dict) else None
    if not isinstance(todo, dict) or not isinstance(todo.get("id"), int):
        return response
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    endpoint = await endpoint_for(headers.get("authorization", ""))
    v = await read(endpoint, todo["id"])
    task = task_json(v, attempts=False)
    task["_meta"] = {**result.get("_meta", {}), "io.switchboard/created": made.get("created")}
    reply["result"] = {"resultType": "task", **task}
    response.content = msgspec.json.encode(reply)
    return response


# ---------------------------------------------------------------------------------------
# subscriptions/listen: notifications/tasks, pushed from the LISTEN connection

LISTEN_TASKS_MAX = 100
LISTEN_SECONDS = 300.0  # then the subscription ends (its result is sent); listen again
KEEPALIVE_SECONDS = 15.0
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def listens_for_tasks(message: _Message | None) -> bool:
    """A ``subscriptions/listen`` asking for task notifications (``notifications.taskIds``)?"""
    if message is None or message.method != "subscriptions/listen":
        return False
    params = message.params
    wanted = params.get("notifications") if isinstance(params, dict) else None
    return isinstance(wanted, dict) and "taskIds" in wanted


async def listen(
    exchange: Any,
    scope: dict,
    body: bytes,
    message: _Message,
    *,
    server: MCPServer,
    authenticate: Callable[[HttpRequest], Awaitable[HttpResponse | None]],
) -> HttpResponse | None:
    """Answer a ``subscriptions/listen`` for tasks as an event stream on ``exchange`` (the
    front's): the acknowledgement naming the task ids agreed to (those the caller may read),
    each agreed task's state now and at each change as ``notifications/tasks`` (a complete task,
    as tasks/get answers it), until every agreed task has ended, the client leaves or
    LISTEN_SECONDS pass; then the listen request's own result. A refusal is returned (the
    caller sends it) before anything is streamed."""
    request = ASGIRequest(scope, io.BytesIO(body))
    admitted = await _admitted(request, message, server, authenticate)
    if isinstance(admitted, HttpResponse):
        return admitted
    rpc_id, params = admitted
    asked = params["notifications"]["taskIds"]
    if (
        not isinstance(asked, list)
        or len(asked) > LISTEN_TASKS_MAX
        or not all(isinstance(t, str) for t in asked)
    ):
        return _error(
            rpc_id, INVALID_PARAMS, f"taskIds is a list of at most {LISTEN_TASKS_MAX} task ids."
        )
    endpoint: Endpoint = request.endpoint  # type: ignore[attr-defined]
    attempts = declared(params, ATTEMPTS_META)
    try:
        verbs.named("get_todo").check_allowed(endpoint)
        crowd = waiting.waiters()
        crowd.enter(endpoint.pk)
    except DomainError as error:
        return _refused(rpc_id, error)
    try:
        await _listen(exchange, endpoint, rpc_id, asked, attempts, task_watch())
    finally:
        crowd.leave(endpoint.pk)
    return None


async def _listen(exchange, endpoint, rpc_id, asked, attempts, watch) -> None:
    todo_ids: dict[int, str] = {}
    for task in asked:
        with contextlib.suppress(DomainError):
            todo_ids[task_view.todo_id_of(endpoint.team_id, task)] = task
    meta = {SUBSCRIPTION_ID: rpc_id}
    changed = asyncio.Event()
    gone = exchange.watch_disconnect()
    gone.add_done_callback(lambda _: changed.set())
    async with contextlib.AsyncExitStack() as stack:
        followers = [
            await stack.enter_async_context(watch.follow(endpoint.team_id, todo_id, changed))
            for todo_id in todo_ids
        ]
        views: dict[int, TaskView] = {}
        for follower in followers:  # read after the watch: nothing committed since is missed
            try:
                views[follower.todo_id] = await read(endpoint, follower.todo_id)
            except DomainError:
                continue  # not the caller's to read: not agreed to
        agreed = [f for f in followers if f.todo_id in views]
        await exchange.open_stream([])
        ack = {
            "notifications": {"taskIds": [views[f.todo_id].id for f in agreed]},
            "_meta": meta,
        }
        await exchange.push(
            _sse({"method": "notifications/subscriptions/acknowledged", "params": ack})
        )
        for follower in agreed:
            await exchange.push(_notification(views[follower.todo_id], attempts, meta))
        deadline = time.monotonic() + LISTEN_SECONDS
        while any(not views[f.todo_id].terminal for f in agreed):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or waiting.drain.started or gone.done():
                break
            woken = await agreed[0].wait(min(KEEPALIVE_SECONDS, remaining)) if agreed else False
            if gone.done():
                return
            if not woken:
                await exchange.push(b": keepalive\n\n")
                continue
            for follower in agreed:
                if not follower.dirty:
                    continue
                follower.dirty = False
                before = views[follower.todo_id]
                now = await read(endpoint, follower.todo_id)
                views[follower.todo_id] = now
                if (now.state, now.message, now.todo.updated_at) != (
                    before.state,
                    before.message,
                    before.todo.updated_at,
                ):
                    await exchange.push(_notification(now, attempts, meta))
        await exchange.push(
            _sse({"id": rpc_id, "result": {"resultType": "complete", "_meta": meta}})
        )
        await exchange.end_stream()


def _notification(v: TaskView, attempts: bool, meta: dict) -> bytes:
    params = task_json(v, attempts=attempts)
    params["_meta"] = {**params.get("_meta", {}), **meta}
    return _sse({"method": "notifications/tasks", "params": params})


def _sse(message: dict) -> bytes:
    return b"event: message\ndata: " + msgspec.json.encode({"jsonrpc": "2.0", **message}) + b"\n\n"
