"""What the transitions share: how one is declared (``transition``), who is acting, the locked
read and its checks, the audit row, the doorbell, and a claim's parameters and answer.

Every helper that touches the database is a plan (queues.db): it yields its statements, so
the transitions built from them run on the sync executor and the async one alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from switchboard.queues import audit, db, sql, tokens, tracing
from switchboard.queues.arguments import todo_id as checked_todo_id
from switchboard.queues.arguments import whole_number
from switchboard.queues.bounds import (
    ATTEMPT_SEQ_MAX,
    LEASE_SECONDS_MAX,
    LEASE_TOKEN_MAX_CHARS,
    bound_claimant,
    bound_mcp_session_id,
)
from switchboard.queues.db import Fetch, Plan
from switchboard.queues.errors import Conflict, Invalid, NotFound, Unauthorized
from switchboard.queues.models import ClaimerKind, Endpoint, EventKind, Outcome, TodoState
from switchboard.queues.records import (
    AttemptRecord,
    CheckAttempt,
    Claim,
    Locked,
    TodoRecord,
    json_value,
)


class Transition[**P, T]:
    """One transition, exported once: ``name(...)`` runs it on Django's connection (views,
    the sweeper, commands, tests); ``name.plan(...)`` is its plan, for the async executor
    (``await db.arun(name.plan(...))``) and for another plan to run as a step. The two take
    the same parameters, the plan's own."""

    def __init__(self, plan: Callable[P, Plan[T]]) -> None:
        self.plan = plan
        functools.update_wrapper(self, plan)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> T:
        return db.run(self.plan(*args, **kwargs))

    def __repr__(self) -> str:
        return f"<transition {self.plan.__module__}.{self.plan.__qualname__}>"


def transition[**P, T](plan: Callable[P, Plan[T]]) -> Transition[P, T]:
    """Declare a plan a transition (``Transition``)."""
    return Transition(plan)


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is calling: an agent through its endpoint, or a person through the Board."""

    endpoint: Endpoint | None = None
    user: Any = None

    @classmethod
    def agent(cls, endpoint: Endpoint) -> Actor:
        return cls(endpoint=endpoint)

    @classmethod
    def human(cls, user) -> Actor:
        return cls(user=user)

    @property
    def is_agent(self) -> bool:
        return self.endpoint is not None

    @property
    def endpoint_id(self) -> int | None:
        return self.endpoint.pk if self.endpoint is not None else None

    @property
    def lease_label(self) -> str:
        """What the todo's ``owner`` column records for a lease this actor holds."""
        if self.endpoint is not None:
            return self.endpoint.owner_label
        return f"user:{self.user.pk}"

    @property
    def claimer_kind(self) -> str:
        return ClaimerKind.ENDPOINT if self.is_agent else ClaimerKind.PERSON

    def check_active(self) -> None:
        """An agent whose endpoint was revoked may no longer act."""
        if self.endpoint is not None:
            check_active(self.endpoint)

    def scope_params(self) -> dict:
        if self.endpoint is not None:
            return {"scope_endpoint": self.endpoint.pk, "scope_user": None}
        return {"scope_endpoint": None, "scope_user": self.user.pk}


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimArgs:
    """claim_next's arguments, as a close's ``then`` carries them."""

    lease_seconds: int | None = None
    require_fence: bool = False
    claimant: str | None = None
    mcp_session_id: str | None = None


@dataclass(frozen=True, slots=True)
class Check:
    open: CheckAttempt | None
    named: CheckAttempt | None  # the one attempt_seq names, else the newest closed one


# ---------------------------------------------------------------------------------------
# Plans


def in_scope(statements: sql.Scoped, actor: Actor, **params: object) -> Fetch:
    """The statement of ``statements`` in ``actor``'s scope, with the scope's parameters."""
    statement = statements.agent if actor.is_agent else statements.user
    return Fetch(statement, {**actor.scope_params(), **params})


def lock(actor: Actor, todo_id: int) -> Plan[Locked]:
    rows = yield in_scope(sql.LOCK_TODO, actor, todo_id=todo_id)
    if not rows:
        raise NotFound()
    return Locked(*rows[0])


