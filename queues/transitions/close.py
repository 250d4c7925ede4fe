"""Ending an attempt: complete, fail, release and cancel, by its holder, by a person on any
lease of their teams (release, cancel), or by the requester that sent the todo (cancel).

How an attempt ends is a ``Close``: a named value (River's ``JobSetStateCompleted``,
``JobSetStateErrorRetryable``, ``JobSetStateDiscarded`` in riverdriver are the model) whose
``params()`` one statement applies (queues/sql/close.py ``_CLOSE``): the outcome, the state the
todo goes to when the failure budget allows, whether it spends the budget, whether it sets the
result. The statement decides the rest under the row lock: dead at the cap (or when
``force_dead``), the retry's backoff, the disposition. So how ``fail`` works is
``Close.fail`` here, that one statement, and tests/queues/transitions/test_close.py.

Which attempt a call means: the open one, if the caller holds it and any given seq and token
match; else, if the caller closed the attempt named by ``attempt_seq`` (or, without one, the
newest closed attempt) with the same verb, that recorded result is returned unchanged
(``replayed``: a retry after a lost response loses nothing); anything else is a conflict.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from queues import db, sql
from queues.arguments import todo_id as checked_todo_id
from queues.bounds import (
    NOTHING,
    Bounded,
    bound_artifact,
    bound_result,
    bound_summary,
    summary_from_result,
)
from queues.db import Atomic, Fetch, Plan
from queues.errors import Conflict, Invalid, NotFound
from queues.models import EventKind, Outcome, TodoState
from queues.records import Closed, split_row
from queues.transitions._common import (
    Actor,
    CheckAttempt,
    Locked,
    attempts_for_check,
    check_fence,
    event,
    fence_ok,
    holds,
    lock,
    optional_seq,
    optional_token,
    read_attempt,
    read_todo,
    ring,
)


@dataclass(frozen=True, slots=True)
class Close:
    """How an attempt ends. Built by the named constructors below, never by hand."""

    verb: str  # the call that ends it this way; a replay must repeat it
    outcome: Outcome
    ok_state: TodoState  # where the todo goes while the failure budget allows
    counts_failure: bool  # spends one of max_attempts
    sets_result: bool  # replaces todos.result (and records it on the attempt)
    result: Any = None
    summary: Bounded = NOTHING
    artifact: Bounded = NOTHING
    force_dead: bool = False  # dead whatever the budget (fail with retryable: false; revoke)

    @classmethod
    def complete(cls, *, result: Any = None, summary=None, artifact=None) -> Close:
        """The work is done: the todo is done, the attempt completed."""
        return cls._reporting(
            "complete", Outcome.COMPLETED, TodoState.DONE, False, result, summary, artifact
        )

    @classmethod
    def fail(cls, *, result: Any = None, summary=None, artifact=None, retryable=True) -> Close:
        """The work failed: retried with backoff while failures < max_attempts, dead at the
        cap, or at once when ``retryable`` is false."""
        if not isinstance(retryable, bool):
            raise Invalid("retryable must be true or false.")
        close = cls._reporting(
            "fail", Outcome.FAILED, TodoState.RETRY_WAIT, True, result, summary, artifact
        )
        return close if retryable else _with_force_dead(close)

    @classmethod
    def release(cls, *, summary=None, artifact=None) -> Close:
        """No verdict: back to pending, the failure budget untouched."""
        return cls(
            "release",
            Outcome.RELEASED,
            TodoState.PENDING,
            counts_failure=False,
            sets_result=False,
            summary=bound_summary(summary),
            artifact=bound_artifact(artifact),
        )

    @classmethod
    def cancel(cls) -> Close:
        """Stop the work for good: canceled."""
        return cls("cancel", Outcome.CANCELED, TodoState.CANCELED, False, False)

    @classmethod
    def reap(cls) -> Close:
        """The sweeper found the lease lapsed: the holder died. Back to pending, or dead at
        the cap (a death spends the budget like a failure)."""
        return cls("reap", Outcome.REAPED, TodoState.PENDING, True, False)

    @classmethod
    def revoke(cls) -> Close:
        """The todo's endpoint was revoked: dead, whatever the budget."""
        return cls("revoke", Outcome.REVOKED, TodoState.DEAD, False, False, force_dead=True)

    @classmethod
    def _reporting(cls, verb, outcome, ok_state, counts_failure, result, summary, artifact):
        stored = bound_result(result)
        summary_b = bound_summary(summary)
        if summary_b is NOTHING and settings.SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT:
            summary_b = summary_from_result(stored)
        return cls(
            verb,
            outcome,
            ok_state,
            counts_failure=counts_failure,
            sets_result=True,
            result=stored,
            summary=summary_b,
            artifact=bound_artifact(artifact),
        )

    def params(self) -> dict:
        """The close statement's parameters (with ``ended_by*`` unset: the closer's own)."""
        return {
            "outcome": self.outcome,
            "ok_state": self.ok_state,
            "counts_failure": self.counts_failure,
            "force_dead": self.force_dead,
            "sets_result": self.sets_result,
            "result": json.dumps(self.result)
            if self.sets_result and self.result is not None
            else None,
            "summary": self.summary.text,
            "summary_truncated": self.summary.truncated,
            "summary_bytes": self.summary.bytes,
            "artifact": self.artifact.text,
            "artifact_truncated": self.artifact.truncated,
            "artifact_bytes": self.artifact.bytes,
            "retry_base": settings.SWITCHBOARD_RETRY_BASE_SECONDS,
            "retry_max": settings.SWITCHBOARD_RETRY_MAX_SECONDS,
            "ended_by": None,
            "ended_by_endpoint": None,
        }


