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
from typing import Any

from switchboard.agents import schemas
from switchboard.queues import endpoints, selectors, transitions
from switchboard.queues.db import Plan
from switchboard.queues.errors import Forbidden, NotFound
from switchboard.queues.models import Endpoint
from switchboard.queues.records import UNTRUSTED_NOTICE, Claim, TodoDetail, TodoRecord
from switchboard.queues.transitions import Actor, ClaimArgs, Close, Next, Then, Transition

# A handler's plan answers the verb's dict; a close's with ``then``, a ``transitions.Then``.
type Handler = Callable[..., Plan[Any]]


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
    # The ledger's transition the verb calls (a selector for a read): its parameters are the
    # struct's fields, by name (``arguments``; agents/checks.py holds the two together).
    transition: Transition | None = None
    # A close (complete, fail, release): the ``Close`` constructor its written fields go to,
    # and, with ``then`` given, the handler's plan answers a ``transitions.Then``.
    closes: Callable | None = None

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
) -> Callable[[Handler], Verb]:
    """Declare the decorated handler as the verb of its name; the name is then the Verb."""

    def register(handler: Handler) -> Verb:
        name = handler.__name__
        if name in REGISTRY:
            raise ValueError(f"the verb {name!r} is declared twice")
        declared = REGISTRY[name] = Verb(
            name=name,
            params=params,
            output=output,
            description=description,
            handler=handler,
            **traits,
        )
        return declared

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
    transition=transitions.create_todo,
)
def create_todo(endpoint: Endpoint, p: schemas.CreateTodo, **_) -> Plan[dict]:
    target: Endpoint | None = endpoint
    if p.to is not None and p.to != endpoint.agent_id:
        # Unknown and foreign agent_ids answer alike: only this team's live endpoints exist.
        target = yield from endpoints.live_in_team_plan(endpoint.team_id, p.to)
        if target is None:
            raise NotFound("No such endpoint in this team.")
    assert target is not None
    todo, created = yield from transitions.create_todo.plan(
        Actor.agent(endpoint),
        endpoint=target,
        title=p.title,
        body=p.body,
        priority=p.priority,
        max_attempts=p.max_attempts,
        not_before=p.not_before,
        idempotency_key=p.idempotency_key,
        after=p.after,
        after_policy=p.after_policy,
        parent=p.parent,
        key=p.key,
        unique_while_active=p.unique_while_active,
    )
    if target is not endpoint:
        return {"todo": shown_to_sender(todo), "created": created}
    return {"todo": todo.as_api(), "created": created}


def shown_to_sender(todo: TodoRecord) -> dict:
    """A todo as create_todo answers its sender (one sent elsewhere), and as an MCP task's
    result shows it (agents/mcp_tasks.py): as get_todo shows it to a requester, no attempts,
    and nothing it waits for or that waits for it (get_todo reads those)."""
    shown = TodoDetail(todo=todo, attempts=[], as_requester=True).as_api()["todo"]
    for read_by_get_todo in ("questions", "after", "dependents", "children"):
        del shown[read_by_get_todo]
    return shown


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
    transition=transitions.claim,
)
def claim(endpoint: Endpoint, p: schemas.Claim, *, mcp_session_id: str | None = None) -> Plan[dict]:
    claimed = yield from transitions.claim.plan(
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
    transition=transitions.claim_next,
)
def claim_next(
    endpoint: Endpoint, p: schemas.ClaimNext, *, mcp_session_id: str | None = None
) -> Plan[dict]:
    """One claim, at once: the best claimable todo, or ``todo: null`` (with ``paused: true``
    while the endpoint is paused). ``wait_seconds`` is the front's to honour, around this
    (agents/waiting.py)."""
    claimed = yield from transitions.claim_next.plan(
        Actor.agent(endpoint),
        lease_seconds=p.lease_seconds,
        require_fence=p.require_fence,
        claimant=p.claimant,
        mcp_session_id=mcp_session_id,
    )
    return claimed_answer(endpoint, claimed)


def claimed_answer(endpoint: Endpoint, claimed: Claim | None, *, paused: bool = False) -> dict:
    """claim_next's answer for a claim or for none (``paused: true`` while the endpoint is
    paused)."""
    if claimed is not None:
        return {**claimed.as_api(), "paused": False}
    return dict(PAUSED if paused or endpoint.paused else NO_TODO)


@verb(
    params=schemas.Heartbeat,
    output=schemas.HeartbeatOut,
    description="Keep your open attempt's lease alive.",
    idempotent=True,
    transition=transitions.heartbeat,
)
def heartbeat(endpoint: Endpoint, p: schemas.Heartbeat, **_) -> Plan[dict]:
    lease = yield from transitions.heartbeat.plan(
        Actor.agent(endpoint),
        p.todo_id,
        attempt_seq=p.attempt_seq,
        lease_token=p.lease_token,
        lease_seconds=p.lease_seconds,
    )
    return lease.as_api()