def attempts_for_check(todo_id: int, attempt_seq: int | None) -> Plan[Check]:
    rows = yield Fetch(sql.ATTEMPT_FOR_CHECK, {"todo_id": todo_id, "attempt_seq": attempt_seq})
    found = [CheckAttempt(*row) for row in rows]
    open_attempt = next((a for a in found if a.ended_at is None), None)
    if attempt_seq is not None:
        named = next((a for a in found if a.seq == attempt_seq), None)
    else:
        closed = [a for a in found if a.ended_at is not None]
        named = max(closed, key=lambda a: a.seq) if closed else None
    return Check(open=open_attempt, named=named)


def read_todo(todo_id: int) -> Plan[TodoRecord]:
    rows = yield Fetch(sql.SELECT_TODO, {"todo_id": todo_id})
    return TodoRecord.from_row(rows[0])


def read_attempt(todo_id: int, seq: int) -> Plan[AttemptRecord | None]:
    rows = yield Fetch(sql.SELECT_ATTEMPT, {"todo_id": todo_id, "seq": seq})
    return AttemptRecord.from_row(rows[0]) if rows else None


def missing_or_conflict(actor: Actor, todo_id: int, message: str) -> Plan[None]:
    """NotFound when the caller cannot see the todo at all (unknown and foreign alike),
    else Conflict with ``message``."""
    visible = yield in_scope(sql.SELECT_TODO_IN, actor, todo_id=todo_id)
    if not visible:
        raise NotFound()
    raise Conflict(message)


def event(
    kind: EventKind,
    todo_id: int | None,
    *,
    team_id: int | None = None,
    actor: Actor | None = None,
    detail: dict | None = None,
) -> Plan[None]:
    """The audit row of an action on a todo, by a person or (a requester) an endpoint."""
    yield from audit.record(
        kind,
        todo_id=todo_id,
        team_id=team_id,
        user=actor.user if actor and not actor.is_agent else None,
        endpoint=actor.endpoint if actor and actor.is_agent else None,
        detail=detail,
    )


def ring(endpoint_id: int) -> Plan[None]:
    """Wake claim_next long-polls of this endpoint (delivered by PostgreSQL at commit)."""
    yield Fetch(sql.RING_DOORBELL, {"endpoint_id": endpoint_id})


# ---------------------------------------------------------------------------------------
# Plain checks


def call_params(actor: Actor, todo_id, attempt_seq, lease_token) -> tuple[int, int | None, dict]:
    """A call on an attempt (heartbeat, complete, fail, release, cancel): the caller still
    active and its ids well formed, as (todo id, attempt seq, the statements' scope and ids)."""
    actor.check_active()
    todo_id = checked_todo_id(todo_id)
    attempt_seq = optional_seq(attempt_seq)
    optional_token(lease_token)
    params = {**actor.scope_params(), "todo_id": todo_id, "attempt_seq": attempt_seq}
    return todo_id, attempt_seq, params


def holds(actor: Actor, attempt: CheckAttempt) -> bool:
    """Does this caller hold the attempt: the same endpoint for an endpoint attempt, the same
    person for a person's (owner) attempt."""
    if actor.is_agent:
        return attempt.claimer_kind == ClaimerKind.ENDPOINT and (
            attempt.endpoint_id == actor.endpoint_id
        )
    return attempt.claimer_kind == ClaimerKind.PERSON and attempt.user_id == actor.user.pk


def fence_ok(attempt: CheckAttempt, lease_token: str | None) -> bool:
    """A fenced attempt needs its token; an unfenced one takes none (any token is wrong)."""
    if attempt.fenced_hash is not None:
        return tokens.matches(lease_token, attempt.fenced_hash)
    return lease_token is None


def check_fence(attempt: CheckAttempt, lease_token: str | None) -> None:
    if not fence_ok(attempt, lease_token):
        raise Conflict("The lease token does not match this todo's open attempt.")


def check_active(endpoint: Endpoint) -> None:
    if endpoint.revoked_at is not None:
        raise Unauthorized("This endpoint has been revoked.")


def default_lease(actor: Actor) -> int:
    if actor.is_agent:
        return settings.SWITCHBOARD_LEASE_SECONDS
    return settings.SWITCHBOARD_OWNER_LEASE_SECONDS


def lease_seconds(value: Any, default: int) -> int:
    if value is None:
        return min(default, LEASE_SECONDS_MAX)
    return whole_number(value, "lease_seconds", 1, LEASE_SECONDS_MAX)


