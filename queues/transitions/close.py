"""Ending an attempt: complete, fail, release (a snooze, with a wake time) and cancel, by its
holder, a person of the team or the agent that sent the todo. How it ends is a ``Close``
and what that does to the todo is ``decide``'s (queues/transitions/decide.py); the close
statement applies the decision (queues/sql/close.py).

Which attempt a call means: the open one, if the caller holds it and any given seq and token
match; else, if the caller closed the attempt named by ``attempt_seq`` (or, without one, the
newest closed attempt) with the same verb, that recorded result is returned unchanged
(``replayed``: a retry after a lost response loses nothing); anything else is a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError

from queues import db, sql
from queues.db import Atomic, Fetch, Plan
from queues.errors import Conflict, DomainError, NotFound
from queues.models import EventKind, TodoState
from queues.records import ATTEMPT_WIDTH, TODO_WIDTH, Claim, Closed, split_row
from queues.transitions._common import (
    Actor,
    CheckAttempt,
    Locked,
    attempts_for_check,
    call_params,
    check_active,
    check_fence,
    claim_from_rows,
    claim_params,
    event,
    fence_ok,
    holds,
    lock,
    read_attempt,
    read_todo,
    ring,
)
from queues.transitions.decide import Budget, Close, CloseKind, decide

# ---------------------------------------------------------------------------------------
# The verbs


def _ending(constructor, doc: str):
    """The plan of one verb that ends an attempt: the call's ids, and what its closer wrote
    (the constructor's keyword arguments, e.g. ``result``, ``summary``, ``retryable``)."""

    def plan(
        actor: Actor, todo_id: int, *, attempt_seq=None, lease_token=None, **written
    ) -> Plan[Closed]:
        close = constructor(**written)
        return (
            yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token)
        )

    plan.__doc__ = doc
    plan.__name__ = plan.__qualname__ = f"{constructor.__name__}_plan"
    return plan


complete_plan = _ending(
    Close.complete, "The holder reports success: todo done, attempt completed/done."
)
fail_plan = _ending(
    Close.fail,
    "The holder reports failure: retry_wait with backoff below the cap, dead at the cap or"
    " when ``retryable`` is false.",
)
release_plan = _ending(
    Close.release,
    "End the attempt without a verdict: back to pending, the budget untouched; with"
    " ``not_before`` or ``delay_seconds``, not claimable before then (a snooze). The holder"
    " may release; so may a person on any lease in their teams (passing its fence).",
)
cancel_plan = _ending(
    Close.cancel,
    "Stop the work for good: canceled. Allowed to the holder, the requester (an agent that"
    " sent it), the todo's own endpoint while nobody holds it, and a person of the team.",
)


@dataclass(frozen=True, slots=True)
class ClosedThenClaimed:
    """A complete that claimed the next todo in its own statement: the close, and the claim
    (None: nothing was claimable when the statement began)."""

    closed: Closed
    claim: Claim | None
    # False: the pick needs claim_next's takeover arms (a lapsed lease, history over the
    # cap), which this statement has not; the caller claims with claim_next.
    settled: bool = True


def complete_then_claim_next_plan(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq=None,
    lease_token=None,
    lease_seconds=None,
    require_fence=False,
    claimant=None,
    mcp_session_id=None,
    **written,
) -> Plan[ClosedThenClaimed | None]:
    """complete, and claim_next with its arguments (``lease_seconds`` … ``mcp_session_id``),
    in one statement and one commit (queues/sql/close.py, CLOSE_THEN_CLAIM_NEXT): the round
    trip and the commit a ``then`` would otherwise add to every todo of a drain.

    Only where nothing needs deciding between the two: the agent's fast path (it holds the
    open, unfenced attempt), an endpoint that is not paused, no admission limit, and a pick
    that needs no takeover arms. Otherwise None, with nothing written, and the caller closes
    and claims as two (complete_plan, then claim_next_plan). So does a statement that fails:
    it was one transaction, so nothing of it stands, and the close alone, retried, stands
    whatever the claim would have met. A release or a fail with ``then`` is always two: a
    fail reads its budget first, and a release hands back a todo the next claim may pick."""
    endpoint = actor.endpoint
    if (
        endpoint is None
        or lease_token is not None
        or endpoint.paused
        or settings.SWITCHBOARD_CLAIMS_PER_MINUTE
    ):
        return None
    try:
        check_active(endpoint)
        claim, token = claim_params(actor, lease_seconds, require_fence, claimant, mcp_session_id)
        close = Close.complete(**written)
        todo_id, attempt_seq, params = _close_params(
            actor, close, todo_id, attempt_seq, lease_token
        )
    except DomainError:
        return None  # said by the close, or the claim, when they run as two
    params |= decide(close, None).params()
    try:
        rows = yield Fetch(sql.CLOSE_THEN_CLAIM_NEXT, {**claim, **params})
    except DatabaseError:
        return None
    if not rows:
        return None  # not the fast path's: the locked path decides (a replay, a conflict)
    row = rows[0]
    closed = Closed(*split_row(row))
    ok, slow, *picked = row[TODO_WIDTH + ATTEMPT_WIDTH :]
    if ok is None:
        return ClosedThenClaimed(closed, None)
    moved = not slow and picked[1] is not None  # the todo's columns, as the claim moved it
    claimed = (yield from claim_from_rows([[slow, *picked]], token, claim)) if moved else None
    return ClosedThenClaimed(closed, claimed, settled=claimed is not None)


