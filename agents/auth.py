"""Bearer tokens, the one parser for every machine-facing surface (the agent API, MCP and
/metrics), and the endpoint a request's token names."""

from __future__ import annotations

from django.http import HttpRequest

from queues.endpoints import authenticate
from queues.errors import Unauthorized
from queues.models import Endpoint


def bearer_token(request: HttpRequest) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (any letter case for the scheme), or
    None without one."""
    return token_from_header(request.headers.get("Authorization", ""))


def token_from_header(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def endpoint_for(request: HttpRequest) -> Endpoint:
    """The live endpoint the request's bearer token names; Unauthorized otherwise."""
    endpoint = authenticate(bearer_token(request))
    if endpoint is None:
        raise Unauthorized("A valid endpoint token is required (Authorization: Bearer …).")
    if endpoint.revoked_at is not None:
        raise Unauthorized("This endpoint has been revoked.")
    return endpoint
