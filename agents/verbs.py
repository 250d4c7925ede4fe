"""The agent verbs, shared by the HTTP API and the MCP tools.

Each handler takes the authenticated endpoint and the verb's decoded params (a struct from
``agents.schemas``) and returns a plan (queues/db/executor.py) whose result is the response as a
JSON-ready dict. It calls one transition or selector; authentication, the frozen verb set and
decoding happen in the adapters around it, and the adapter runs the plan: on Django's
connection (``queues.db.run``) or on the async pool (``queues.db.arun``). claim_next's
long-poll and the claim latency metric are the adapters' too (agents/waiting.py): a handler
makes one claim.
"""

from __future__ import annotations

from collections.abc import Callable

from agents import schemas
from queues import endpoints, selectors, transitions
from queues.db import Plan
from queues.errors import Forbidden, NotFound
from queues.models import VERBS, Endpoint
from queues.records import UNTRUSTED_NOTICE, TodoDetail
from queues.transitions import Actor

# get_todo reads only the endpoint's own queue, which list_todos already enumerates, so any
# endpoint holding either may call it (the record's "no new power" for frozen verb sets,
# docs/decisions/0039-attempt-history.md).
READ_ALIASES = {"get_todo": ("get_todo", "list_todos")}
NO_TODO: dict = {
    "todo": None,
    "prior_attempts": [],
    "untrusted_notice": UNTRUSTED_NOTICE,
    "paused": False,
}
# A paused endpoint's claim and claim_next claim nothing and say so (docs/api.md).
PAUSED: dict = {**NO_TODO, "paused": True}


def allowed(endpoint: Endpoint, verb: str) -> bool:
    return any(v in endpoint.verbs for v in READ_ALIASES.get(verb, (verb,)))


def check_allowed(endpoint: Endpoint, verb: str) -> None:
    if not allowed(endpoint, verb):
        raise Forbidden(f"This endpoint was not vended the {verb!r} verb.")


def create_todo(endpoint: Endpoint, p: schemas.CreateTodo, **_) -> Plan[dict]:
    target: Endpoint | None = endpoint
    requester = None
    if p.to is not None and p.to != endpoint.agent_id:
        # Unknown and foreign agent_ids answer alike: only this team's live endpoints exist.
        target = yield from endpoints.live_in_team_plan(endpoint.team_id, p.to)
        if target is None:
            raise NotFound("No such endpoint in this team.")
        requester = endpoint
    assert target is not None
    todo, created = yield from transitions.create_todo_plan(
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


def list_todos(endpoint: Endpoint, p: schemas.ListTodos, **_) -> Plan[dict]:
    todos, next_cursor = yield from selectors.list_todos_plan(
        endpoint, state=p.state, limit=p.limit, cursor=p.cursor
    )
    return {"todos": [t.as_api() for t in todos], "next_cursor": next_cursor}


def get_todo(endpoint: Endpoint, p: schemas.GetTodo, **_) -> Plan[dict]:
    detail = yield from selectors.get_todo_for_endpoint_plan(
        endpoint, p.todo_id, attempts_limit=p.attempts_limit
    )
    return detail.as_api()


def claim(endpoint: Endpoint, p: schemas.Claim, *, mcp_session_id: str | None = None) -> Plan[dict]:
    claimed = yield from transitions.claim_plan(
        Actor.agent(endpoint),
        p.todo_id,
        lease_seconds=p.lease_seconds,
        require_fence=p.require_fence,
        claimant=p.claimant,
        mcp_session_id=mcp_session_id,
    )
    if claimed is None:
        return dict(PAUSED)
    return {**claimed.as_api(), "paused": False}


def claim_next(
    endpoint: Endpoint, p: schemas.ClaimNext, *, mcp_session_id: str | None = None
) -> Plan[dict]:
    """One claim, at once: the best claimable todo, or ``todo: null`` (with ``paused: true``
    while the endpoint is paused). (``wait_seconds`` is the adapters' to honour, around this:
    agents/waiting.py.)"""
    claimed = yield from transitions.claim_next_plan(
        endpoint=endpoint,
        lease_seconds=p.lease_seconds,
        require_fence=p.require_fence,
        claimant=p.claimant,
        mcp_session_id=mcp_session_id,
    )
    if claimed is not None:
        return {**claimed.as_api(), "paused": False}
    return dict(PAUSED if endpoint.paused else NO_TODO)


def _attempt_verb(transition_plan: Callable[..., Plan]) -> Callable[..., Plan[dict]]:
    """heartbeat, complete, fail, release, cancel: the struct's fields are the transition's
    keyword arguments, by name."""

    def handler(endpoint: Endpoint, p: schemas.AttemptCall, **_) -> Plan[dict]:
        arguments = {name: getattr(p, name) for name in p.__struct_fields__}
        todo_id = arguments.pop("todo_id")
        result = yield from transition_plan(Actor.agent(endpoint), todo_id, **arguments)
        return result.as_api()

    handler.__name__ = transition_plan.__name__.removesuffix("_plan")
    return handler


HANDLERS: dict[str, Callable[..., Plan[dict]]] = {
    "create_todo": create_todo,
    "list_todos": list_todos,
    "get_todo": get_todo,
    "claim": claim,
    "claim_next": claim_next,
    "heartbeat": _attempt_verb(transitions.heartbeat_plan),
    "complete": _attempt_verb(transitions.complete_plan),
    "fail": _attempt_verb(transitions.fail_plan),
    "release": _attempt_verb(transitions.release_plan),
    "cancel": _attempt_verb(transitions.cancel_plan),
}
if tuple(HANDLERS) != VERBS:  # one list of verbs: queues.models.VERBS
    raise ImportError("agents.verbs.HANDLERS and queues.models.VERBS disagree")
