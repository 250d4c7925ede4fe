"""The agent verbs, each declared once: its parameters, its output, its description, how MCP
clients should treat it, and the handler that calls the ledger. The HTTP API, the MCP tools,
the OpenAPI document and the capability document read ``REGISTRY``; the ledger's own list of
verb names (``queues.verbs.VERBS``, what a frozen verb set may hold) and the client's are
held to it by a system check (agents/checks.py) and a test.

A handler takes the authenticated endpoint and the verb's decoded params (a struct of
``agents.schemas``) and returns a plan (queues.db) whose result is the response as a
JSON-ready dict. It calls one transition or selector; authentication, the frozen verb set,
decoding, claim_next's long-poll and the claim latency metric are the front's
(agents/front.py, agents/waiting.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agents import schemas
from queues import endpoints, selectors, transitions
from queues.db import Plan
from queues.errors import Forbidden, NotFound
from queues.models import Endpoint
from queues.records import UNTRUSTED_NOTICE, TodoDetail
from queues.transitions import Actor

type Handler = Callable[..., Plan[dict]]


@dataclass(frozen=True, slots=True)
class Verb:
    name: str
    params: type[schemas.Params]
    output: type[schemas.Out]
    description: str
    handler: Handler
    # Its answer carries what earlier attempts wrote (the untrusted notice goes with it).
    reads_attempts: bool = False
    # How MCP clients may treat it (the tools' annotations).
    read_only: bool = False
    idempotent: bool = False
    destructive: bool = False
    # A claim: one claim latency observation, and released again if its client left.
    claims: bool = False
    # The verbs of a frozen set that let an endpoint call this one (itself, by default):
    # get_todo reads only the endpoint's own queue, which list_todos already enumerates, so
    # either allows it (the record's "no new power", docs/decisions/0039-attempt-history.md).
    allowed_by: tuple[str, ...] = ()

    @property
    def mcp_description(self) -> str:
        return self.description + (f" {UNTRUSTED_NOTICE}" if self.reads_attempts else "")

    def allowed(self, endpoint: Endpoint) -> bool:
        return any(v in endpoint.verbs for v in self.allowed_by or (self.name,))

    def check_allowed(self, endpoint: Endpoint) -> None:
        if not self.allowed(endpoint):
            raise Forbidden(f"This endpoint was not vended the {self.name!r} verb.")


REGISTRY: dict[str, Verb] = {}


def verb(
    *, params: type[schemas.Params], output: type[schemas.Out], description: str, **traits
) -> Callable[[Handler], Handler]:
    """Declare the decorated handler as the verb of its name."""

    def register(handler: Handler) -> Handler:
        name = handler.__name__
        if name in REGISTRY:
            raise ValueError(f"the verb {name!r} is declared twice")
        REGISTRY[name] = Verb(
            name=name,
            params=params,
            output=output,
            description=description,
            handler=handler,
            **traits,
        )
        return handler

    return register


def named(name: str) -> Verb:
    """The verb of this name; an unknown one is not_found (as an unknown path would be)."""
    found = REGISTRY.get(name)
    if found is None:
        raise NotFound(f"No such verb. Verbs: {', '.join(REGISTRY)}.")
    return found


NO_TODO: dict = {
    "todo": None,
    "prior_attempts": [],
    "untrusted_notice": UNTRUSTED_NOTICE,
    "paused": False,
}
# A paused endpoint's claim and claim_next claim nothing and say so (docs/api.md).
PAUSED: dict = {**NO_TODO, "paused": True}


# ---------------------------------------------------------------------------------------
# The verbs, in the order of queues.verbs.VERBS


@verb(
    params=schemas.CreateTodo,
    output=schemas.CreateTodoOut,
    description="Put a todo on this endpoint's queue, or with `to` on another endpoint's queue"
    " in the same team.",
)
def create_todo(endpoint: Endpoint, p: schemas.CreateTodo, **_) -> Plan[dict]:
    target: Endpoint | None = endpoint
    if p.to is not None and p.to != endpoint.agent_id:
        # Unknown and foreign agent_ids answer alike: only this team's live endpoints exist.
        target = yield from endpoints.live_in_team_plan(endpoint.team_id, p.to)
        if target is None:
            raise NotFound("No such endpoint in this team.")
    assert target is not None
    todo, created = yield from transitions.create_todo_plan(
        Actor.agent(endpoint),
        endpoint=target,
        title=p.title,
        body=p.body,
        priority=p.priority,
        max_attempts=p.max_attempts,
        not_before=p.not_before,
        idempotency_key=p.idempotency_key,
    )
    if target is not endpoint:
        # A sender reads what it sent as get_todo shows it to a requester: no attempts.
        return {
            "todo": TodoDetail(todo=todo, attempts=[], as_requester=True).as_api()["todo"],
            "created": created,
        }
    return {"todo": todo.as_api(), "created": created}


@verb(
    params=schemas.ListTodos,
    output=schemas.ListTodosOut,
    description="This endpoint's todos, newest first, by cursor.",
    read_only=True,
    idempotent=True,
)
def list_todos(endpoint: Endpoint, p: schemas.ListTodos, **_) -> Plan[dict]:
    todos, next_cursor = yield from selectors.list_todos_plan(
        endpoint, state=p.state, limit=p.limit, cursor=p.cursor
    )
    return {"todos": [t.as_api() for t in todos], "next_cursor": next_cursor}


@verb(
    params=schemas.GetTodo,
    output=schemas.GetTodoOut,
    description="One todo with its result, next retry, dead-letter reason and newest attempts.",
    reads_attempts=True,
    read_only=True,
    idempotent=True,
    allowed_by=("get_todo", "list_todos"),
)
def get_todo(endpoint: Endpoint, p: schemas.GetTodo, **_) -> Plan[dict]:
    detail = yield from selectors.get_todo_for_endpoint_plan(
        endpoint, p.todo_id, attempts_limit=p.attempts_limit
    )
    return detail.as_api()


@verb(
    params=schemas.Claim,
    output=schemas.ClaimOut,
    description="Claim one todo as a lease; opens an attempt and returns what earlier attempts"
    " tried. While the endpoint is paused it claims nothing (paused: true).",
    reads_attempts=True,
    claims=True,
)
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


@verb(
    params=schemas.ClaimNext,
    output=schemas.ClaimOut,
    description="Claim the best claimable todo (highest priority, then longest waiting),"
    " optionally waiting up to 30 s for one. While the endpoint is paused it claims nothing"
    " (paused: true; a long-poll waits for the resume).",
    reads_attempts=True,
    claims=True,
)
def claim_next(
    endpoint: Endpoint, p: schemas.ClaimNext, *, mcp_session_id: str | None = None
) -> Plan[dict]:
    """One claim, at once: the best claimable todo, or ``todo: null`` (with ``paused: true``
    while the endpoint is paused). ``wait_seconds`` is the front's to honour, around this
    (agents/waiting.py)."""
    claimed = yield from transitions.claim_next_plan(
        Actor.agent(endpoint),
        **_claim_arguments(p),
        mcp_session_id=mcp_session_id,
    )
    return _claimed(endpoint, claimed)


def _claim_arguments(p: schemas.ClaimNext) -> dict:
    return {
        "lease_seconds": p.lease_seconds,
        "require_fence": p.require_fence,
        "claimant": p.claimant,
    }


def _claimed(endpoint: Endpoint, claimed) -> dict:
    """claim_next's answer for a claim (a ``Claim``) or for none."""
    if claimed is not None:
        return {**claimed.as_api(), "paused": False}
    return dict(PAUSED if endpoint.paused else NO_TODO)