def complete(actor: Actor, todo_id: int, **arguments) -> Closed:
    return db.run(complete_plan(actor, todo_id, **arguments))


def fail(actor: Actor, todo_id: int, **arguments) -> Closed:
    return db.run(fail_plan(actor, todo_id, **arguments))


def release(actor: Actor, todo_id: int, **arguments) -> Closed:
    return db.run(release_plan(actor, todo_id, **arguments))


def cancel(actor: Actor, todo_id: int, **arguments) -> Closed:
    return db.run(cancel_plan(actor, todo_id, **arguments))


def end(
    actor: Actor, close: Close, todo_id: int, *, attempt_seq=None, lease_token=None
) -> Plan[Closed]:
    """End the attempt a call means with ``close`` (the module docstring's rules)."""
    todo_id, attempt_seq, params = _close_params(actor, close, todo_id, attempt_seq, lease_token)
    if actor.is_agent and lease_token is None:
        # The fast path: the agent holds the open, unfenced attempt; one statement (and, for
        # a close that spends the budget, the read of it first).
        closed = yield from _held_by_agent(close, params)
        if closed is not None:
            return closed
    return (yield Atomic(_checked(actor, close, todo_id, attempt_seq, lease_token, params)))


def _close_params(
    actor: Actor, close: Close, todo_id, attempt_seq, lease_token
) -> tuple[int, int | None, dict]:
    """The call's checked ids, and the close statement's parameters for them and for what
    the closer wrote (its closer recorded by the path that closes: none on the fast path)."""
    todo_id, attempt_seq, params = call_params(actor, todo_id, attempt_seq, lease_token)
    params |= {**close.written(), "ended_by": None, "ended_by_endpoint": None}
    return todo_id, attempt_seq, params


def _held_by_agent(close: Close, params: dict) -> Plan[Closed | None]:
    budget = None
    if close.needs_budget:
        rows = yield Fetch(sql.BUDGET_HELD_BY_AGENT, params)
        if not rows:
            return None
        budget = Budget(*rows[0])
    rows = yield Fetch(sql.CLOSE_HELD_BY_AGENT, {**params, **decide(close, budget).params()})
    if not rows:
        return None
    closed = Closed(*split_row(rows[0]))
    if closed.todo.state == TodoState.PENDING:
        yield from ring(closed.todo.endpoint_id)
    return closed


