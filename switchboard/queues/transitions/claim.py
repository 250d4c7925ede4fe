"""Claiming: claim_next (an agent's best claimable todo) and claim (one todo, by an agent or a
person). Each committed claim opens an attempt, in the same statement that moves the todo
(queues/sql/claim.py). A pick whose lease lapsed (its holder died) is taken over: its attempt
closed as ``lease_expired``, or the todo dead-lettered at the cap, as ``decide`` says of
``Close.lapse()`` on the budget the first statement read (a second statement applies it)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import DatabaseError

from switchboard.queues import sql
from switchboard.queues.arguments import todo_id as checked_todo_id
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, Invalid
from switchboard.queues.models import EventKind
from switchboard.queues.records import Budget, Claim
from switchboard.queues.transitions._common import (
    Actor,
    check_active,
    claim_from_rows,
    claim_params,
    event,
    missing_or_conflict,
    transition,
)
from switchboard.queues.transitions.admission import admitted
from switchboard.queues.transitions.decide import Close, decide

# claim_next passes over lapsed leases it dead-letters at the cap; bound the walk.
MAX_DEAD_LETTERS_PER_CLAIM = 50
# The todo row is locked by the first run, so a second run sees a settled todo; more than a
# few runs would mean a bug, not a race.
MAX_STALE_SNAPSHOT_RETRIES = 5
# The SQLSTATE the trigger todos_waits_follow refuses a claim with.
KEY_REFUSED = "SWK01"


@dataclass(frozen=True, slots=True)
class ClaimHead:
    """The columns a claim row starts with (sql.CLAIM_HEAD), by name."""

    ok: bool | None
    slow: bool | None
    picked: int | None
    failures: int | None
    max_attempts: int | None

    @property
    def lapse(self) -> dict:
        """The picked todo's lapsed lease, decided on the budget this row read: the takeover
        statement's parameters (unused for a pick that has no lapsed lease)."""
        budget = Budget(self.failures or 0, self.max_attempts or 1)
        return decide(Close.lapse(), budget).lapse_params()


_HEAD = len(sql.CLAIM_HEAD)
assert [f for f in ClaimHead.__dataclass_fields__] == list(sql.CLAIM_HEAD)


def claim_head(row) -> ClaimHead:
    return ClaimHead(*row[:_HEAD])


def claimed_from_rows(row, token: str | None, params: dict) -> Plan[Claim | None]:
    """The claim a claim row made (its todo's columns follow the head); None when the picked
    lapsed lease was dead-lettered."""
    return (yield from claim_from_rows(row[_HEAD:], token, params))


@transition
def claim_next(
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

    statement = sql.CLAIM_NEXT
    if endpoint.max_claimed_per_key is not None:
        statement, params["max_per_key"] = sql.CLAIM_NEXT_KEYED, endpoint.max_claimed_per_key

    def claiming() -> Plan[tuple[Claim | None, bool]]:
        if not (yield from under_capacity(actor)):
            return None, False
        for _ in range(MAX_DEAD_LETTERS_PER_CLAIM):
            rows = yield from _run_claim(statement, params)
            if not rows:
                return None, False
            head = claim_head(rows[0])
            if head.slow:  # a lapsed lease or history over the cap: the takeover arms
                takeover = {**params, "todo_id": head.picked, **head.lapse}
                rows = yield from _run_claim(sql.CLAIM_NEXT_TAKEOVER, takeover)
                if not rows:
                    continue  # another claimer took it meanwhile, or its budget moved
            claimed = yield from claimed_from_rows(rows[0], token, params)
            if claimed is not None:
                return claimed, True
        return None, False

    return (yield from admitted(actor, claiming))


@transition
def claim(
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

    def claiming() -> Plan[tuple[Claim | None, bool]]:
        if not (yield from under_capacity(actor)):
            raise Conflict(
                "This endpoint has as many claimed todos as it allows (max_claimed); try"
                " again when one ends."
            )
        return (yield Atomic(_claim_one(actor, todo_id, params, token)))

    try:
        claimed = yield from admitted(actor, claiming)
    except DatabaseError as exc:
        if not key_refused(exc):
            raise
        raise Conflict(
            "That todo's key has as many claimed todos as its endpoint allows"
            " (max_claimed_per_key); try again when one ends."
        ) from None
    if claimed is None:
        raise Conflict(
            "That todo's lease had lapsed on its last allowed attempt; it was dead-lettered."
        )
    return claimed


def _claim_one(actor, todo_id, params, token) -> Plan[tuple[Claim | None, bool]]:
    fast, takeover = (
        (sql.CLAIM_ONE_AGENT, sql.CLAIM_ONE_AGENT_TAKEOVER)
        if actor.is_agent
        else (sql.CLAIM_ONE_USER, sql.CLAIM_ONE_USER_TAKEOVER)
    )
    rows = yield from _run_claim(fast, params)
    if rows and claim_head(rows[0]).slow:  # the row is locked now: the budget read holds
        rows = yield from _run_claim(takeover, {**params, **claim_head(rows[0]).lapse})
    if not rows:
        yield from missing_or_conflict(actor, todo_id, "That todo is not claimable now.")
    claimed = yield from claimed_from_rows(rows[0], token, params)
    if claimed is not None and not actor.is_agent:
        yield from event(
            EventKind.CLAIM, todo_id, actor=actor, detail={"attempt_seq": claimed.attempt_seq}
        )
    return claimed, claimed is not None


def _run_claim(statement, params: dict) -> Plan[list]:
    """Run a claim statement until its snapshot agrees with the row it locked (see
    queues/sql/claim.py); return its rows (each starting with CLAIM_HEAD). A keyed claim
    that the key's limit refused (another claim of its key committed after this statement's
    snapshot) runs again to pick past that key: its one statement, in a savepoint only when
    the claim is inside a transaction (``Fetch.may_fail``). It picks by the limit the
    endpoint has now, read again: the one its process read may have come down since (the
    trigger counts with the database's), and the same pick would be refused again."""
    for _ in range(MAX_STALE_SNAPSHOT_RETRIES):
        if statement is sql.CLAIM_NEXT_KEYED:
            try:
                rows = yield Fetch(statement, params, may_fail=True)
            except DatabaseError as exc:
                if not key_refused(exc):
                    raise
                [(limit,)] = yield Fetch(sql.KEY_LIMIT_OF_ENDPOINT, params)
                if limit is None:  # no longer limited: the plain pick
                    statement = sql.CLAIM_NEXT
                else:
                    params = {**params, "max_per_key": limit}
                continue
        else:
            rows = yield Fetch(statement, params)
        if not rows or rows[0][0]:
            return rows
    raise Conflict("That todo kept changing under the claim; try again.")


def key_refused(exc: BaseException) -> bool:
    """Did the trigger todos_waits_follow refuse this claim (its key at the endpoint's limit)?"""
    return getattr(exc.__cause__, "sqlstate", None) == KEY_REFUSED or (
        getattr(exc, "sqlstate", None) == KEY_REFUSED
    )


def under_capacity(actor: Actor) -> Plan[bool]:
    """An endpoint with max_claimed: is it under it? Read under its row's lock, held to the
    claim's commit (the caller's transaction), so claims of that endpoint take turns; an
    endpoint without one pays nothing."""
    endpoint = actor.endpoint
    if endpoint is None or endpoint.max_claimed is None:
        return True
    [(claimed,)] = yield Fetch(sql.CLAIMED_OF_ENDPOINT, {"endpoint_id": endpoint.pk})
    return claimed < endpoint.max_claimed
