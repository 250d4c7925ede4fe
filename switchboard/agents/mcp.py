"""The agent verbs as MCP tools at ``/mcp``: stateless MCP as django-mcpz defines it (the
2026-07-28 revision and the 2025 revisions' stateless mode), the same arguments (the same
structs), results and error codes as HTTP, answered on the event loop with no thread hop.

How: django-mcpz's view is synchronous, and does no I/O of its own but our two hooks. So it
runs on the loop, as it stands, for every method; the two hooks are made to do no I/O either:

- the endpoint behind the token is looked up on the loop before the view runs
  (``endpoint_auth`` only reads what was found);
- a tools/call reaches our tool, which decodes its arguments and raises ``_RunOnLoop``; the
  verb runs on the loop (``waiting.call``: the plan on the async pool, a long-poll on the
  doorbell, a claim whose client left released) and the view runs again, the tool returning
  the answer now known. The view's bytes are its own either way, legacy clients included.

A tools/call django-mcpz would hand to the tool as it stands (``plain_tool_call``: the
current revision, headers and ``_meta`` in agreement, no elicitation state) skips the view
altogether (``run_plain_call``), building django-mcpz's answer itself: one decode instead of
two passes of the view. tests/agents/test_mcp_on_loop.py holds the two to the same bytes.

Every error carries the HTTP API's error body, ``{"error": {"code", "message"}}``, in one of
the two places MCP has for an error (docs/api.md, "Errors over MCP"):

- a call that reached a tool and was refused (bad arguments, ``not_found``, ``conflict``,
  ``rate_limited``, …) is a tool error: ``isError`` with the body as its text (not as
  ``structuredContent``, which the TypeScript SDK 1.x validates against the tool's output
  schema even on an error);
- a request refused before any tool (no or a wrong token, a body that is not JSON-RPC, an
  unknown method or tool) is a JSON-RPC error echoing the request's id, with the body as
  ``error.data`` (a missing token keeps its HTTP 401 and ``WWW-Authenticate``).
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

import msgspec
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from django_mcpz.headers import decode_header_value
from django_mcpz.jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    MessageError,
    decode_message,
    read_id,
    result_response,
)
from django_mcpz.schemas import type_schema
from django_mcpz.server import (
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    META_SERVER_INFO,
    PROTOCOL_VERSION,
    MCPServer,
    ToolError,
    host_allowed,
)
from django_msgspec import enc_hook
from msgspec import UnsetType

from switchboard.agents import mcp_frames, mcp_tasks, waiting, wire
from switchboard.agents.auth import endpoint_for
from switchboard.agents.task_view import ATTEMPTS_META
from switchboard.agents.verbs import REGISTRY, Verb
from switchboard.queues.errors import (
    DATABASE_ERRORS,
    DomainError,
    Forbidden,
    Invalid,
    NotFound,
    Unauthorized,
    from_database_error,
)
from switchboard.queues.models import Endpoint
from switchboard.queues.records import UNTRUSTED_NOTICE

# JSON-RPC's implementation-defined server-error range (-32000..-32099), below the sub-range
# MCP reserves (-32020..-32099); -32001 is the code MCP servers commonly answer a missing or
# wrong credential with.
UNAUTHORIZED = -32001
# The same range's first code: the server cannot answer now (the database is unavailable).
UNAVAILABLE = -32000

# How deep a JSON-RPC message may nest, envelope included (params, arguments, a result's own
# nesting: results nest at most 64 deep, queues/records.py). Deeper is a parse error at once,
# before any decoder walks it (msgspec and json walk nesting on the C stack).
MAX_DEPTH = 72

INSTRUCTIONS = (
    "Switchboard is a work queue. Claim a todo (claim_next), keep its lease alive (heartbeat) "
    "while you work, and end it with complete, fail or release, passing the attempt_seq (and "
    "lease_token, if you asked for require_fence) the claim returned. Claims return "
    "prior_attempts: what earlier workers tried, and whether they died (lease lapsed) or "
    "failed. " + UNTRUSTED_NOTICE
)


def endpoint_auth(request: HttpRequest) -> HttpResponse | None:
    """django-mcpz's auth hook: what ``_authenticate`` found on the loop before the view ran.
    A refusal is the HTTP API's status and headers (401, ``WWW-Authenticate``; 503 for a
    database error) with a JSON-RPC error echoing the request's id as the body: MCP clients
    read a JSON-RPC error at any status, and show nothing useful of a body that is not one."""
    return getattr(request, "switchboard_refusal", None)


async def authenticated(request: HttpRequest) -> HttpResponse | None:
    """The refusal of the request's token, or None (``request.endpoint`` then set)."""
    await _authenticate(request)
    return endpoint_auth(request)