@verb(
    params=schemas.Complete,
    output=schemas.ClosedOut,
    description="Report success: the todo is done. With `then`, claim the next todo in the"
    " same request.",
    transition=transitions.complete,
    closes=Close.complete,
)
def complete(
    endpoint: Endpoint, p: schemas.Complete, *, mcp_session_id: str | None = None
) -> Plan[dict | Then]:
    close = Close.complete(result=p.result, summary=p.summary, artifact=p.artifact)
    return (yield from _closing(endpoint, p, close, mcp_session_id))


@verb(
    params=schemas.Fail,
    output=schemas.ClosedOut,
    description="Report failure: retried with backoff, dead-lettered at the cap or when"
    " retryable is false. With `then`, claim the next todo in the same request.",
    transition=transitions.fail,
    closes=Close.fail,
)
def fail(
    endpoint: Endpoint, p: schemas.Fail, *, mcp_session_id: str | None = None
) -> Plan[dict | Then]:
    close = Close.fail(
        result=p.result, summary=p.summary, artifact=p.artifact, retryable=p.retryable
    )
    return (yield from _closing(endpoint, p, close, mcp_session_id))


@verb(
    params=schemas.Release,
    output=schemas.ClosedOut,
    description="Give the todo back without a verdict (back to pending; the failure budget is"
    " not spent). With `question`, ask: the todo waits (state waiting) until a person or its"
    " requester answers, then is pending again and its next claimer reads the question and"
    " the answer. With `then`, claim the next todo in the same request.",
    transition=transitions.release,
    closes=Close.release,
)
def release(
    endpoint: Endpoint, p: schemas.Release, *, mcp_session_id: str | None = None
) -> Plan[dict | Then]:
    close = Close.release(
        summary=p.summary,
        artifact=p.artifact,
        not_before=p.not_before,
        delay_seconds=p.delay_seconds,
        question=p.question,
        choices=p.choices,
        answer_schema=p.answer_schema,
        answer_within_seconds=p.answer_within_seconds,
        on_no_answer=p.on_no_answer,
        wait_for_children=p.wait_for_children,
    )
    return (yield from _closing(endpoint, p, close, mcp_session_id))


@verb(
    params=schemas.Cancel,
    output=schemas.ClosedOut,
    description="Cancel a todo you hold, sent, or that waits on your queue.",
    destructive=True,
    transition=transitions.cancel,
)
def cancel(endpoint: Endpoint, p: schemas.Cancel, **_) -> Plan[dict]:
    closed = yield from transitions.cancel.plan(
        Actor.agent(endpoint), p.todo_id, attempt_seq=p.attempt_seq, lease_token=p.lease_token
    )
    return closed.as_api()


@verb(
    params=schemas.Answer,
    output=schemas.AnswerOut,
    description="Answer the question of a waiting todo you sent (or made on your own queue):"
    " it is pending again at once, and its next claimer reads the question and your answer."
    " The value must be one of the question's choices, fill its answer_schema, or be text"
    " (invalid otherwise, saying what would do). A todo you did not send, or an unknown one,"
    " is not_found; a question already answered or withdrawn is conflict.",
    transition=transitions.answer,
)
def answer(endpoint: Endpoint, p: schemas.Answer, **_) -> Plan[dict]:
    todo = yield from transitions.answer.plan(Actor.agent(endpoint), p.todo_id, value=p.value)
    return {"todo": todo.as_api()}


def _closing(
    endpoint: Endpoint, p: schemas.Ending, close: Close, mcp_session_id: str | None
) -> Plan[dict | Then]:
    """A close's plan: the close alone (its answer), or with ``then`` the close and the next
    claim as one ledger operation, whose ``Then`` the front answers (and long-polls when it
    says ``WAIT``: agents/waiting.py)."""
    actor = Actor.agent(endpoint)
    if p.then is None:
        closed = yield from transitions.end(
            actor, close, p.todo_id, attempt_seq=p.attempt_seq, lease_token=p.lease_token
        )
        return closed.as_api()
    return (
        yield from transitions.close_then_claim_next.plan(
            actor,
            close,
            p.todo_id,
            attempt_seq=p.attempt_seq,
            lease_token=p.lease_token,
            claim=claim_args(p.then, mcp_session_id),
            wait=bool(p.then.wait_seconds),
        )
    )


def claim_args(p: schemas.ClaimNext, mcp_session_id: str | None) -> ClaimArgs:
    return ClaimArgs(
        lease_seconds=p.lease_seconds,
        require_fence=p.require_fence,
        claimant=p.claimant,
        mcp_session_id=mcp_session_id,
    )


def then_answer(endpoint: Endpoint, then: Then) -> dict:
    """A close with ``then``, as the API answers it: the close, and ``next`` (the claim, or
    claim_next's answer for none; null for a replayed close, or a refused claim with
    ``next_error`` saying why)."""
    answer = then.closed.as_api()
    if then.next is Next.NONE:
        answer["next"] = None
        if then.refused is not None:
            answer["next_error"] = then.refused.as_dict()["error"]
    else:
        answer["next"] = claimed_answer(endpoint, then.claim, paused=then.paused)
    return answer
