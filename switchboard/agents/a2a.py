"""A2A v1.0 (the Agent2Agent protocol), JSON-RPC binding, at ``POST /a2a``, and its public
Agent Card at ``GET /.well-known/agent-card.json``: every todo a caller may read is an A2A task,
served straight from the ledger (docs/api.md, "A2A").

- The caller is an endpoint (``Authorization: Bearer <endpoint token>``); what it sends is a
  todo it sent, as ``create_todo`` with ``to`` makes one: ``SendMessage`` names the endpoint
  by ``metadata.to`` (or ``metadata.skill``: the extended card's skills are the team's
  endpoints). ``tenant``, when given, must be the caller's team's slug.
- Each method is a verb the caller's token must have been vended (a frozen verb set holds
  here too): SendMessage ``create_todo`` (its follow-up, an answer, ``answer``), GetTask,
  ListTasks, SubscribeToTask and the push-config methods ``get_todo``, CancelTask ``cancel``.
- A blocking send, ``SendStreamingMessage`` and ``SubscribeToTask`` follow the todo on the
  process's LISTEN connection (agents/task_watch.py), never by polling, and hold a long-poll's
  place under its caps (agents/waiting.py ``Waiters``).
- The attempts extension (``task_view.ATTEMPTS_URI``): a client that lists it in its
  ``A2A-Extensions`` header reads each task's attempts in ``metadata[ATTEMPTS_URI]``.
- Push-notification configs (agents/a2a_push.py): each the setter's own, sent through the signed
  webhook outbox at each state change of the task.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any, Protocol

from switchboard.agents import a2a_push, a2a_words, task_view, verbs, waiting, wire
from switchboard.agents.a2a_words import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_ERROR,
    STATES_BY_NAME,
    TASK_NOT_CANCELABLE,
    TASK_STATES,
    UNSUPPORTED_OPERATION,
    VERSION_NOT_SUPPORTED,
    A2AError,
    CancelParams,
    GetParams,
    ListParams,
    MessageIn,
    Rejected,
    Send,
    TenantParams,
    contents,
    create_arguments,
    envelope,
    extended_card,
    from_domain,
    params_of,
    task_json,
    updates,
)
from switchboard.agents.auth import endpoint_for
from switchboard.agents.task_view import ATTEMPTS_URI, TaskView
from switchboard.agents.task_watch import task_watch
from switchboard.queues import bounds, db, endpoints, selectors
from switchboard.queues.db.availability import breaker
from switchboard.queues.errors import (
    DATABASE_ERRORS,
    Conflict,
    DomainError,
    Invalid,
    NotFound,
    Unauthorized,
    Unavailable,
    from_database_error,
)
from switchboard.queues.models import Endpoint
from switchboard.queues.records import TodoDetail


class Exchange(Protocol):
    """What serving needs of the front's exchange (agents/front.py ``Exchange``)."""

    method: str
    headers: dict[str, str]
    started: bool
    scope: dict

    async def body(self) -> bytes: ...
    async def json(self, data: object, status: int = 200, headers: Any = ()) -> None: ...
    async def error(
        self, error: DomainError, *, status: int | None = None, headers: Any = ()
    ) -> None: ...
    async def open_stream(self, headers: list[tuple[str, str]]) -> None: ...
    async def push(self, chunk: bytes) -> None: ...
    async def end_stream(self) -> None: ...
    def watch_disconnect(self, *, peek: bool = False) -> Any: ...


log = logging.getLogger("switchboard.agents.a2a")

PATH = a2a_words.PATH
CARD_PATH = "/.well-known/agent-card.json"

# How long a blocking SendMessage waits for its task to settle (then it answers it working),
# and how long a stream lasts (then it ends; the client subscribes again); comments keep
# proxies from closing an idle stream.
SEND_WAIT_SECONDS = bounds.WAIT_SECONDS_MAX
STREAM_SECONDS = 300.0
KEEPALIVE_SECONDS = 15.0
PAGE_DEFAULT, PAGE_MAX = 50, 100

# ---------------------------------------------------------------------------------------
# Serving


