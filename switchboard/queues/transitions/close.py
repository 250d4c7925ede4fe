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

import enum
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import DatabaseError

from switchboard.queues import sql
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, DomainError, NotFound, from_database_error
from switchboard.queues.models import UNCLAIMED_STATES, EventKind, TodoState
from switchboard.queues.records import (
    ATTEMPT_WIDTH,
    TODO_WIDTH,
    Budget,
    CheckAttempt,
    Claim,
    Closed,
    Locked,
    split_row,
)
from switchboard.queues.transitions._common import (
    Actor,
    ClaimArgs,
    attempts_for_check,
    call_params,
    check_active,
    check_fence,
    claim_params,
    event,
    fence_ok,
    holds,
    lock,
    read_attempt,
    read_todo,
    ring,
    taken_over_conflict,
    transition,
)
from switchboard.queues.transitions.ask import asked
from switchboard.queues.transitions.claim import claim_head, claim_next, claimed_from_rows
from switchboard.queues.transitions.decide import Close, CloseKind, decide
from switchboard.queues.transitions.waits import cancel_children

# ---------------------------------------------------------------------------------------
# The verbs


@transition
def complete(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    result: object = None,
    summary: str | None = None,
    artifact: str | None = None,
) -> Plan[Closed]:
    """The holder reports success: todo done, attempt completed/done."""
    close = Close.complete(result=result, summary=summary, artifact=artifact)
    return (yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token))


@transition
def fail(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    result: object = None,
    summary: str | None = None,
    artifact: str | None = None,
    retryable: bool = True,
) -> Plan[Closed]:
    """The holder reports failure: retry_wait with backoff below the cap, dead at the cap or
    when ``retryable`` is false."""
    close = Close.fail(result=result, summary=summary, artifact=artifact, retryable=retryable)
    return (yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token))


@transition
def release(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    summary: str | None = None,
    artifact: str | None = None,
    not_before: object = None,
    delay_seconds: float | None = None,
    question: str | None = None,
    choices: list[str] | None = None,
    answer_schema: dict | None = None,
    answer_within_seconds: int | None = None,
    on_no_answer: str | None = None,
    wait_for_children: bool = False,
) -> Plan[Closed]:
    """End the attempt without a verdict: back to pending, the budget untouched; with
    ``not_before`` or ``delay_seconds``, not claimable before then (a snooze). The holder may
    release; so may a person on any lease in their teams (passing its fence). With
    ``question`` (the holder only), an ask: the todo waits for an answer
    (queues/transitions/ask.py); with ``wait_for_children`` (the holder only), it waits until
    each of its children has ended."""
    close = Close.release(
        summary=summary,
        artifact=artifact,
        not_before=not_before,
        delay_seconds=delay_seconds,
        question=question,
        choices=choices,
        answer_schema=answer_schema,
        answer_within_seconds=answer_within_seconds,
        on_no_answer=on_no_answer,
        wait_for_children=wait_for_children,
    )
    return (yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token))


@transition
def cancel(
    actor: Actor, todo_id: int, *, attempt_seq: int | None = None, lease_token: str | None = None
) -> Plan[Closed]:
    """Stop the work for good: canceled. Allowed to the holder, the requester (an agent that
    sent it), the todo's own endpoint while nobody holds it, and a person of the team. Its
    unfinished children (and theirs) are canceled with it, in the same transaction."""
    return (yield Atomic(_cancel(actor, todo_id, attempt_seq, lease_token)))


def _cancel(actor: Actor, todo_id, attempt_seq, lease_token) -> Plan[Closed]:
    closed = yield from end(
        actor, Close.cancel(), todo_id, attempt_seq=attempt_seq, lease_token=lease_token
    )
    if closed.todo.children_open and not closed.replayed:
        yield from cancel_children(actor, closed.todo.id)
        closed = replace(closed, todo=(yield from read_todo(closed.todo.id)))
    return closed


# ---------------------------------------------------------------------------------------
# A close with ``then``: the close, and the next claim, as one ledger operation


class Next(enum.Enum):
    """What a close's ``then`` came to."""

    NONE = "none"  # no claim: a replayed close claims nothing, or the claim was refused
    CLAIMED = "claimed"
    NOTHING = "nothing"  # nothing claimable (or the endpoint is paused: ``paused``)
    WAIT = "wait"  # nothing claimable now, and the caller asked to wait: long-poll for it


@dataclass(frozen=True, slots=True)
class Then:
    """The answer of ``close_then_claim_next``: the close, and what its claim came to."""

    closed: Closed
    next: Next
    claim: Claim | None = None
    paused: bool = False
    refused: DomainError | None = None  # why there is no claim (``Next.NONE``), if refused

    def waited(self, claim: Claim | None, *, paused: bool = False) -> Then:
        """The answer once the long-poll a ``WAIT`` asked for has ended."""
        found = Next.CLAIMED if claim is not None else Next.NOTHING
        return replace(self, next=found, claim=claim, paused=paused)

    def refused_by(self, error: DomainError) -> Then:
        """The answer when the long-poll a ``WAIT`` asked for was refused (the close stands)."""
        return replace(self, next=Next.NONE, claim=None, refused=error)