async def _authenticate(request: HttpRequest) -> None:
    try:
        request.endpoint = await endpoint_for(  # type: ignore[attr-defined]
            request.headers.get("Authorization", "")
        )
    except DomainError as error:
        request.switchboard_refusal = refusal(  # type: ignore[attr-defined]
            request.body, error, code=UNAUTHORIZED
        )
    except DATABASE_ERRORS as exc:
        request.switchboard_refusal = refusal(  # type: ignore[attr-defined]
            request.body, from_database_error(exc, verb="authenticate")
        )


def refusal(body: bytes, error: DomainError, *, code: int | None = None) -> HttpResponse:
    """A request refused before any tool: the HTTP API's status and headers for ``error``,
    with a JSON-RPC error echoing the request's id as the body."""
    status, _, headers = wire.error_parts(error)
    if code is None:
        code = UNAVAILABLE if status == HTTPStatus.SERVICE_UNAVAILABLE else PARSE_ERROR
    response = _jsonrpc_response(
        jsonrpc_error(_request_id(body), code, error.message, error=error), status=status
    )
    for name, value in headers:
        if name.lower() not in ("content-type", "cache-control"):
            response[name] = value
    return response


def screened(body: bytes) -> HttpResponse | None:
    """The parse error for a body that nests too deeply (400), before anything decodes it;
    None for any other body."""
    if not mcp_frames.too_deep(body, MAX_DEPTH):
        return None
    return _jsonrpc_response(
        jsonrpc_error(None, PARSE_ERROR, f"Parse error: the body nests over {MAX_DEPTH} deep."),
        status=HTTPStatus.BAD_REQUEST,
    )


def _request_id(body: bytes) -> str | int | None:
    """The id of a JSON-RPC request body, when it can be read (else null, as JSON-RPC asks)."""
    try:
        return read_id(msgspec.json.decode(body))
    except (msgspec.DecodeError, RecursionError):
        return None


class _Server(MCPServer):
    def _discover(self, request: HttpRequest, request_id: str | int) -> HttpResponse:
        """server/discover, declaring the tasks extension and the attempts beside each task
        (agents/mcp_tasks.py)."""
        response = super()._discover(request, request_id)
        reply = json.loads(response.content)
        reply["result"]["capabilities"]["extensions"] = {
            mcp_tasks.EXTENSION: {},
            ATTEMPTS_META: {},
        }
        response.content = msgspec.json.encode(reply)
        return response

    def _tool_error(self, request: HttpRequest, request_id: str | int, text: str) -> HttpResponse:
        """django-mcpz sends a tool error as text; ours is the HTTP API's error body, as
        text, in the same result shape as ``run_plain_call``'s."""
        if _error_body(text) is None:  # not one of ours (a tool that raised unexpectedly)
            return super()._tool_error(request, request_id, text)
        return self._result(request, request_id, _refusal_result(text))


def _refusal_result(text: str) -> dict:
    """A tool error: the API's error body as text, with ``isError``, and no
    ``structuredContent``: the TypeScript SDK 1.x validates any structuredContent against
    the tool's output schema, error or not, and threw on ours instead of handing the agent
    its conflict (tests/agents/test_mcp_typescript.py)."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _error_body(text: str) -> dict | None:
    try:
        body = json.loads(text)
    except ValueError:
        return None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body
    return None


server = _Server(
    name="switchboard",
    title="Switchboard",
    version="1",
    instructions=INSTRUCTIONS,
    auth=endpoint_auth,
)


class _RunOnLoop(BaseException):  # noqa: N818 -- not an error: the view's first pass ends here
    """A tool's first pass: the verb and its decoded params, to run on the loop. A
    BaseException, so that django-mcpz's ``except Exception`` around the tool lets it by."""

    def __init__(self, verb: Verb, params: Any) -> None:
        self.verb, self.params = verb, params


@dataclass(frozen=True, slots=True)
class _Refused:
    body: dict  # the HTTP API's error body


