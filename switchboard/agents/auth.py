"""Bearer tokens, the one parser for every machine-facing surface (the agent API, MCP and
/metrics), and the endpoint a request's token names: from this process's token cache while
its LISTEN connection hears the endpoints' changes (agents/token_cache.py), else one
statement."""

from __future__ import annotations

from switchboard.agents.token_cache import caches
from switchboard.queues import db, tokens
from switchboard.queues.endpoints import endpoint_from_row, token_row_plan
from switchboard.queues.errors import Unauthorized
from switchboard.queues.models import Endpoint
from switchboard.queues.notify import listener


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
    digest = tokens.lookup_digest(token_from_header(authorization))
    if digest is None:
        raise _missing()
    cache = caches.get()
    listener()  # started: its trust is what the cache keeps by
    row = cache.get(digest)
    if row is None:
        generation = cache.generation
        row = await db.arun(token_row_plan(digest))
        if row is None:
            raise _missing()
        endpoint = endpoint_from_row(row)
        if endpoint.revoked_at is not None:
            raise Unauthorized("This endpoint has been revoked.")
        cache.fill(digest, endpoint.pk, row, generation)
        return endpoint
    return endpoint_from_row(row)


def _missing() -> Unauthorized:
    return Unauthorized("A valid endpoint token is required (Authorization: Bearer …).")
