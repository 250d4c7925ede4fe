"""claim_next's long-poll: claim at once, or wait up to ``wait_seconds`` for the doorbell and
claim then. While waiting a request holds no transaction and no database connection.

Here the synchronous waiter (a thread per waiting request: the WSGI server, and MCP tools run
by django-mcpz's sync view). Each time it wakes it re-checks the credential that opened the
request (a token rotated or revoked meanwhile claims nothing) before it claims.
"""

from __future__ import annotations

import time

from django.db import connection

from agents import schemas, verbs
from agents.doorbell import doorbell
from queues import counters, db, endpoints
from queues.models import Endpoint

# While a long-poll waits, it re-checks at least this often: todos also become claimable by
# the clock alone (not_before passing, a lease lapsing), which rings no doorbell.
RECHECK_SECONDS = 5.0


CLAIMS = ("claim", "claim_next")


def call(endpoint: Endpoint, verb: str, params, *, mcp_session_id: str | None = None) -> dict:
    """Run one verb's handler on Django's connection, waiting for claim_next's long-poll.
    A claim call is one claim latency observation: its last claim, never its waiting."""
    if verb == "claim_next" and params.wait_seconds:
        return _claim_next_waiting(endpoint, params, mcp_session_id)
    plan = verbs.HANDLERS[verb](endpoint, params, mcp_session_id=mcp_session_id)
    if verb not in CLAIMS:
        return db.run(plan)
    started = time.perf_counter()
    try:
        return db.run(plan)
    finally:
        counters.claim_latency.observe(time.perf_counter() - started)


def _claim_next_waiting(
    endpoint: Endpoint, p: schemas.ClaimNext, mcp_session_id: str | None
) -> dict:
    deadline = time.monotonic() + p.wait_seconds
    elapsed = 0.0
    try:
        while True:
            # Take the ticket before looking, so a ring between the miss and the wait is kept.
            ticket = doorbell.ticket(endpoint.pk)
            started = time.perf_counter()
            try:
                result = db.run(verbs.claim_next(endpoint, p, mcp_session_id=mcp_session_id))
            finally:
                elapsed = time.perf_counter() - started
            remaining = deadline - time.monotonic()
            if result["todo"] is not None or remaining <= 0:
                return result
            connection.close()  # back to the pool (or closed): waiting holds no connection
            doorbell.wait(endpoint.pk, ticket, min(remaining, RECHECK_SECONDS))
            db.run(endpoints.still_valid_plan(endpoint))
    finally:
        counters.claim_latency.observe(elapsed)
