"""The todos schedules make (issue 44): a batch of due slots' todos in one statement, for the
sweeper (queues/schedules.py decides which slots are due and what each todo says).

Each is the todo ``create_todo(..., schedule_slot=...)`` makes for a slot, made by nobody (no
requester, no person, so no audit row), pending at once; a batch is one insert because the
sweeper holds the batch's schedules locked until it commits, and a thousand schedules may be
due in the same second.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from switchboard.queues import bounds, sql
from switchboard.queues.arguments import whole_number
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Invalid
from switchboard.queues.transitions._common import transition
from switchboard.queues.transitions.create import _body, _title


@dataclass(frozen=True, slots=True, kw_only=True)
class SlotTodo:
    """The todo one slot of a schedule asks for."""

    schedule_id: int
    scheduled_for: datetime
    title: str
    body: str
    priority: int
    max_attempts: int | None


@dataclass(frozen=True, slots=True)
class SlotsMade:
    """By schedule id: the todo made for its slot, or why none could be (a todo outside the
    bounds). A slot whose todo was made already is in neither."""

    made: dict[int, int]
    refused: dict[int, str]


@transition
def make_slot_todos(slots: list[SlotTodo]) -> Plan[SlotsMade]:
    """One pending todo for each slot, on its schedule's endpoint, in one transaction; a slot
    that has its todo already (the unique slot, ``todos_schedule_slot``) makes nothing. Each
    endpoint that got a todo has its doorbell rung."""
    refused: dict[int, str] = {}
    rows: list[dict] = []
    for slot in slots:
        try:
            rows.append(_checked(slot))
        except Invalid as exc:
            refused[slot.schedule_id] = exc.message
    made = (yield Atomic(_insert(rows))) if rows else {}
    return SlotsMade(made=made, refused=refused)


def _checked(slot: SlotTodo) -> dict:
    """A slot's todo within the bounds ``create_todo`` holds any todo to."""
    return {
        "schedule_id": slot.schedule_id,
        "scheduled_for": slot.scheduled_for,
        "title": _title(slot.title),
        "body": _body(slot.body),
        "priority": whole_number(
            slot.priority, "priority", bounds.PRIORITY_MIN, bounds.PRIORITY_MAX
        ),
        "max_attempts": whole_number(
            settings.SWITCHBOARD_MAX_ATTEMPTS if slot.max_attempts is None else slot.max_attempts,
            "max_attempts",
            1,
            bounds.MAX_ATTEMPTS_MAX,
        ),
    }


def _insert(rows: list[dict]) -> Plan[dict[int, int]]:
    found = yield Fetch(
        sql.INSERT_SLOT_TODOS,
        {
            "schedule_ids": [r["schedule_id"] for r in rows],
            "scheduled_for": [r["scheduled_for"] for r in rows],
            "titles": [r["title"] for r in rows],
            "bodies": [r["body"] for r in rows],
            "priorities": [r["priority"] for r in rows],
            "max_attempts": [r["max_attempts"] for r in rows],
        },
    )
    endpoint_ids = sorted({endpoint_id for _, _, endpoint_id in found})
    if endpoint_ids:
        yield Fetch(sql.RING_DOORBELLS, {"endpoint_ids": endpoint_ids})
    return {schedule_id: todo_id for todo_id, schedule_id, _ in found}
