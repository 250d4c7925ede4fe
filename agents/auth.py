"""Bearer tokens, the one parser for every machine-facing surface (the agent API, MCP and
/metrics), and the endpoint a request's token names."""

from __future__ import annotations

from queues import db
from queues.endpoints import authenticate_plan
from queues.errors import Unauthorized
from queues.models import Endpoint


def token_from_header(header: str) -> str | None:
    """The token of ``Authorization: Bearer <token>`` (any letter case for the scheme), or
    None without one."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def endpoint_for(authorization: str) -> Endpoint:
    """The live endpoint an ``Authorization`` header's bearer token names; Unauthorized
    otherwise (a database error on the way is raised as it is)."""
    endpoint = await db.arun(authenticate_plan(token_from_header(authorization)))
    if endpoint is None:
        raise Unauthorized("A valid endpoint token is required (Authorization: Bearer …).")
    if endpoint.revoked_at is not None:
        raise Unauthorized("This endpoint has been revoked.")
    return endpoint
