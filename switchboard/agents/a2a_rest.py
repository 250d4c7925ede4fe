"""A2A's HTTP+JSON binding, under ``/a2a/rest`` (the JSON-RPC binding is ``POST /a2a``): the
same methods (agents/a2a.py ``run``), each at A2A's route, with results bare and errors as a
``google.rpc.Status`` whose ErrorInfo carries A2A's reason. An optional first segment names
the tenant (the team's slug), as A2A's clients put it.

| route | method |
|---|---|
| ``POST /message:send``, ``POST /message:stream`` | SendMessage, SendStreamingMessage |
| ``GET /tasks/{id}``, ``GET /tasks`` | GetTask, ListTasks (their fields as query parameters) |
| ``POST /tasks/{id}:cancel``, ``POST /tasks/{id}:subscribe`` | CancelTask, SubscribeToTask |
| ``POST``/``GET /tasks/{id}/pushNotificationConfigs[/{config}]``, ``DELETE …/{config}`` | the push-notification configs |
| ``GET /extendedAgentCard`` | GetExtendedAgentCard |
"""

from __future__ import annotations

from urllib.parse import parse_qsl

import msgspec

from switchboard.agents.a2a import Exchange, refuse, run
from switchboard.agents.a2a_words import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REST_PATH,
    A2AError,
)
from switchboard.queues.errors import Invalid

PATH = REST_PATH
_INTEGERS = frozenset({"historyLength", "pageSize"})
_BOOLEANS = frozenset({"includeArtifacts", "returnImmediately"})


def route(method: str, parts: list[str]) -> tuple[str, dict, bool] | None:
    """(A2A's method, the params the path holds, whether a body is read) for a route."""
    match method, parts:
        case "POST", ["message:send"]:
            return "SendMessage", {}, True
        case "POST", ["message:stream"]:
            return "SendStreamingMessage", {}, True
        case "GET", ["tasks"]:
            return "ListTasks", {}, False
        case "GET", ["extendedAgentCard"]:
            return "GetExtendedAgentCard", {}, False
        case "GET", ["tasks", task] if ":" not in task:
            return "GetTask", {"id": task}, False
        case "POST", ["tasks", action] if action.endswith((":cancel", ":subscribe")):
            task, _, verb = action.rpartition(":")
            name = "CancelTask" if verb == "cancel" else "SubscribeToTask"
            return name, {"id": task}, verb == "cancel"
        case "POST", ["tasks", task, "pushNotificationConfigs"]:
            return "CreateTaskPushNotificationConfig", {"taskId": task}, True
        case "GET", ["tasks", task, "pushNotificationConfigs"]:
            return "ListTaskPushNotificationConfigs", {"taskId": task}, False
        case "GET", ["tasks", task, "pushNotificationConfigs", config]:
            return "GetTaskPushNotificationConfig", {"taskId": task, "id": config}, False
        case "DELETE", ["tasks", task, "pushNotificationConfigs", config]:
            return "DeleteTaskPushNotificationConfig", {"taskId": task, "id": config}, False
    return None


_FIRST = frozenset({"message:send", "message:stream", "tasks", "extendedAgentCard"})


async def serve(exchange: Exchange, base: str, path: str) -> None:
    """A request under PATH: its route's method, run as the JSON-RPC one is."""
    try:
        parts = [p for p in path.removeprefix(PATH).split("/") if p]
        tenant = parts.pop(0) if parts and parts[0] not in _FIRST else ""
        found = route(exchange.method, parts)
        if found is None:
            raise A2AError(METHOD_NOT_FOUND, "No such route.", reason="not_found")
        name, params, has_body = found
        try:
            body = await exchange.body()
        except Invalid as error:
            raise A2AError(INVALID_REQUEST, error.message, status=400) from None
        if has_body and body:
            try:
                sent = msgspec.json.decode(body)
            except (msgspec.DecodeError, RecursionError):
                raise A2AError(PARSE_ERROR, "The body is not JSON.", status=400) from None
            if not isinstance(sent, dict):
                raise A2AError(INVALID_REQUEST, "The body must be a JSON object.")
            params = {**sent, **params}
        # The path's fields win over the query's, as over the body's: ?id= names no other task.
        params = {**_query(exchange.scope.get("query_string", b"")), **params}
        if tenant:
            params["tenant"] = tenant
    except A2AError as error:
        await refuse(exchange, None, error, rest=True)
        return
    await run(exchange, base, name, params, rpc_id=None, rest=True)


def _query(raw: bytes) -> dict:
    """The query string as a method's fields: whole numbers and booleans where A2A has them,
    a field twice refused."""
    said: dict = {}
    for key, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        if key in said:
            raise A2AError(INVALID_REQUEST, f"{key} is given twice.")
        if key in _INTEGERS:
            if not (value.isascii() and value.removeprefix("-").isdigit()) or len(value) > 9:
                raise A2AError(INVALID_REQUEST, f"{key} is a whole number.")
            said[key] = int(value)
        elif key in _BOOLEANS:
            if value not in ("true", "false"):
                raise A2AError(INVALID_REQUEST, f"{key} is true or false.")
            said[key] = value == "true"
        else:
            said[key] = value
    return said