class _Call:
    """One JSON-RPC request: its id, the caller, what it asked for, and the exchange."""

    def __init__(
        self, exchange: Exchange, rpc_id: object, endpoint: Endpoint, *, rest: bool = False
    ) -> None:
        self.exchange = exchange
        self.id = rpc_id
        self.endpoint = endpoint
        self.rest = rest  # HTTP+JSON: results bare, not in a JSON-RPC response
        asked = exchange.headers.get("a2a-extensions", "")
        self.attempts = ATTEMPTS_URI in {uri.strip() for uri in asked.split(",")}
        self.headers = [("a2a-extensions", ATTEMPTS_URI)] if self.attempts else []

    async def answer(self, result: object) -> None:
        said = result if self.rest else {"jsonrpc": "2.0", "id": self.id, "result": result}
        await self.exchange.json(said, headers=self.headers)

    async def check_team(self, tenant: str) -> None:
        await _check_team(self, tenant)

    async def read(self, todo_id: int) -> TaskView:
        return await task_view.read(self.endpoint, todo_id)

    def task(self, v: TaskView, history_length: int | None = None, **kw) -> dict:
        return task_json(v, history_length=history_length, attempts=self.attempts, **kw)


async def serve(exchange: Exchange, base: str) -> None:
    """``POST /a2a``: one JSON-RPC request (a batch is refused), answered or streamed."""
    if exchange.method != "POST":
        await exchange.error(
            Invalid("Use POST with a JSON-RPC body."), status=405, headers=[("allow", "POST")]
        )
        return
    rpc_id: object = None
    try:
        try:
            body = await exchange.body()
        except Invalid as error:
            raise A2AError(INVALID_REQUEST, error.message, status=400) from None
        asked = envelope(body)
        rpc_id = asked.id
    except A2AError as error:
        await refuse(exchange, rpc_id, error, rest=False)
        return
    await run(exchange, base, asked.method, asked.params, rpc_id=rpc_id, rest=False)


async def run(
    exchange: Exchange, base: str, name: object, params: object, *, rpc_id: object, rest: bool
) -> None:
    """One A2A method, for either binding (JSON-RPC here, HTTP+JSON in agents/a2a_rest.py):
    the version, the database, the token, then the method; every refusal in the binding's
    words."""
    try:
        version = exchange.headers.get("a2a-version", "").strip()
        if version and version.split(".")[:2] != ["1", "0"]:
            raise A2AError(
                VERSION_NOT_SUPPORTED,
                f"A2A version {version[:20]!r} is not served; this server speaks 1.0.",
                reason="version",
            )
        method = _METHODS.get(name) if isinstance(name, str) else None
        if method is None:
            raise A2AError(METHOD_NOT_FOUND, "No such method.", reason="not_found")
        if not await breaker.aadmit():
            raise from_domain(Unavailable("The database is unavailable; retry shortly."))
        try:
            endpoint = await endpoint_for(exchange.headers.get("authorization", ""))
        except Unauthorized as error:
            raise A2AError(SERVER_ERROR, error.message, reason=error.code, status=401) from None
        call = _Call(exchange, rpc_id, endpoint, rest=rest)
        await method(call, base, params)
    except waiting.ClientGone:
        raise
    except A2AError as error:
        await refuse(exchange, rpc_id, error, rest=rest)
    except DomainError as error:
        await refuse(exchange, rpc_id, from_domain(error), rest=rest)
    except DATABASE_ERRORS as exc:
        await refuse(exchange, rpc_id, from_domain(from_database_error(exc, verb="a2a")), rest=rest)


async def refuse(exchange: Exchange, rpc_id: object, error: A2AError, *, rest: bool) -> None:
    said = error.rest_body() if rest else error.body(rpc_id)
    if exchange.started:  # a stream had begun: its last event says it
        await exchange.push(_event(said, name="error"))
        await exchange.end_stream()
        return
    headers = [("www-authenticate", 'Bearer realm="switchboard"')] if error.status == 401 else []
    if "retry_after" in error.extra:
        headers.append(("retry-after", str(max(1, round(float(error.extra["retry_after"]))))))
    await exchange.json(said, status=error.rest_status() if rest else error.status, headers=headers)


def _allowed(call: _Call, verb_name: str) -> None:
    verbs.named(verb_name).check_allowed(call.endpoint)


# -- SendMessage, SendStreamingMessage


