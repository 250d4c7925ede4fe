"""Revoking an endpoint: it can no longer authenticate, and its live todos die with reason
``revoked`` (an open attempt closed as revoked)."""

from __future__ import annotations

from switchboard.queues import audit, db, sql
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict
from switchboard.queues.models import Endpoint, EventKind
from switchboard.queues.transitions._common import Actor, event
from switchboard.queues.transitions.decide import Close, decide


def revoke_endpoint(actor: Actor | None, endpoint: Endpoint) -> int:
    """End an endpoint; returns how many of its todos died. Audited, with the person who
    revoked it (a team's owner on the Board, an operator in admin; None: nobody named)."""
    user = actor.user if actor is not None else None
    killed = db.run(_revoke_all(endpoint, user))
    endpoint.refresh_from_db(fields=["revoked_at"])
    return killed


def _revoke_all(endpoint: Endpoint, user) -> Plan[int]:
    return (yield Atomic(_revoke(endpoint, user)))


def _revoke(endpoint: Endpoint, user) -> Plan[int]:
    revoked = yield Fetch(sql.REVOKE_ENDPOINT, {"endpoint_id": endpoint.pk})
    if not revoked:
        raise Conflict("That endpoint is already revoked.")
    killed = yield from _dead_letter_live_todos(endpoint.pk, endpoint.team_id, user=user)
    yield from event(
        EventKind.ENDPOINT_REVOKE,
        None,
        team_id=endpoint.team_id,
        actor=_person(user),
        detail={"agent_id": endpoint.agent_id, "todos_dead_lettered": killed},
    )
    return killed


def dead_letter_revoked_leftovers() -> int:
    """The sweeper's safety net: a claim already in flight when its endpoint was revoked can
    commit after the revocation; such a todo is dead-lettered here. Returns how many."""
    killed = 0
    for endpoint_id, team_id in db.fetch(sql.REVOKED_ENDPOINTS_WITH_LIVE_TODOS, {}):
        killed += db.run(_leftovers(endpoint_id, team_id))
    return killed


def _leftovers(endpoint_id: int, team_id: int) -> Plan[int]:
    return (yield Atomic(_dead_letter_live_todos(endpoint_id, team_id, user=None)))


def _dead_letter_live_todos(endpoint_id: int, team_id: int, *, user) -> Plan[int]:
    close = Close.revoke()
    params = {
        **close.written(),
        **decide(close, None).params(),
        "endpoint_id": endpoint_id,
        "ended_by": None,
        "ended_by_endpoint": None,
    }
    # Until none is left: a claim that committed after this statement's snapshot is invisible
    # to its join (see queues/sql/claim.py), so look again until a pass finds nothing.
    closed = 0
    while rows := (yield Fetch(sql.CLOSE_ALL_OF_ENDPOINT, params)):
        closed += len(rows)
    unclaimed = yield Fetch(sql.DEAD_LETTER_UNCLAIMED_OF_ENDPOINT, {"endpoint_id": endpoint_id})
    yield from audit.record_for_todos(
        EventKind.REVOKE_DEAD_LETTER,
        user=user,
        todo_ids=[todo_id for (todo_id,) in unclaimed],
        details=[{"reason": "endpoint revoked", "open_attempt": False}] * len(unclaimed),
    )
    return closed + len(unclaimed)


def _person(user) -> Actor | None:
    return Actor.human(user) if user is not None else None
