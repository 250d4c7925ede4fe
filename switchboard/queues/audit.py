"""The audit trail's one writer: every row of ``todo_events`` is written here, typed by
``EventKind`` (zulip's ``RealmAuditLog(event_type=AuditLogEventType…)`` from its ``do_*``
actions is the model). ``record`` is a plan step, so a transition's audit row is written in
its own transaction, on the sync executor or the async one; ``record_now`` is for the
ledger's sync functions (endpoints, teams), inside their transaction."""

from __future__ import annotations

import json

from switchboard.queues import db, sql
from switchboard.queues.db import Fetch, Plan
from switchboard.queues.models import EventKind


def record(
    kind: EventKind,
    *,
    todo_id: int | None = None,
    team_id: int | None = None,
    user=None,
    endpoint=None,
    detail: dict | None = None,
) -> Plan[None]:
    """One audit row: its team is ``team_id``, else the todo's. ``user`` and ``endpoint``
    are who acted (a person, or a requester endpoint), as objects or ids."""
    if not isinstance(kind, EventKind):
        raise TypeError(f"an audit kind must be an EventKind, not {kind!r}")
    if team_id is None and todo_id is None:
        raise ValueError("an audit row belongs to a team: give team_id or todo_id")
    yield Fetch(
        sql.RECORD_EVENT,
        {
            "kind": kind.value,
            "todo_id": todo_id,
            "team_id": team_id,
            "user_id": getattr(user, "pk", user),
            "endpoint_id": getattr(endpoint, "pk", endpoint),
            "detail": json.dumps(detail or {}),
        },
    )


def record_for_todos(
    kind: EventKind, *, user, todo_ids: list[int], details: list[dict]
) -> Plan[None]:
    """One audit row for each of ``todo_ids`` (a person's act on many todos at once, a
    bulk rerun say), each with its own detail and its todo's team, in one statement."""
    if not isinstance(kind, EventKind):
        raise TypeError(f"an audit kind must be an EventKind, not {kind!r}")
    if len(details) != len(todo_ids):
        raise ValueError("one detail for each todo")
    if not todo_ids:
        return
    yield Fetch(
        sql.RECORD_EVENTS,
        {
            "kind": kind.value,
            "user_id": getattr(user, "pk", user),
            "todo_ids": todo_ids,
            "details": [json.dumps(detail) for detail in details],
        },
    )


def record_now(kind: EventKind, **fields) -> None:
    db.run(record(kind, **fields))