def _register(verb: Verb) -> None:
    # The tool takes its arguments undecoded (input_schema is a plain schema) and decodes
    # them itself, so that a bad argument is the HTTP API's ``invalid``, word for word,
    # rather than django-mcpz's own text.
    def tool(request: HttpRequest, arguments: dict[str, Any]):
        answer = getattr(request, "switchboard_answer", None)
        if answer is None:
            try:
                params = wire.convert(verb, arguments)
            except DomainError as error:
                raise ToolError(json.dumps(error.as_dict())) from None
            raise _RunOnLoop(verb, params)
        if isinstance(answer, _Refused):
            raise ToolError(json.dumps(answer.body))
        return answer

    tool.__name__ = verb.name
    server.tool(
        name=verb.name,
        description=verb.mcp_description,
        input_schema=_input_schema(verb),
        output_schema=verb.output,
        read_only=verb.read_only,
        idempotent=verb.idempotent,
        destructive=verb.destructive,
        open_world=False,
        # Tools outside the endpoint's frozen verb set are not listed; calling one is
        # "Unknown tool" (on HTTP the same call is 403 forbidden).
        permission=lambda request: verb.allowed(request.endpoint),  # type: ignore[attr-defined]
    )(tool)


def _input_schema(verb: Verb) -> dict:
    """The verb's struct as a JSON Schema with nothing by reference: ``then`` (claim_next's
    arguments) written out where it is used. Strict tool schemas (OpenAI's, which
    openai-agents converts MCP tools to) refuse a ``$ref`` they cannot check."""
    schema = type_schema(verb.params)
    schema["additionalProperties"] = False  # the structs forbid unknown fields
    definitions = schema.pop("$defs", {})
    return _inlined(schema, definitions)


def _inlined(node: Any, definitions: dict) -> Any:
    if isinstance(node, list):
        return [_inlined(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].removeprefix("#/$defs/")]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return {key: _inlined(value, definitions) for key, value in node.items()}


for _verb in REGISTRY.values():
    _register(_verb)


def _refusal_body(exc: Exception, verb: Verb) -> dict:
    """A tool's refusal: the HTTP API's error body, from the same function for a database
    error."""
    if isinstance(exc, DomainError):
        return exc.as_dict()
    return from_database_error(exc, verb=verb.name).as_dict()  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Answering, on the event loop


async def answer(scope: dict, body: bytes, *, watch_disconnect: Callable) -> HttpResponse:
    """The answer to an ``/mcp`` request whose body has been read and screened, as
    django-mcpz's view gives it (the module's docstring says how it runs on the loop), or
    as one SSE event to a client that accepts only an event stream. A 2025-03-26 batch is
    answered message by message (agents/mcp_frames.py). ``watch_disconnect()`` gives a
    future done once the client goes away."""
    if scope["method"] == "POST" and mcp_frames.is_batch(scope["headers"], body):
        response = await _batch(scope, body, watch_disconnect=watch_disconnect)
    else:
        response = await _one(scope, body, watch_disconnect=watch_disconnect)
    if mcp_frames.accepts_only_event_stream(scope["headers"]):
        return mcp_frames.as_event_stream(response)
    return response


async def _one(scope: dict, body: bytes, *, watch_disconnect: Callable) -> HttpResponse:
    message, as_task = mcp_tasks.route(scope, body)  # the tasks extension's (agents/mcp_tasks.py)
    if message is not None:
        return await mcp_tasks.answer(
            scope, body, message, server=server, authenticate=authenticated
        )
    response = await _plain_or_through_view(scope, body, watch_disconnect=watch_disconnect)
    return await mcp_tasks.as_task(scope, response) if as_task else response


async def _plain_or_through_view(
    scope: dict, body: bytes, *, watch_disconnect: Callable
) -> HttpResponse:
    if scope["method"] == "POST":
        call = plain_tool_call(scope["headers"], body)
        if call is not None:
            answered = await run_plain_call(scope, body, call, watch_disconnect=watch_disconnect)
            if answered is not None:
                return answered
    return await through_view(scope, body, watch_disconnect=watch_disconnect)


async def _batch(scope: dict, body: bytes, *, watch_disconnect: Callable) -> HttpResponse:
    """A batch: refused whole for what concerns the whole request (the Origin, the token:
    with id null, a batch has no one id), else each message answered as if alone."""
    request = ASGIRequest(scope, io.BytesIO(body))
    if not server._origin_allowed(request):
        return _view(request)  # django-mcpz's own 403, before it reads the body
    await _authenticate(request)
    refused = endpoint_auth(request)
    if refused is not None:
        return refused

    async def one(message: bytes) -> HttpResponse:
        return await through_view(scope, message, watch_disconnect=watch_disconnect)

    try:
        replies = await mcp_frames.answers(body, one)
    except mcp_frames.BadBatch as bad:
        return _jsonrpc_response(
            jsonrpc_error(None, INVALID_REQUEST, str(bad)), status=HTTPStatus.BAD_REQUEST
        )
    if not replies:
        return HttpResponse(status=HTTPStatus.ACCEPTED)
    status = HTTPStatus.OK if mcp_frames.has_request(body) else HTTPStatus.BAD_REQUEST
    return _jsonrpc_response(msgspec.Raw(b"[" + b",".join(replies) + b"]"), status=status)