def _checked(actor, close: Close, todo_id, attempt_seq, lease_token, params) -> Plan[Closed]:
    """The locked path: classify the call and act."""
    locked = yield from lock(actor, todo_id)
    kind = close.kind
    is_requester = actor.is_agent and locked.endpoint_id != actor.endpoint_id
    if is_requester and not kind.requester_may_end:
        raise NotFound()  # the requester may cancel and read; the queue is someone else's
    check = yield from attempts_for_check(todo_id, attempt_seq)
    open_attempt = check.open

    if open_attempt is not None:
        if holds(actor, open_attempt) and attempt_seq in (None, open_attempt.seq):
            check_fence(open_attempt, lease_token)
            return (yield from _close(actor, close, open_attempt.seq, params, locked))
        # Who may end an attempt they do not hold: a person ending any lease of their teams
        # this way, and the requester ending what it sent. Both pass the fence.
        overrides = kind.person_may_end if not actor.is_agent else is_requester
        if overrides and attempt_seq in (None, open_attempt.seq) and lease_token is None:
            by = {
                "ended_by": None if actor.is_agent else actor.user.pk,
                "ended_by_endpoint": actor.endpoint_id,
            }
            return (yield from _close(actor, close, open_attempt.seq, {**params, **by}, locked))
    elif kind is CloseKind.CANCEL and locked.state in (TodoState.PENDING, TodoState.RETRY_WAIT):
        if attempt_seq is not None or lease_token is not None:
            raise Conflict("That todo has no open attempt.")
        return (yield from _cancel_unclaimed(actor, locked))
    elif kind is CloseKind.CANCEL and locked.state == TodoState.CANCELED and attempt_seq is None:
        return Closed(todo=(yield from read_todo(todo_id)), attempt=None, replayed=True)

    # A repeat of a close this caller already made (a retry after a lost response) returns
    # the recorded result and writes nothing.
    named = check.named
    if (
        named is not None
        and named.ended_at is not None
        and _closed_by(actor, named, close)
        and fence_ok(named, lease_token)
    ):
        todo = yield from read_todo(todo_id)
        attempt = yield from read_attempt(todo_id, named.seq)
        return Closed(todo=todo, attempt=attempt, replayed=True)
    raise Conflict(_conflict_message(locked, open_attempt, attempt_seq))


def _close(actor: Actor, close: Close, seq: int, params: dict, locked: Locked) -> Plan[Closed]:
    decision = decide(close, Budget(locked.failures, locked.max_attempts))
    rows = yield Fetch(sql.CLOSE_CHECKED, {**params, **decision.params(), "attempt_seq": seq})
    todo, attempt = split_row(rows[0])
    assert attempt is not None  # the close statement returns the attempt it closed
    closed = Closed(todo, attempt)
    kind = close.kind
    if not actor.is_agent and kind.event is not None:
        yield from event(
            kind.event,
            locked.id,
            team_id=locked.team_id,
            actor=actor,
            detail={
                "attempt_seq": seq,
                "outcome": attempt.outcome,
                "disposition": attempt.disposition,
            },
        )
    elif actor.is_agent and locked.endpoint_id != actor.endpoint_id:  # the requester's cancel
        yield from event(
            EventKind.CANCEL,
            locked.id,
            team_id=locked.team_id,
            actor=actor,
            detail={"attempt_seq": seq, "requester": True},
        )
    if closed.todo.state == TodoState.PENDING:
        yield from ring(closed.todo.endpoint_id)
    return closed


def _cancel_unclaimed(actor: Actor, locked: Locked) -> Plan[Closed]:
    moved = yield Fetch(sql.CANCEL_UNCLAIMED, {"todo_id": locked.id, "from_state": locked.state})
    if not moved:  # impossible under the row lock; guard anyway
        raise Conflict("That todo moved on; read it again.")
    yield from event(
        EventKind.CANCEL,
        locked.id,
        team_id=locked.team_id,
        actor=actor,
        detail={"from_state": locked.state},
    )
    return Closed(todo=(yield from read_todo(locked.id)), attempt=None)


def _closed_by(actor: Actor, attempt: CheckAttempt, close: Close) -> bool:
    """Did this caller end this attempt this way (so a repeat may replay it)? An attempt
    ended by someone other than its holder records who: a person (``ended_by``) or the
    requester (``ended_by_endpoint``)."""
    if attempt.outcome != close.kind.outcome:
        return False
    if actor.is_agent:
        if attempt.ended_by_id is not None:
            return False
        if attempt.ended_by_endpoint_id is not None:
            return attempt.ended_by_endpoint_id == actor.endpoint_id
        return attempt.endpoint_id == actor.endpoint_id
    return attempt.ended_by_id == actor.user.pk or (
        attempt.ended_by_id is None
        and attempt.ended_by_endpoint_id is None
        and holds(actor, attempt)
    )


def _conflict_message(locked: Locked, open_attempt, attempt_seq: int | None) -> str:
    if open_attempt is None:
        return f"That todo has no open attempt (it is {locked.state})."
    if attempt_seq is not None and attempt_seq != open_attempt.seq:
        return f"attempt_seq {attempt_seq} is not the open attempt; it has ended."
    return "The caller does not hold this todo's open attempt, or its lease token differs."
