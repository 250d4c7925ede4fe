"""The agent verbs, shared by the HTTP API and the MCP tools.

Each handler takes the authenticated endpoint and the verb's decoded params (a struct from
``agents.schemas``) and returns the response as a JSON-ready dict. It calls one transition or
selector; authentication, the frozen verb set and decoding happen in the adapters around it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.db import connection

from agents import schemas
from agents.doorbell import doorbell
from queues import counters, endpoints, selectors, transitions
from queues.errors import Forbidden, NotFound
from queues.models import Endpoint
from queues.records import UNTRUSTED_NOTICE, TodoDetail
from queues.transitions import Actor

# get_todo reads only the endpoint's own queue, which list_todos already enumerates, so any
# endpoint holding either may call it (ADR-0039's "no new power" for frozen verb sets).
READ_ALIASES = {"get_todo": ("get_todo", "list_todos")}
# While a long-poll waits, it re-checks at least this often: todos also become claimable by
# the clock alone (not_before passing, a lease lapsing), which rings no doorbell.
RECHECK_SECONDS = 5.0


def allowed(endpoint: Endpoint, verb: str) -> bool:
    return any(v in endpoint.verbs for v in READ_ALIASES.get(verb, (verb,)))


def check_allowed(endpoint: Endpoint, verb: str) -> None:
    if not allowed(endpoint, verb):
        raise Forbidden(f"This endpoint was not vended the {verb!r} verb.")


def create_todo(endpoint: Endpoint, p: schemas.CreateTodo, **_) -> dict:
    target, requester = endpoint, None
    if p.to is not None and p.to != endpoint.agent_id:
        # Unknown and foreign agent_ids answer alike: only this team's live endpoints exist.
        target = Endpoint.objects.filter(
            team_id=endpoint.team_id, agent_id=p.to, revoked_at__isnull=True
        ).first()
        if target is None:
            raise NotFound("No such endpoint in this team.")
        requester = endpoint
    todo, created = transitions.create_todo(
        endpoint=target,
        title=p.title,
        body=p.body,
        priority=p.priority,
        max_attempts=p.max_attempts,
        not_before=p.not_before,
        idempotency_key=p.idempotency_key,
        requester=requester,
    )
    if requester is not None:
        # A sender reads what it sent as get_todo shows it to a requester: no attempts.
        return {
            "todo": TodoDetail(todo=todo, attempts=[], as_requester=True).as_api()["todo"],
            "created": created,
        }
    return {"todo": todo.as_api(), "created": created}


def list_todos(endpoint: Endpoint, p: schemas.ListTodos, **_) -> dict:
    todos, next_cursor = selectors.list_todos(
        endpoint, state=p.state, limit=p.limit, cursor=p.cursor
    )
    return {"todos": [t.as_api() for t in todos], "next_cursor": next_cursor}


def get_todo(endpoint: Endpoint, p: schemas.GetTodo, **_) -> dict:
    detail = selectors.get_todo_for_endpoint(endpoint, p.todo_id, attempts_limit=p.attempts_limit)
    return detail.as_api()


def claim(endpoint: Endpoint, p: schemas.Claim, *, mcp_session_id: str | None = None) -> dict:
    started = time.perf_counter()
    try:
        claimed = transitions.claim(
            Actor.agent(endpoint),
            p.todo_id,
            lease_seconds=p.lease_seconds,
            require_fence=p.require_fence,
            claimant=p.claimant,
            mcp_session_id=mcp_session_id,
        )
    finally:
        counters.claim_latency.observe(time.perf_counter() - started)
    return claimed.as_api()


def claim_next(
    endpoint: Endpoint, p: schemas.ClaimNext, *, mcp_session_id: str | None = None
) -> dict:
    """Claim at once, or wait up to ``wait_seconds`` for the doorbell. While waiting, the
    request holds no transaction and gives its database connection back."""
    deadline = time.monotonic() + (p.wait_seconds or 0)
    # One claim latency observation per call: the time of its last claim statement (the one
    # that answered), never a long-poll's waiting.
    elapsed = 0.0
    try:
        while True:
            # Take the ticket before looking, so a ring between the miss and the wait is kept.
            ticket = doorbell.ticket(endpoint.pk)
            started = time.perf_counter()
            try:
                result = transitions.claim_next(
                    endpoint=endpoint,
                    lease_seconds=p.lease_seconds,
                    require_fence=p.require_fence,
                    claimant=p.claimant,
                    mcp_session_id=mcp_session_id,
                )
            finally:
                elapsed = time.perf_counter() - started
            if result is not None:
                return result.as_api()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {"todo": None, "prior_attempts": [], "untrusted_notice": UNTRUSTED_NOTICE}
            connection.close()  # back to the pool (or closed): waiting holds no connection
            doorbell.wait(endpoint.pk, ticket, min(remaining, RECHECK_SECONDS))
            # The token may have been rotated or the endpoint revoked while this waited: the
            # credential that opened the request must still be the endpoint's before it claims.
            endpoints.check_still_valid(endpoint)
    finally:
        counters.claim_latency.observe(elapsed)


def _attempt_verb(transition: Callable) -> Callable[..., dict]:
    """heartbeat, complete, fail, release, cancel: the struct's fields are the transition's
    keyword arguments, by name."""

    def handler(endpoint: Endpoint, p: schemas.AttemptCall, **_) -> dict:
        arguments = {name: getattr(p, name) for name in p.__struct_fields__}
        todo_id = arguments.pop("todo_id")
        return transition(Actor.agent(endpoint), todo_id, **arguments).as_api()

    handler.__name__ = transition.__name__
    return handler


heartbeat = _attempt_verb(transitions.heartbeat)
complete = _attempt_verb(transitions.complete)
fail = _attempt_verb(transitions.fail)
release = _attempt_verb(transitions.release)
cancel = _attempt_verb(transitions.cancel)


HANDLERS: dict[str, Callable[..., dict]] = {
    "create_todo": create_todo,
    "list_todos": list_todos,
    "get_todo": get_todo,
    "claim": claim,
    "claim_next": claim_next,
    "heartbeat": heartbeat,
    "complete": complete,
    "fail": fail,
    "release": release,
    "cancel": cancel,
}