async def through_view(scope: dict, body: bytes, *, watch_disconnect: Callable) -> HttpResponse:
    """django-mcpz's view on the loop: the endpoint looked up first, and a tools/call's verb
    run between the view's two passes."""
    request = ASGIRequest(scope, io.BytesIO(body))
    if scope["method"] == "POST":
        await _authenticate(request)
    try:
        return _view(request)
    except _RunOnLoop as first_pass:
        verb, params = first_pass.verb, first_pass.params
    endpoint: Endpoint = request.endpoint  # type: ignore[attr-defined]
    try:
        request.switchboard_answer = await waiting.call(  # type: ignore[attr-defined]
            endpoint,
            verb,
            params,
            mcp_session_id=request.headers.get("Mcp-Session-Id") or None,
            gone=_gone_if_waiting(verb, params, watch_disconnect),
        )
    except (DomainError, *DATABASE_ERRORS) as exc:
        request.switchboard_answer = _Refused(_refusal_body(exc, verb))  # type: ignore[attr-defined]
    return _view(request)


def _gone_if_waiting(verb: Verb, params: Any, watch_disconnect: Callable):
    return waiting.departure(verb, params, watch_disconnect)


class _Reply(msgspec.Struct):
    """Enough of a JSON-RPC response to see whether it is an error (a result is skipped)."""

    error: dict | None = None


def _view(request: HttpRequest) -> HttpResponse:
    """django-mcpz's view, plus one thing: its own JSON-RPC errors (a parse error, an
    unknown tool or method) gain the HTTP API's error body as ``error.data``. (It decodes
    with msgspec, which walks nesting on the C stack: a body deeper than MAX_DEPTH never
    reaches it, and a RecursionError all the same is a parse error, not a 500.)"""
    try:
        response = server(request)
    except RecursionError:
        return _jsonrpc_response(
            jsonrpc_error(None, PARSE_ERROR, "Parse error: the body nests too deeply."),
            status=HTTPStatus.BAD_REQUEST,
        )
    if response.get("Content-Type", "").startswith("application/json"):
        try:
            # Cheap for a result (skipped, not built): only an error is decoded in full.
            error = msgspec.json.decode(response.content, type=_Reply).error
        except (msgspec.DecodeError, msgspec.ValidationError):
            return response
        if error is not None and not _has_body(error.get("data")):
            reply = json.loads(response.content)
            if response.status_code == HTTPStatus.FORBIDDEN and reply.get("id") is None:
                # django-mcpz refuses an Origin before it reads the body: the request's id,
                # when it can be read, as JSON-RPC asks of every response.
                reply["id"] = _request_id(request.body)
            message = error.get("message")
            message = message if isinstance(message, str) else ""
            data = error.get("data")
            reply["error"]["data"] = {
                **(data if isinstance(data, dict) else {}),
                **_domain_error(error.get("code"), message, response).as_dict(),
            }
            response.content = msgspec.json.encode(reply)
    return response


def _has_body(data: object) -> bool:
    return isinstance(data, dict) and isinstance(data.get("error"), dict)


def _domain_error(code: object, message: str, response: HttpResponse) -> DomainError:
    """The HTTP API's error for a JSON-RPC error django-mcpz answered itself."""
    if code == UNAUTHORIZED:
        return Unauthorized(message)
    if code == METHOD_NOT_FOUND or message.startswith("Unknown tool"):
        # An unknown verb is not_found on HTTP too; a tool outside the endpoint's verb set
        # is not listed, so calling it is the same as calling a nonexistent one.
        return NotFound(message)
    if response.status_code == HTTPStatus.FORBIDDEN:  # an Origin this site does not allow
        return Forbidden(message)
    return Invalid(message)


def jsonrpc_error(
    request_id: str | int | None, code: int, message: str, *, error: DomainError | None = None
) -> dict:
    """A JSON-RPC error object whose data is the HTTP API's error body (``invalid`` unless
    told otherwise)."""
    data = (error or Invalid(message)).as_dict()
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": data},
    }


def _jsonrpc_response(body: dict | msgspec.Raw, *, status: int) -> HttpResponse:
    response = HttpResponse(msgspec.json.encode(body), status=status)
    response["Content-Type"] = "application/json"
    response["Cache-Control"] = "no-store"
    return response