def _attempt_verb(
    transition_plan: Callable[..., Plan],
    *,
    then_plan: Callable[..., Plan] | None = None,
    **declared,
) -> Handler:
    """heartbeat, complete, fail, release, cancel: the struct's fields are the transition's
    keyword arguments, by name. ``then_plan``: the transition that also claims next, in the
    close's own statement, when it can (complete); its answer then carries ``next``, and
    the front adds no claim (agents/waiting.py). Without one, or when it cannot, the answer
    is the close's alone and the front claims after it."""

    def handler(
        endpoint: Endpoint, p: schemas.AttemptCall, *, mcp_session_id: str | None = None, **_
    ) -> Plan[dict]:
        arguments = {name: getattr(p, name) for name in p.__struct_fields__ if name != "then"}
        todo_id = arguments.pop("todo_id")
        actor = Actor.agent(endpoint)
        then = getattr(p, "then", None)
        if then is not None and then_plan is not None:
            both = yield from then_plan(
                actor,
                todo_id,
                **arguments,
                **_claim_arguments(then),
                mcp_session_id=mcp_session_id,
            )
            if both is not None:
                if both.settled and (both.claim is not None or not then.wait_seconds):
                    return {**both.closed.as_api(), "next": _claimed(endpoint, both.claim)}
                return both.closed.as_api()  # the front's claim_next: long-poll, takeover
        result = yield from transition_plan(actor, todo_id, **arguments)
        return result.as_api()

    handler.__name__ = transition_plan.__name__.removesuffix("_plan")
    return verb(**declared)(handler)


heartbeat = _attempt_verb(
    transitions.heartbeat_plan,
    params=schemas.Heartbeat,
    output=schemas.HeartbeatOut,
    description="Keep your open attempt's lease alive.",
    idempotent=True,
)
complete = _attempt_verb(
    transitions.complete_plan,
    then_plan=transitions.complete_then_claim_next_plan,
    params=schemas.Complete,
    output=schemas.ClosedOut,
    description="Report success: the todo is done. With `then`, claim the next todo in the"
    " same request.",
)
fail = _attempt_verb(
    transitions.fail_plan,
    params=schemas.Fail,
    output=schemas.ClosedOut,
    description="Report failure: retried with backoff, dead-lettered at the cap or when"
    " retryable is false. With `then`, claim the next todo in the same request.",
)
release = _attempt_verb(
    transitions.release_plan,
    params=schemas.Release,
    output=schemas.ClosedOut,
    description="Give the todo back without a verdict (back to pending; the failure budget is"
    " not spent). With `then`, claim the next todo in the same request.",
)
cancel = _attempt_verb(
    transitions.cancel_plan,
    params=schemas.Cancel,
    output=schemas.ClosedOut,
    description="Cancel a todo you hold, sent, or that waits on your queue.",
    destructive=True,
)
