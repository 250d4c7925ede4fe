"""Holding a lease: the holder's heartbeat (and a person's Extend from the Board)."""

from __future__ import annotations

from switchboard.queues import sql
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, NotFound
from switchboard.queues.models import EventKind
from switchboard.queues.records import Lease
from switchboard.queues.transitions._common import (
    Actor,
    attempts_for_check,
    call_params,
    check_fence,
    default_lease,
    event,
    holds,
    lease_seconds,
    lock,
    taken_over_conflict,
    transition,
)


@transition
def heartbeat(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    lease_seconds: int | None = None,
    audited: bool = True,
) -> Plan[Lease]:
    """Keep the caller's open attempt alive: the lease becomes now + lease_seconds (never
    shorter). Allowed past lease_expires_at while the attempt is still open. A person's
    heartbeat is an audited "extend", except the Board's keepalive while the drawer is open
    (``audited=False``), which would otherwise write a row every few minutes."""
    todo_id, attempt_seq, params = call_params(actor, todo_id, attempt_seq, lease_token)
    params["lease_seconds"] = _lease(actor, lease_seconds)
    if actor.is_agent and lease_token is None:
        # The fast path: one statement, its own transaction.
        rows = yield Fetch(sql.HEARTBEAT_HELD_BY_AGENT, params)
        if rows:
            return Lease(*rows[0])  # LEASE_SOURCE's columns
    return (yield Atomic(_checked(actor, todo_id, attempt_seq, lease_token, params, audited)))


def _lease(actor: Actor, seconds) -> int:
    return lease_seconds(seconds, default_lease(actor))


def _checked(actor, todo_id, attempt_seq, lease_token, params, audited) -> Plan[Lease]:
    locked = yield from lock(actor, todo_id)
    check = yield from attempts_for_check(todo_id, attempt_seq)
    open_attempt = check.open
    if actor.is_agent and locked.endpoint_id != actor.endpoint_id:
        raise NotFound()  # a requester may not heartbeat what it sent
    if open_attempt is None or not holds(actor, open_attempt):
        taken = yield from taken_over_conflict(actor, todo_id, check)
        raise taken or Conflict("The caller does not hold an open attempt on this todo.")
    if attempt_seq is not None and attempt_seq != open_attempt.seq:
        raise Conflict(f"attempt_seq {attempt_seq} is not the open attempt.")
    check_fence(open_attempt, lease_token)
    rows = yield Fetch(sql.HEARTBEAT_CHECKED, {**params, "attempt_seq": open_attempt.seq})
    if not actor.is_agent and audited:
        yield from event(
            EventKind.EXTEND,
            todo_id,
            team_id=locked.team_id,
            actor=actor,
            detail={"attempt_seq": open_attempt.seq},
        )
    return Lease(*rows[0])  # LEASE_SOURCE's columns