# ---------------------------------------------------------------------------------------
# The plain tools/call, answered without the view

call_log = logging.getLogger("django_mcpz.calls")  # django-mcpz's record of each tools/call
# The request headers a tools/call's acceptance depends on (django-mcpz's checks).
_CALL_HEADERS = ("origin", "mcp-protocol-version", "mcp-method", "mcp-name")


@dataclass(frozen=True, slots=True)
class ToolCall:
    request_id: str | int
    verb: Verb
    arguments: dict[str, Any]
    session_id: str | None


def plain_tool_call(raw_headers: list[tuple[bytes, bytes]], body: bytes) -> ToolCall | None:
    """The tools/call in ``body`` when django-mcpz's view would hand it to the tool as it
    stands: the current protocol revision in the header and in ``_meta``, ``Mcp-Method`` and
    ``Mcp-Name`` agreeing with the body, no ``Origin`` or an allowed one, no elicitation state
    to verify, arguments an object. Else None, and the view answers (its own error, a legacy
    client's call). Whether the endpoint may use the tool is checked once it is known."""
    headers: dict[str, str] = {}
    session_id = None
    for raw_name, value in raw_headers:
        key = raw_name.decode("latin-1").lower()
        if key in _CALL_HEADERS:
            if key in headers:
                return None  # Django joins repeated headers; let the view judge them
            headers[key] = value.decode("latin-1")
        elif key == "mcp-session-id":
            session_id = value.decode("latin-1") or None
    origin = headers.get("origin")
    if origin is not None:
        try:
            host = urlsplit(origin).hostname
        except ValueError:
            return None
        if host is None or not host_allowed(host):
            return None
    if headers.get("mcp-protocol-version") != PROTOCOL_VERSION:
        return None
    if headers.get("mcp-method") != "tools/call":
        return None
    try:
        message = decode_message(body)
    except MessageError:
        return None
    params = message.params
    if message.method != "tools/call" or isinstance(message.id, UnsetType):
        return None
    if isinstance(params, UnsetType):
        return None
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_CLIENT_CAPABILITIES not in meta:
        return None
    if meta.get(META_PROTOCOL_VERSION) != PROTOCOL_VERSION:
        return None
    name = params.get("name")
    verb = REGISTRY.get(name) if isinstance(name, str) else None
    if verb is None or params.get("requestState") is not None:
        return None
    try:
        if decode_header_value(headers.get("mcp-name", "")) != name:
            return None
    except ValueError:
        return None
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    elif not isinstance(arguments, dict):
        return None
    return ToolCall(message.id, verb, arguments, session_id)


async def run_plain_call(
    scope: dict, body: bytes, call: ToolCall, *, watch_disconnect: Callable
) -> HttpResponse | None:
    """The tool's answer to a plain ``call``, as django-mcpz's view would send it, or None
    when the view must say it (a token refused, a tool the endpoint may not use: the view's
    own words)."""
    authorization = ""
    for name, value in scope["headers"]:
        if name.lower() == b"authorization":
            authorization = value.decode("latin-1")
    try:
        endpoint = await endpoint_for(authorization)
    except DomainError:
        return None
    except DATABASE_ERRORS as exc:
        return refusal(body, from_database_error(exc, verb=call.verb.name))
    if not call.verb.allowed(endpoint):
        return None
    started = time.perf_counter()
    try:
        params = wire.convert(call.verb, call.arguments)
        output = await waiting.call(
            endpoint,
            call.verb,
            params,
            mcp_session_id=call.session_id,
            gone=_gone_if_waiting(call.verb, params, watch_disconnect),
        )
    except (DomainError, *DATABASE_ERRORS) as exc:
        result = _refusal_result(json.dumps(_refusal_body(exc, call.verb)))
        outcome = "tool_error"
    else:
        encoded = msgspec.json.encode(output, enc_hook=enc_hook)
        result = {
            "isError": False,
            "content": [{"type": "text", "text": encoded.decode()}],
            "structuredContent": msgspec.Raw(encoded),
        }
        outcome = "ok"
    duration = time.perf_counter() - started
    call_log.info(
        "Tool %r: %s in %.1fms",
        call.verb.name,
        outcome,
        duration * 1000,
        extra={"server": server, "tool": call.verb.name, "outcome": outcome, "duration": duration},
    )
    return result_response(
        call.request_id,
        {"resultType": "complete", **result, "_meta": {META_SERVER_INFO: server.server_info}},
    )
