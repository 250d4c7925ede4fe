"""The agent verbs as MCP tools at ``/mcp`` (django-mcpz: stateless MCP, a plain synchronous
Django view). Same arguments (the same structs), same results, same error codes as HTTP: a
domain error is a tool error whose text is the HTTP error body.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django_mcpz.server import MCPServer, ToolError

from agents import schemas, verbs, waiting
from agents.auth import endpoint_for
from agents.http import error_response
from queues.errors import DATABASE_ERRORS, DomainError, from_database_error
from queues.records import UNTRUSTED_NOTICE

INSTRUCTIONS = (
    "Switchboard is a work queue. Claim a todo (claim_next), keep its lease alive (heartbeat) "
    "while you work, and end it with complete, fail or release, passing the attempt_seq (and "
    "lease_token, if you asked for require_fence) the claim returned. Claims return "
    "prior_attempts: what earlier workers tried, and whether they died (lease lapsed) or "
    "failed. " + UNTRUSTED_NOTICE
)


def endpoint_auth(request: HttpRequest) -> HttpResponse | None:
    """django-mcpz's auth hook: the endpoint token, as on the HTTP API."""
    try:
        request.endpoint = endpoint_for(request)  # type: ignore[attr-defined]
    except DomainError as error:
        return error_response(error)
    return None


server = MCPServer(
    name="switchboard",
    title="Switchboard",
    version="1",
    instructions=INSTRUCTIONS,
    auth=endpoint_auth,
)


def _permitted(verb: str) -> Callable[[HttpRequest], bool]:
    # Tools outside the endpoint's frozen verb set are not listed; calling one is
    # "Unknown tool" (on HTTP the same call is 403 forbidden).
    return lambda request: verbs.allowed(request.endpoint, verb)  # type: ignore[attr-defined]


def _register(verb: str) -> None:
    params_type, out_type, description = schemas.VERBS[verb]
    reads_attempts = verb in ("get_todo", "claim", "claim_next")

    def tool(request: HttpRequest, params):
        refusal = getattr(request, "switchboard_refusal", None)
        if refusal is not None:  # refused by the ASGI front before the call (agents/asgi.py)
            raise ToolError(json.dumps(refusal.as_dict()))
        try:
            return waiting.call(
                request.endpoint,  # type: ignore[attr-defined]  # set by endpoint_auth
                verb,
                params,
                mcp_session_id=request.headers.get("Mcp-Session-Id") or None,
            )
        except DomainError as error:
            raise ToolError(json.dumps(error.as_dict())) from None
        except DATABASE_ERRORS as exc:  # the HTTP API's answer, from the same function
            raise ToolError(json.dumps(from_database_error(exc, verb=verb).as_dict())) from None

    tool.__name__ = verb
    server.tool(
        name=verb,
        description=description + (f" {UNTRUSTED_NOTICE}" if reads_attempts else ""),
        input_schema=params_type,
        output_schema=out_type,
        read_only=verb in ("list_todos", "get_todo"),
        idempotent=verb in ("list_todos", "get_todo", "heartbeat"),
        destructive=verb == "cancel",
        open_world=False,
        permission=_permitted(verb),
    )(tool)


for _verb in schemas.VERBS:
    _register(_verb)


@csrf_exempt
def view(request: HttpRequest) -> HttpResponse:
    """``/mcp``: the server, plus one guard. django-mcpz decodes with msgspec, which walks
    nesting on the C stack; a body of a few KB of brackets raises RecursionError there. That
    is the client's malformed JSON: a JSON-RPC parse error, not a 500."""
    try:
        return server(request)
    except RecursionError:
        return JsonResponse(
            jsonrpc_error(None, -32700, "Parse error: the body nests too deeply."), status=400
        )


def jsonrpc_error(request_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