async def _send_message(call: _Call, base: str, params: object) -> None:
    asked = params_of(Send, params)
    await _check_team(call, asked.tenant)
    v = await _sent(call, asked)
    if isinstance(v, Rejected):
        await call.answer({"task": v.task()})
        return
    if not (asked.configuration.return_immediately or v.settled):
        v = await _until_settled(call, v)
    await call.answer({"task": call.task(v, asked.configuration.history_length)})


async def _send_streaming_message(call: _Call, base: str, params: object) -> None:
    asked = params_of(Send, params)
    await _check_team(call, asked.tenant)
    v = await _sent(call, asked)
    if isinstance(v, Rejected):
        await call.exchange.open_stream(call.headers)
        await call.exchange.push(_event(call, {"task": v.task()}))
        await call.exchange.end_stream()
        return
    todo_id = v.todo.id
    del v  # a stream holds no read of its own beyond its latest (bench/a2a.py: memory)
    await _stream(call, todo_id, asked.configuration.history_length)


async def _check_team(call: _Call, tenant: str) -> None:
    if tenant:
        if tenant != await db.arun(selectors.team_slug_plan(call.endpoint.team_id)):
            raise A2AError(INVALID_PARAMS, "No such tenant for this token.", reason="not_found")


async def _sent(call: _Call, asked: Send) -> TaskView | Rejected:
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
    texts, data = contents(message.parts)
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
    arguments = create_arguments(call.endpoint, meta, texts, data)
    wanted = asked.configuration.task_push_notification_config
    push = None  # checked before anything is queued
    if wanted is not None:  # a config here is one set by its own method: get_todo held too
        _allowed(call, "get_todo")
        push = await a2a_push.checked(params_of(a2a_push.ConfigIn, wanted))
    verb = verbs.named("create_todo")
    created = await waiting.call(call.endpoint, verb, wire.convert(verb, arguments))
    todo_id = created["todo"]["id"]
    v = await call.read(todo_id)
    if push is not None:  # its first push is the next change (claimed, say)
        await a2a_push.keep(call, todo_id, v.id, push)
    return v


async def _answered(call: _Call, message: MessageIn, texts: list[str], data: list[Any]) -> TaskView:
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
    except NotFound:  # one it may not read: as a made-up id
        raise NotFound(task_view.NO_SUCH_TASK) from None
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


async def _stream(call: _Call, todo_id: int, history_length: int | None) -> None:
    """Server-Sent Events: the task, then a status update at each change (and the result's
    artifact before a completion's), until it ends or needs input, the client leaves, or
    STREAM_SECONDS pass."""
    crowd = waiting.waiters()
    crowd.enter(call.endpoint.pk)
    gone = call.exchange.watch_disconnect()
    try:
        async with task_watch().follow(call.endpoint.team_id, todo_id) as follower:
            gone.add_done_callback(lambda _: follower.changed.set())
            v = await call.read(todo_id)
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
                for update in updates(v, attempts=call.attempts):
                    await call.exchange.push(_event(call, update))
            await call.exchange.end_stream()
    finally:
        crowd.leave(call.endpoint.pk)


def _event(call_or_body: _Call | dict, result: dict | None = None, *, name: str = "") -> bytes:
    if isinstance(call_or_body, _Call):
        call = call_or_body
        body = result if call.rest else {"jsonrpc": "2.0", "id": call.id, "result": result}
    else:
        body = call_or_body
    head = f"event: {name}\n".encode() if name else b""
    return head + b"data: " + wire.encode(body) + b"\n\n"


# -- GetTask, ListTasks, CancelTask, SubscribeToTask


async def _get_task(call: _Call, base: str, params: object) -> None:
    asked = params_of(GetParams, params)
    await _check_team(call, asked.tenant)
    _allowed(call, "get_todo")
    check_history_length(asked.history_length)
    todo_id = task_view.todo_id_of(call.endpoint.team_id, asked.id)
    await call.answer(call.task(await call.read(todo_id), asked.history_length))