def _with_force_dead(close: Close) -> Close:
    from dataclasses import replace

    return replace(close, force_dead=True)


# ---------------------------------------------------------------------------------------
# The verbs


def complete_plan(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq=None,
    lease_token=None,
    result=None,
    summary=None,
    artifact=None,
) -> Plan[Closed]:
    """The holder reports success: todo done, attempt completed/done."""
    close = Close.complete(result=result, summary=summary, artifact=artifact)
    return (yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token))


def fail_plan(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq=None,
    lease_token=None,
    result=None,
    summary=None,
    artifact=None,
    retryable=True,
) -> Plan[Closed]:
    """The holder reports failure: retry_wait with backoff below the cap, dead at the cap or
    when ``retryable`` is false."""
    close = Close.fail(result=result, summary=summary, artifact=artifact, retryable=retryable)
    return (yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token))


def release_plan(
    actor: Actor, todo_id: int, *, attempt_seq=None, lease_token=None, summary=None, artifact=None
) -> Plan[Closed]:
    """End the attempt without a verdict: back to pending, the budget untouched. The holder
    may release; so may a person on any lease in their teams (passing its fence)."""
    close = Close.release(summary=summary, artifact=artifact)
    return (yield from end(actor, close, todo_id, attempt_seq=attempt_seq, lease_token=lease_token))


def cancel_plan(actor: Actor, todo_id: int, *, attempt_seq=None, lease_token=None) -> Plan[Closed]:
    """Stop the work for good: canceled. Allowed to the holder, the requester (an agent that
    sent it), the todo's own endpoint while nobody holds it, and a person of the team."""
    return (
        yield from end(
            actor, Close.cancel(), todo_id, attempt_seq=attempt_seq, lease_token=lease_token
        )
    )


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
    actor.check_active()
    todo_id = checked_todo_id(todo_id)
    attempt_seq = optional_seq(attempt_seq)
    optional_token(lease_token)
    params = {
        **actor.scope_params(),
        **close.params(),
        "todo_id": todo_id,
        "attempt_seq": attempt_seq,
    }
    if actor.is_agent and lease_token is None:
        # The fast path: the agent holds the open, unfenced attempt; one statement.
        rows = yield Fetch(sql.CLOSE_HELD_BY_AGENT, params)
        if rows:
            closed = Closed(*split_row(rows[0]))
            if closed.todo.state == TodoState.PENDING:
                yield from ring(closed.todo.endpoint_id)
            return closed
    return (yield Atomic(_checked(actor, close, todo_id, attempt_seq, lease_token, params)))


def _checked(actor, close: Close, todo_id, attempt_seq, lease_token, params) -> Plan[Closed]:
    """The locked path: classify the call and act."""
    locked = yield from lock(actor, todo_id)
    is_requester = actor.is_agent and locked.endpoint_id != actor.endpoint_id
    if is_requester and close.verb != "cancel":
        raise NotFound()  # the requester may cancel and read; the queue is someone else's
    check = yield from attempts_for_check(todo_id, attempt_seq)
    open_attempt = check.open

    if open_attempt is not None:
        # Who may end an attempt they do not hold: a person releasing or canceling any
        # lease of their teams, and the requester canceling what it sent. Both pass the fence.
        overrides = (not actor.is_agent and close.verb in ("release", "cancel")) or (
            is_requester and close.verb == "cancel"
        )
        if holds(actor, open_attempt) and attempt_seq in (None, open_attempt.seq):
            check_fence(open_attempt, lease_token)
            return (yield from _close(actor, close, open_attempt.seq, params, locked))
        if overrides and attempt_seq in (None, open_attempt.seq) and lease_token is None:
            return (
                yield from _close(
                    actor,
                    close,
                    open_attempt.seq,
                    {
                        **params,
                        "ended_by": None if actor.is_agent else actor.user.pk,
                        "ended_by_endpoint": actor.endpoint_id,
                    },
                    locked,
                )
            )
    elif close.verb == "cancel" and locked.state in (TodoState.PENDING, TodoState.RETRY_WAIT):
        if attempt_seq is not None or lease_token is not None:
            raise Conflict("That todo has no open attempt.")
        return (yield from _cancel_unclaimed(actor, locked))
    elif close.verb == "cancel" and locked.state == TodoState.CANCELED and attempt_seq is None:
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
    rows = yield Fetch(sql.CLOSE_CHECKED, {**params, "attempt_seq": seq})
    todo, attempt = split_row(rows[0])
    assert attempt is not None  # the close statement returns the attempt it closed
    closed = Closed(todo, attempt)
    if not actor.is_agent:
        yield from event(
            EventKind(close.verb),
            locked.id,
            team_id=locked.team_id,
            actor=actor,
            detail={
                "attempt_seq": seq,
                "outcome": attempt.outcome,
                "disposition": attempt.disposition,
            },
        )
    elif locked.endpoint_id != actor.endpoint_id:
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
    if attempt.outcome != close.outcome:
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