@transition
def close_then_claim_next(
    actor: Actor,
    close: Close,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    claim: ClaimArgs,
    wait: bool = False,
) -> Plan[Then]:
    """End the attempt with ``close``, then claim the endpoint's next todo with ``claim``'s
    arguments: decided here, once, whatever the path.

    The close is committed first, and stands whatever the claim meets: a replayed close
    claims nothing (its first answer may have carried a claim the client never read, and a
    second would hold two); a refused claim (admission, a revoked endpoint, the database) says
    why (``refused``). Where nothing needs deciding between the two (the agent's own
    unfenced complete, not paused, no admission limit, a pick that needs no takeover) the
    close and the claim are one statement and one commit (CLOSE_THEN_CLAIM_NEXT). Nothing
    claimable: ``WAIT`` when ``wait`` (the caller long-polls claim_next), else ``NOTHING``.
    The claim's arguments are checked before anything is written."""
    claiming = claim_params(
        actor, claim.lease_seconds, claim.require_fence, claim.claimant, claim.mcp_session_id
    )
    if close.kind is CloseKind.COMPLETE and _one_statement(actor, lease_token):
        both = yield from _complete_and_claim(
            actor, close, todo_id, attempt_seq=attempt_seq, claiming=claiming
        )
        if both is not None:
            closed, claimed, settled = both
            if claimed is not None:
                return Then(closed, Next.CLAIMED, claimed)
            if settled:
                return Then(closed, Next.WAIT if wait else Next.NOTHING)
            return (yield from _claim_after(actor, closed, claim, wait))
    closed = yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token)
    if closed.replayed:
        return Then(closed, Next.NONE)
    return (yield from _claim_after(actor, closed, claim, wait))


def _one_statement(actor: Actor, lease_token: str | None) -> bool:
    """May the close and the claim be one statement? Only the agent's fast path (it holds
    the open, unfenced attempt), while nothing stands between the two: a pause (the claim
    claims nothing) or an admission limit (the claim is charged in its own transaction), or a
    limit on all it may hold (max_claimed: counted under the endpoint's row lock, claim_next's
    own plan). A per-key limit is the keyed statement's (CLOSE_THEN_CLAIM_NEXT_KEYED)."""
    endpoint = actor.endpoint
    return (
        endpoint is not None
        and lease_token is None
        and not endpoint.paused
        and not settings.SWITCHBOARD_CLAIMS_PER_MINUTE
        and endpoint.max_claimed is None
    )


def _claim_after(actor: Actor, closed: Closed, claim: ClaimArgs, wait: bool) -> Plan[Then]:
    """The claim after a committed close: claim_next's plan, its refusal said, not raised."""
    try:
        claimed = yield from claim_next.plan(
            actor,
            lease_seconds=claim.lease_seconds,
            require_fence=claim.require_fence,
            claimant=claim.claimant,
            mcp_session_id=claim.mcp_session_id,
        )
    except DomainError as refused:
        return Then(closed, Next.NONE, refused=refused)
    except DatabaseError as exc:
        return Then(closed, Next.NONE, refused=from_database_error(exc, verb="claim_next"))
    if claimed is not None:
        return Then(closed, Next.CLAIMED, claimed)
    paused = bool(actor.endpoint is not None and actor.endpoint.paused)
    return Then(closed, Next.WAIT if wait else Next.NOTHING, paused=paused)


def _complete_and_claim(
    actor: Actor,
    close: Close,
    todo_id: int,
    *,
    attempt_seq: int | None,
    claiming: tuple[dict, str | None],
) -> Plan[tuple[Closed, Claim | None, bool] | None]:
    """The complete and claim_next's fast claim as one statement (queues/sql/close.py,
    CLOSE_THEN_CLAIM_NEXT): (closed, the claim or None, whether that is settled: False when
    the pick needs claim_next's takeover arms, which this statement has not, or when the
    close may release todos the pick could not see). None, with
    nothing written, when the statement is not the call's (not the holder's fast path: a
    replay, a conflict, the locked path decides) or it failed (one transaction: nothing of
    it stands, and the close alone, run next, stands whatever the claim would have met).
    ``claiming``: the claim's statement parameters and lease token (claim_params), made once
    by the caller when it checked the claim's arguments."""
    assert actor.endpoint is not None
    check_active(actor.endpoint)
    params, token = claiming
    todo_id, attempt_seq, ids = _close_params(actor, close, todo_id, attempt_seq, None)
    statement, keyed = sql.CLOSE_THEN_CLAIM_NEXT, actor.endpoint.max_claimed_per_key
    if keyed is not None:
        statement, params = sql.CLOSE_THEN_CLAIM_NEXT_KEYED, {**params, "max_per_key": keyed}
    try:
        rows = yield Fetch(
            statement,
            {**params, **ids, **decide(close, None).params()},
            may_fail=keyed is not None,  # a key's limit met late (SWK01): close alone, then
        )
    except DatabaseError:
        return None
    if not rows:
        return None
    row = rows[0]
    closed = Closed(*split_row(row))
    head = claim_head(row[TODO_WIDTH + ATTEMPT_WIDTH :])
    if head.picked is None:
        # Nothing was claimable when the statement began, or the close may release others
        # (a parent, dependents) that the statement's pick could not see: claim_next next.
        releases = closed.todo.parent_id is not None or closed.todo.has_dependents
        return closed, None, not releases
    if head.slow:
        return closed, None, False
    claimed = yield from claimed_from_rows(row[TODO_WIDTH + ATTEMPT_WIDTH :], token, params)
    return closed, claimed, claimed is not None


