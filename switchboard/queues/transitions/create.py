"""Creating work: a todo on an endpoint's queue, by the endpoint itself, another endpoint of
its team (an agent-to-agent send, the sender recorded as requester) or a person."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from switchboard.queues import bounds, sql
from switchboard.queues.arguments import instant, whole_number
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, Invalid
from switchboard.queues.models import Endpoint, EventKind, TodoState, WaitingFor
from switchboard.queues.records import TodoRecord
from switchboard.queues.transitions._common import (
    Actor,
    check_active,
    event,
    read_todo,
    ring,
    transition,
)
from switchboard.queues.transitions.waits import (
    Waits,
    check_parent,
    count_child,
    existing_of_key,
    prepare_create,
    prerequisites,
    record_edges,
)


@transition
def create_todo(
    actor: Actor,
    *,
    endpoint: Endpoint | None = None,
    title: str,
    body: str = "",
    priority: int = 0,
    max_attempts: int | None = None,
    not_before: datetime | None = None,
    idempotency_key: str | None = None,
    after: list[int] | None = None,
    after_policy: str | None = None,
    parent: int | None = None,
    key: str | None = None,
    unique_while_active: bool = False,
    schedule_slot: tuple[int, datetime] | None = None,
) -> Plan[tuple[TodoRecord, bool]]:
    """Put a todo on ``endpoint``'s queue (an agent's own, without one): by that endpoint, by
    another endpoint of its team (an agent-to-agent send: the sender is the requester) or by
    a person (audited). Returns (todo, created). The same idempotency key from the same
    sender (the requester, or none: the endpoint itself or a person) on the same queue
    returns the existing todo with created False; keys are scoped by sender, so a sender
    only ever gets back a todo it made.

    Issue 44 (queues/transitions/waits.py): ``after`` (todo ids of the team) makes it wait
    until they are done (``after_policy``); ``parent`` (a todo the caller holds) makes it
    that todo's child; ``key`` is what the endpoint's per-key limit counts, and with
    ``unique_while_active`` a todo of the same key not yet ended is returned instead (created
    False). ``schedule_slot`` (schedule id and due time) makes it that slot's
    one todo, as the sweeper's ``make_slot_todos`` does in bulk (tests hold the two rows
    alike): a second create of the slot is a Conflict, and writes nothing."""
    if endpoint is None:
        if actor.endpoint is None:
            raise Invalid("A person creates a todo on an endpoint's queue: name the endpoint.")
        endpoint = actor.endpoint
    check_active(endpoint)
    waits = prepare_create(
        after=after,
        after_policy=after_policy,
        parent=parent,
        key=key,
        unique_while_active=unique_while_active,
    )
    requester = actor.endpoint if actor.endpoint not in (None, endpoint) else None
    created_by = actor.user
    if requester is not None:
        check_active(requester)
    params = {
        "endpoint_id": endpoint.pk,
        "requester_id": requester.pk if requester is not None else None,
        "created_by_id": created_by.pk if created_by is not None else None,
        "title": _title(title),
        "body": _body(body),
        "priority": whole_number(priority, "priority", bounds.PRIORITY_MIN, bounds.PRIORITY_MAX),
        "max_attempts": whole_number(
            settings.SWITCHBOARD_MAX_ATTEMPTS if max_attempts is None else max_attempts,
            "max_attempts",
            1,
            bounds.MAX_ATTEMPTS_MAX,
        ),
        "not_before": _not_before(not_before, by_agent=actor.is_agent),
        "idempotency_key": _key(idempotency_key),
        "state": TodoState.PENDING,
        "waiting_for": "",
        "after_policy": waits.after_policy,
        "after_total": len(waits.after),
        "after_left": 0,
        "parent_id": waits.parent_id,
        "key": waits.key,
        "schedule_id": schedule_slot[0] if schedule_slot else None,
        "scheduled_for": schedule_slot[1] if schedule_slot else None,
    }
    return (yield Atomic(_create(actor, params, waits, endpoint, created_by)))


def _create(
    actor: Actor, params: dict, waits: Waits, endpoint: Endpoint, created_by
) -> Plan[tuple[TodoRecord, bool]]:
    if params["idempotency_key"] is not None:
        existing = yield from _by_key(params)
        if existing is not None:
            return existing, False
    if waits.unique_while_active:
        existing = yield from existing_of_key(endpoint.pk, waits)
        if existing is not None:
            return existing, False
    if waits.parent_id is not None:
        yield from check_parent(actor, endpoint.team_id, waits.parent_id)
    ended: list[str] = []
    if waits.after:
        ended, left = yield from prerequisites(endpoint.team_id, waits)
        if left:
            params |= {"state": TodoState.WAITING, "waiting_for": WaitingFor.TODOS}
        params["after_left"] = left
    rows = yield Fetch(sql.INSERT_TODO, params)
    if not rows:  # a concurrent create with the same key won (ON CONFLICT DO NOTHING)
        if params["schedule_id"] is not None:  # the slot's todo was made already
            raise Conflict("That schedule slot has its todo already.")
        winner = yield from _by_key(params)
        if winner is None:  # the conflicting row is not this sender's: cannot happen
            raise Conflict("A todo with that idempotency key changed under this create.")
        return winner, False
    todo = TodoRecord.from_row(rows[0])
    if waits.after:
        yield from record_edges(todo.id, waits, ended)
    if waits.parent_id is not None:
        yield from count_child(waits.parent_id)
    if created_by is not None:
        yield from event(
            EventKind.CREATE, todo.id, team_id=endpoint.team_id, actor=Actor.human(created_by)
        )
    # Rung even for a todo held back by not_before (a waiter looks, finds nothing and waits
    # again): deciding here would need a clock other than the database's.
    if todo.state == TodoState.PENDING:
        yield from ring(endpoint.pk)
    return todo, True


def _by_key(params: dict) -> Plan[TodoRecord | None]:
    statement = sql.TODO_BY_OWN_KEY if params["requester_id"] is None else sql.TODO_BY_SENT_KEY
    rows = yield Fetch(statement, params)
    return (yield from read_todo(rows[0][0])) if rows else None


def _title(title) -> str:
    if not isinstance(title, str) or not title.strip():
        raise Invalid("title must be a non-empty string.")
    if len(title) > bounds.TITLE_MAX_CHARS:
        raise Invalid(f"title must be at most {bounds.TITLE_MAX_CHARS} characters.")
    return bounds.storable(title, field="title")


def _body(body) -> str:
    if not isinstance(body, str):
        raise Invalid("body must be a string.")
    body = bounds.storable(body, field="body")
    if len(body) > bounds.BODY_MAX_BYTES or len(body.encode("utf-8")) > bounds.BODY_MAX_BYTES:
        raise Invalid(
            f"body must be at most {bounds.BODY_MAX_BYTES} bytes of UTF-8 (64 KiB); it is "
            "refused, not cut: a cut body would be other work."
        )
    return body


def _not_before(not_before, *, by_agent: bool) -> datetime | None:
    """An agent's is bounded as its snooze is (30 days ahead); a person plans a todo on the
    Board as far ahead as they like."""
    if by_agent:
        return bounds.bound_not_before(not_before)
    return None if not_before is None else instant(not_before, "not_before")


def _key(key) -> str | None:
    if key is not None and (
        not isinstance(key, str) or not 1 <= len(key) <= bounds.IDEMPOTENCY_KEY_MAX_CHARS
    ):
        raise Invalid(
            f"idempotency_key must be a string of 1 to {bounds.IDEMPOTENCY_KEY_MAX_CHARS}"
            " characters."
        )
    return key
