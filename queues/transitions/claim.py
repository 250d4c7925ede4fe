"""Claiming: claim_next (an agent's best claimable todo) and claim (one todo, by an agent or a
person). Each committed claim opens an attempt, in the same statement that moves the todo
(queues/sql/claim.py); a lapsed lease found on the way is closed as ``lease_expired`` (the
todo dead-lettered at the cap)."""

from __future__ import annotations

from queues import db, sql
from queues.arguments import todo_id as checked_todo_id
from queues.db import Atomic, Fetch, Plan
from queues.errors import Conflict, Invalid
from queues.models import EventKind
from queues.records import Claim
from queues.transitions._common import (
    Actor,
    check_active,
    claim_from_rows,
    claim_params,
    event,
    missing_or_conflict,
)
from queues.transitions.admission import admitted

# claim_next passes over lapsed leases it dead-letters at the cap; bound the walk.
MAX_DEAD_LETTERS_PER_CLAIM = 50
# The todo row is locked by the first run, so a second run sees a settled todo; more than a
# few runs would mean a bug, not a race.
MAX_STALE_SNAPSHOT_RETRIES = 5


def claim_next_plan(
    actor: Actor,
    *,
    lease_seconds: int | None = None,
    require_fence: bool = False,
    claimant: str | None = None,
    mcp_session_id: str | None = None,
) -> Plan[Claim | None]:
    """Claim the endpoint's best claimable todo (highest priority, then the longest
    claimable), or None when there is none. Each run of the claim statement is its own
    transaction: a lapsed lease dead-lettered at the cap is committed, and the next run looks
    further (under an admission limit they share the admission's transaction). A paused
    endpoint (as the request read it) claims nothing: None, with no statement run. Only an
    agent claims the next todo (a person claims the one they chose)."""
    endpoint = actor.endpoint
    if endpoint is None:
        raise Invalid("Only an agent claims the next todo of its queue.")
    check_active(endpoint)
    params, token = claim_params(actor, lease_seconds, require_fence, claimant, mcp_session_id)
    if endpoint.paused:
        return None  # claims nothing, charges no admission (the caller says paused)

    def claiming() -> Plan[tuple[Claim | None, bool]]:
        for _ in range(MAX_DEAD_LETTERS_PER_CLAIM):
            rows = yield from _run_claim(sql.CLAIM_NEXT, params)
            if not rows:
                return None, False
            slow, picked = rows[0][0], rows[0][1]
            if slow:  # a lapsed lease or history over the cap: the takeover arms, same todo
                rows = yield from _run_claim(sql.CLAIM_NEXT_TAKEOVER, {**params, "todo_id": picked})
                if not rows:
                    continue  # another claimer took it meanwhile: look again
            claimed = yield from claim_from_rows(rows, token, params)
            if claimed is not None:
                return claimed, True
        return None, False

    return (yield from admitted(actor, claiming))


def claim_next(actor: Actor, **arguments) -> Claim | None:
    return db.run(claim_next_plan(actor, **arguments))


def claim_plan(
    actor: Actor,
    todo_id: int,
    *,
    lease_seconds: int | None = None,
    require_fence: bool = False,
    claimant: str | None = None,
    mcp_session_id: str | None = None,
) -> Plan[Claim | None]:
    """Claim one todo: an agent from its own queue; a person any todo of their teams'
    queues, opening an ``owner`` attempt (audited). Not claimable: Conflict. A lapsed lease
    at the cap is dead-lettered (committed) and the claim answers Conflict. An agent of a
    paused endpoint gets None: nothing claimed, nothing looked up (a person's claim by hand
    is not held back by a pause)."""
    actor.check_active()
    todo_id = checked_todo_id(todo_id)
    params, token = claim_params(actor, lease_seconds, require_fence, claimant, mcp_session_id)
    if actor.endpoint is not None and actor.endpoint.paused:
        return None  # a paused endpoint's agents claim nothing; a person still may
    params["todo_id"] = todo_id
    statement = sql.CLAIM_ONE_AGENT if actor.is_agent else sql.CLAIM_ONE_USER

    def claiming() -> Plan[tuple[Claim | None, bool]]:
        return (yield Atomic(_claim_one(actor, todo_id, statement, params, token)))

    claimed = yield from admitted(actor, claiming)
    if claimed is None:
        raise Conflict(
            "That todo's lease had lapsed on its last allowed attempt; it was dead-lettered."
        )
    return claimed


def claim(actor: Actor, todo_id: int, **arguments) -> Claim | None:
    return db.run(claim_plan(actor, todo_id, **arguments))


def _claim_one(actor, todo_id, statement, params, token) -> Plan[tuple[Claim | None, bool]]:
    rows = yield from _run_claim(statement, params)
    if not rows:
        yield from missing_or_conflict(actor, todo_id, "That todo is not claimable now.")
    claimed = yield from claim_from_rows(rows, token, params)
    if claimed is not None and not actor.is_agent:
        yield from event(
            EventKind.CLAIM, todo_id, actor=actor, detail={"attempt_seq": claimed.attempt_seq}
        )
    return claimed, claimed is not None


def _run_claim(statement, params: dict) -> Plan[list]:
    """Run a claim statement until its snapshot agrees with the row it locked (see
    queues/sql/claim.py); return its rows without the leading ``ok`` column."""
    for _ in range(MAX_STALE_SNAPSHOT_RETRIES):
        rows = yield Fetch(statement, params)
        if not rows or rows[0][0]:
            return [row[1:] for row in rows]
    raise Conflict("That todo kept changing under the claim; try again.")