def optional_seq(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= ATTEMPT_SEQ_MAX:
        raise Invalid("attempt_seq must be a positive whole number.")
    return value


def optional_token(value: Any) -> None:
    if value is not None and (
        not isinstance(value, str) or not 1 <= len(value) <= LEASE_TOKEN_MAX_CHARS
    ):
        raise Invalid("lease_token must be a string.")


def claim_params(
    actor: Actor,
    lease: int | None,
    require_fence: bool,
    claimant: str | None,
    mcp_session_id: str | None,
) -> tuple[dict, str | None]:
    """A claim statement's parameters (queues/sql/claim.py) and the lease token of a fenced
    claim (None unfenced): claim_next's and claim's, and the claim a complete makes next in
    its own statement."""
    seconds = lease_seconds(lease, default_lease(actor))
    if not isinstance(require_fence, bool):
        raise Invalid("require_fence must be true or false.")
    label = bound_claimant(claimant)
    session = bound_mcp_session_id(mcp_session_id)
    token = tokens.new_lease_token() if require_fence else None
    params = {
        **actor.scope_params(),
        "lease_seconds": seconds,
        "owner": actor.lease_label,
        "claimer_kind": actor.claimer_kind,
        "claimer_endpoint": actor.endpoint_id,
        "claimer_user": None if actor.is_agent else actor.user.pk,
        "mcp_session_id": session.text or "",
        "mcp_session_id_truncated": session.truncated,
        "mcp_session_id_bytes": session.bytes,
        "claimant": label.text or "",
        "claimant_truncated": label.truncated,
        "claimant_bytes": label.bytes,
        "token_hash": tokens.digest(token) if token else None,
        "history_cap": settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO,
        "trace_id": tracing.trace_id(),
    }
    return params, token


def claim_from_rows(todo_row, token: str | None, params: dict) -> Plan[Claim | None]:
    """The claim a claim statement made, from the todo's columns of its row; None when the
    picked lapsed lease was dead-lettered. The prior attempts are read only when the todo
    keeps one besides the attempt just opened (its kept seqs are ``(attempts_pruned,
    last_attempt_seq]``)."""
    todo = TodoRecord.from_row(todo_row)
    if todo.state != TodoState.CLAIMED:
        return None
    prior: list[AttemptRecord] = []
    if todo.last_attempt_seq - todo.attempts_pruned > 1:
        found = yield Fetch(
            sql.PRIOR_ATTEMPTS,
            {
                "todo_id": todo.id,
                "seq": todo.last_attempt_seq,
                "history_cap": params["history_cap"],
            },
        )
        prior = [AttemptRecord.from_row(row) for row in found]
    children = (yield from children_of(todo.id)) if todo.children_total else []
    return Claim(
        todo=todo,
        attempt_seq=todo.last_attempt_seq,
        lease_token=token,
        prior_attempts=prior,
        children=children,
    )


def children_of(todo_id: int, *, limit: int = 100) -> Plan[list[dict]]:
    """A parent's children (the first ``limit``, oldest first) as its claimer and get_todo
    show them: each with its state, its last attempt's outcome and summary, and its result
    (bounded as stored). Written by agents: untrusted, as summaries are."""
    rows = yield Fetch(sql.CHILDREN, {"todo_id": todo_id, "limit": limit})
    return [
        {
            "id": child_id,
            "title": title,
            "endpoint": endpoint,
            "state": state,
            "outcome": outcome,
            "summary": summary,
            "summary_truncated": summary_truncated,
            "result": json_value(result),
            "dead_letter_reason": reason or None,
            "ended_at": ended_at.isoformat() if ended_at else None,
        }
        for (
            child_id,
            title,
            endpoint,
            state,
            outcome,
            summary,
            summary_truncated,
            result,
            reason,
            ended_at,
        ) in rows
    ]


def taken_over_conflict(actor: Actor, todo_id: int, check: Check) -> Plan[Conflict | None]:
    """The conflict for a caller whose attempt a person took over (the Board's take-over):
    it says who and when, so the agent knows its report will not count and why; None when
    the caller's last attempt was not taken over."""
    mine = check.named
    if mine is None or mine.outcome != Outcome.TAKEN_OVER or not holds(actor, mine):
        return None
    attempt = yield from read_attempt(todo_id, mine.seq)
    who = attempt.ended_by if attempt is not None and attempt.ended_by else "a person"
    when = attempt.ended_at.isoformat() if attempt is not None and attempt.ended_at else ""
    return Conflict(
        f"{who} took this todo over from the Board at {when}: your attempt {mine.seq} has"
        " ended (outcome taken_over) and nothing you report on it counts.",
        taken_over_by=who,
    )