async def _list_tasks(call: _Call, base: str, params: object) -> None:
    asked = params_of(ListParams, params)
    await _check_team(call, asked.tenant)
    _allowed(call, "get_todo")
    check_history_length(asked.history_length)
    size = PAGE_DEFAULT if asked.page_size is None else asked.page_size
    if not 1 <= size <= PAGE_MAX:
        raise A2AError(INVALID_PARAMS, f"pageSize is 1 to {PAGE_MAX}.")
    state = None
    if asked.status and asked.status != "TASK_STATE_UNSPECIFIED":
        state = STATES_BY_NAME.get(asked.status)
        if state is None:
            raise A2AError(
                INVALID_PARAMS, f"status must be one of {', '.join(TASK_STATES.values())}."
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
    context: int | None = None
    if asked.context_id:  # a context is one task here
        context = task_view.todo_id_of(call.endpoint.team_id, asked.context_id)
        before = context + 1
    todos, more = await db.arun(
        selectors.list_tasks_plan(
            call.endpoint, task_state=state, limit=size, before_id=before, updated_after=after
        )
    )
    if context is not None:
        todos, more = [t for t in todos if t.id == context], False
    history = 0 if asked.history_length is None else asked.history_length
    tasks = []
    for todo in todos:  # a list carries no attempts: GetTask reads them
        v = task_view.view(call.endpoint.team_id, TodoDetail(todo=todo, attempts=[]))
        tasks.append(
            task_json(v, history_length=history, attempts=False, artifacts=asked.include_artifacts)
        )
    # totalSize is not counted (it reads 0): a keyset page exists not to walk a whole queue.
    await call.answer(
        {
            "tasks": tasks,
            "nextPageToken": selectors.encode_cursor(todos[-1].id) if more else "",
            "pageSize": size,
        }
    )


def check_history_length(value: int | None) -> None:
    if value is not None and not 0 <= value <= 1000:
        raise A2AError(INVALID_PARAMS, "historyLength is 0 to 1000.")


async def _unended(
    call: _Call,
    kind: type[GetParams | CancelParams],
    params: object,
    verb: str,
    code: int,
    then: str,
) -> int:
    """The todo of a task the caller may act on with ``verb``, not ended (else ``code``)."""
    asked = params_of(kind, params)
    await _check_team(call, asked.tenant)
    _allowed(call, verb)
    todo_id = task_view.todo_id_of(call.endpoint.team_id, asked.id)
    v = await call.read(todo_id)
    if v.terminal:
        raise A2AError(code, f"The task has ended ({v.state}){then}", reason="conflict")
    return todo_id


async def _cancel_task(call: _Call, base: str, params: object) -> None:
    todo_id = await _unended(call, CancelParams, params, "cancel", TASK_NOT_CANCELABLE, ".")
    verb = verbs.named("cancel")
    try:
        await waiting.call(call.endpoint, verb, wire.convert(verb, {"todo_id": todo_id}))
    except Conflict as error:
        raise A2AError(TASK_NOT_CANCELABLE, error.message, reason=error.code) from None
    await call.answer(call.task(await call.read(todo_id)))


async def _subscribe_to_task(call: _Call, base: str, params: object) -> None:
    todo_id = await _unended(
        call, GetParams, params, "get_todo", UNSUPPORTED_OPERATION, "; read it with GetTask."
    )
    await _stream(call, todo_id, None)  # it holds no read of its own beyond its latest


async def _extended_card(call: _Call, base: str, params: object) -> None:
    """The team's endpoints as skills: what a sender names with ``to``, so only an endpoint
    that may send (``create_todo``) reads them."""
    asked = params_of(TenantParams, params)
    _allowed(call, "create_todo")
    slug, live = await db.arun(selectors.team_card_plan(call.endpoint.team_id))
    if asked.tenant and asked.tenant != slug:
        raise A2AError(INVALID_PARAMS, "No such tenant for this token.", reason="not_found")
    await call.answer(extended_card(base, slug, live))


_METHODS = {
    "SendMessage": _send_message,
    "SendStreamingMessage": _send_streaming_message,
    "GetTask": _get_task,
    "ListTasks": _list_tasks,
    "CancelTask": _cancel_task,
    "SubscribeToTask": _subscribe_to_task,
    "GetExtendedAgentCard": _extended_card,
    "CreateTaskPushNotificationConfig": a2a_push.create,
    "GetTaskPushNotificationConfig": a2a_push.get,
    "ListTaskPushNotificationConfigs": a2a_push.list_configs,
    "DeleteTaskPushNotificationConfig": a2a_push.delete,
}