# ---------------------------------------------------------------------------------------
# Ending an attempt


def end(
    actor: Actor, close: Close, todo_id: int, *, attempt_seq=None, lease_token=None
) -> Plan[Closed]:
    """End the attempt a call means with ``close`` (the module docstring's rules). A claim it
    frees on an endpoint with max_claimed rings that endpoint's doorbell, after the close's
    commit, if a long-poll of it may be waiting (sql.RING_IF_WAITING)."""
    closed = yield from _ended(actor, close, todo_id, attempt_seq, lease_token)
    if closed.attempt is not None and not closed.replayed and _may_be_capped(actor, closed):
        try:
            ring = {"endpoint_id": closed.todo.endpoint_id}
            yield Fetch(sql.RING_IF_WAITING, ring, may_fail=True)
        except DatabaseError:
            pass  # the close stands and says so; the waiters look again at the periodic look
    return closed


def _may_be_capped(actor: Actor, closed: Closed) -> bool:
    """May the endpoint whose claim this close freed have max_claimed? An agent's own, as its
    request read it (no statement for an endpoint without); another's (a requester's cancel)
    or a person's close: the statement reads it."""
    own = actor.endpoint
    return own is None or own.pk != closed.todo.endpoint_id or own.max_claimed is not None


def _ended(actor: Actor, close: Close, todo_id: int, attempt_seq, lease_token) -> Plan[Closed]:
    todo_id, attempt_seq, params = _close_params(actor, close, todo_id, attempt_seq, lease_token)
    if actor.is_agent and lease_token is None and not close.needs_lock:
        # The fast path: the agent holds the open, unfenced attempt; one statement (and, for
        # a close that spends the budget, the read of it first). An ask records its question
        # too: the locked path.
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
        budget = Budget(*rows[0])  # BUDGET_SOURCE's columns
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
    if is_requester and not kind.rules.requester_may_end:
        raise NotFound()  # the requester may cancel and read; the queue is someone else's
    check = yield from attempts_for_check(todo_id, attempt_seq)
    open_attempt = check.open

    if open_attempt is not None:
        if holds(actor, open_attempt) and attempt_seq in (None, open_attempt.seq):
            check_fence(open_attempt, lease_token)
            return (yield from _close(actor, close, open_attempt.seq, params, locked))
        # Who may end an attempt they do not hold: a person ending any lease of their teams
        # this way, and the requester ending what it sent. Both pass the fence.
        overrides = kind.rules.person_may_end if not actor.is_agent else is_requester
        if overrides and attempt_seq in (None, open_attempt.seq) and lease_token is None:
            by = {
                "ended_by": None if actor.is_agent else actor.user.pk,
                "ended_by_endpoint": actor.endpoint_id,
            }
            return (yield from _close(actor, close, open_attempt.seq, {**params, **by}, locked))
    elif kind is CloseKind.CANCEL and locked.state in UNCLAIMED_STATES:
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
    taken = yield from taken_over_conflict(actor, todo_id, check)
    raise taken or Conflict(_conflict_message(locked, open_attempt, attempt_seq))


def _close(actor: Actor, close: Close, seq: int, params: dict, locked: Locked) -> Plan[Closed]:
    if close.kind is CloseKind.WAIT_CHILDREN and locked.children_open == 0:
        close = replace(close, kind=CloseKind.RELEASE)  # nothing to wait for: a release
    decision = decide(close, locked.budget)
    rows = yield Fetch(sql.CLOSE_CHECKED, {**params, **decision.params(), "attempt_seq": seq})
    todo, attempt = split_row(rows[0])
    assert attempt is not None  # the close statement returns the attempt it closed
    closed = Closed(todo, attempt)
    if close.question is not None:
        closed = yield from asked(close.question, locked.id, seq)
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
