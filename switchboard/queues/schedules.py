"""Schedules: an endpoint's recurring work (issue 44). Adding, editing, pausing, resuming and
removing one (a person of the endpoint's team, or the operator from the command line; every
change audited), and the sweeper's step that makes each due slot's todo (``fire_due``).

A schedule runs on a 5-field cron expression read in its IANA time zone (queues/cron.py says
what the clocks' gaps and repeats do), or every ``interval_seconds`` (at least 60). Each due
time, a *slot*, makes one todo on the endpoint's queue, exactly once however many sweepers
run: the sweeper takes due schedules ``FOR UPDATE SKIP LOCKED`` and moves ``next_run_at`` on
in the transaction that makes the todo, and the todo's slot is unique (``todos_schedule_slot``),
so a slot made twice loses its second insert.

Slots missed while no sweeper ran: a slot is *missed* when it is found more than
``missed_after()`` late (a minute, or two sweep intervals if that is longer). With ``catch_up``
``none`` missed slots make nothing and the schedule goes on from its next slot to come; with
``latest`` the latest missed slot makes one todo. Either way a pass makes at most one todo a
schedule. A pause is deliberate: resuming makes nothing for the slots it paused over.

Templates: the title and body are text in which ``{scheduled_for}`` (the slot in the
schedule's zone, ISO 8601: ``2026-12-07T09:00:00+01:00``), ``{date}`` (its local date,
``2026-12-07``) and ``{name}`` (the schedule's name) are replaced; any other ``{word}`` is
refused when the schedule is saved. Nothing else is interpreted: no expressions, no code.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Min, QuerySet
from django.db.models.functions import Now
from django.utils import timezone

from switchboard.queues import audit, bounds, cron, db, sql
from switchboard.queues.arguments import whole_number
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import CatchUp, Endpoint, EventKind, Membership, Schedule
from switchboard.queues.transitions.schedules import SlotTodo, make_slot_todos

log = logging.getLogger("switchboard.schedules")

NAME_MAX_CHARS = 100
INTERVAL_MIN_SECONDS = 60
INTERVAL_MAX_SECONDS = 366 * 86400
FIRE_BATCH = 25  # small: three sweepers share a crowd of due schedules, and commit sooner
PLACEHOLDERS = ("scheduled_for", "date", "name")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# The fields a schedule is made of, as add and edit take them.
FIELDS = (
    "name",
    "cron",
    "interval_seconds",
    "timezone",
    "title_template",
    "body_template",
    "priority",
    "max_attempts",
    "catch_up",
)
_TIMING = ("cron", "interval_seconds", "timezone")


class _Operator:
    """Who acts from the command line: the operator, in any team (``switchboard schedule``)."""

    def __repr__(self) -> str:
        return "OPERATOR"


OPERATOR = _Operator()


# ---------------------------------------------------------------------------------------
# Reads


def visible(by) -> QuerySet[Schedule]:
    """The schedules ``by`` may see: a person's teams' (of live endpoints and revoked ones
    alike), or every one for the operator."""
    found = Schedule.objects.select_related("endpoint", "endpoint__team")
    if by is OPERATOR:
        return found
    if not _signed_in(by):  # not "the teams with no member", which a None would filter to
        return found.none()
    return found.filter(endpoint__team__memberships__user=by)


def get(schedule_id: object, *, by) -> Schedule:
    """One schedule ``by`` may see; NotFound for an unknown id and another team's alike."""
    found = visible(by).filter(pk=_id(schedule_id)).first()
    if found is None:
        raise NotFound("No such schedule.")
    return found


def upcoming(schedule: Schedule, count: int = 5) -> list[datetime]:
    """Its next ``count`` slots from ``next_run_at`` on (none while paused)."""
    if schedule.paused or schedule.next_run_at is None:
        return []
    slots = [schedule.next_run_at]
    while len(slots) < count:
        after = _next_slot(schedule, slots[-1])
        if after is None:
            break
        slots.append(after)
    return slots


def render(template: str, *, name: str, slot: datetime, zone: str) -> str:
    """A template with its placeholders replaced for ``slot`` (see the module's docstring)."""
    local = slot.astimezone(ZoneInfo(zone))
    values = {"scheduled_for": local.isoformat(), "date": local.date().isoformat(), "name": name}
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)


# ---------------------------------------------------------------------------------------
# Changes (each audited)


def add(endpoint: Endpoint, *, by, **fields: Any) -> Schedule:
    """A new schedule on ``endpoint``'s queue; its first slot is the first due time from
    now. NotFound when ``by`` is a person outside the endpoint's team; Conflict when the
    endpoint is revoked or already has a schedule of that name; Invalid for a bad field."""
    _check_fields(fields)
    if by is not OPERATOR and not (
        _signed_in(by) and Membership.objects.filter(team_id=endpoint.team_id, user=by).exists()
    ):
        raise NotFound("No such endpoint.")
    if endpoint.revoked_at is not None:
        raise Conflict("A revoked endpoint cannot have schedules.")
    values = _checked({**_DEFAULTS, **fields})
    values["next_run_at"] = _first_slot(values, timezone.now())
    try:
        with transaction.atomic():
            schedule = Schedule.objects.create(endpoint=endpoint, created_by=_user(by), **values)
            _record(EventKind.SCHEDULE_ADD, schedule, by, **_timing_detail(schedule))
    except IntegrityError as exc:
        raise Conflict(
            f"Endpoint {endpoint.agent_id} already has a schedule named {values['name']!r}."
        ) from exc
    schedule.endpoint = endpoint
    return schedule


def edit(schedule_id: object, *, by, **changes: Any) -> Schedule:
    """Change some of a schedule's fields. A new cron, interval or zone starts again from
    the first due time from now; a change to the todo it makes applies from its next slot.
    Giving ``interval_seconds`` clears the cron expression, and a cron clears the interval.
    Audited with the fields that changed (nothing changed: no row)."""
    _check_fields(changes)
    if changes.get("interval_seconds") is not None and "cron" not in changes:
        changes["cron"] = ""
    if changes.get("cron") and "interval_seconds" not in changes:
        changes["interval_seconds"] = None
    try:
        with transaction.atomic():
            schedule = _locked(schedule_id, by)
            before = {name: getattr(schedule, name) for name in FIELDS}
            values = _checked({**before, **changes})
            changed = [name for name in FIELDS if values[name] != before[name]]
            if not changed:
                return schedule
            for name in changed:
                setattr(schedule, name, values[name])
            if set(changed) & set(_TIMING):
                schedule.next_run_at = _first_slot(values, timezone.now())
            schedule.updated_at = timezone.now()
            schedule.save(update_fields=[*changed, "next_run_at", "updated_at"])
            detail = {"changed": changed}
            if set(changed) & set(_TIMING):
                detail |= _timing_detail(schedule)
            _record(EventKind.SCHEDULE_EDIT, schedule, by, **detail)
    except IntegrityError as exc:
        raise Conflict(
            f"Endpoint {schedule.endpoint.agent_id} already has a schedule named "
            f"{changes.get('name')!r}."
        ) from exc
    return schedule


def pause(schedule_id: object, *, by) -> bool:
    """Stop making todos until resumed. False when it was already paused."""
    with transaction.atomic():
        schedule = _locked(schedule_id, by)
        if schedule.paused:
            return False
        schedule.paused_at = schedule.updated_at = timezone.now()
        schedule.save(update_fields=["paused_at", "updated_at"])
        _record(EventKind.SCHEDULE_PAUSE, schedule, by)
    return True


def resume(schedule_id: object, *, by) -> bool:
    """Make todos again, from the first due time from now: the slots it paused over make
    nothing, whatever ``catch_up`` says. False when it was not paused."""
    with transaction.atomic():
        schedule = _locked(schedule_id, by)
        if not schedule.paused:
            return False
        now = timezone.now()
        if schedule.interval_seconds and schedule.next_run_at is not None:
            # An interval keeps its phase: the next point of its grid from now.
            step = timedelta(seconds=schedule.interval_seconds)
            if schedule.next_run_at <= now:
                schedule.next_run_at += step * ((now - schedule.next_run_at) // step + 1)
        else:
            schedule.next_run_at = _next_slot(schedule, now)
        schedule.paused_at = None
        schedule.updated_at = now
        schedule.save(update_fields=["paused_at", "next_run_at", "updated_at"])
        _record(EventKind.SCHEDULE_RESUME, schedule, by)
    return True


def remove(schedule_id: object, *, by) -> None:
    """Delete it. The todos it made stay, with their slot (``scheduled_for``); their link to
    it is cleared by the database."""
    with transaction.atomic():
        schedule = _locked(schedule_id, by)
        _record(EventKind.SCHEDULE_REMOVE, schedule, by)
        schedule.delete()


# ---------------------------------------------------------------------------------------
# The sweeper's step


@dataclass(frozen=True, slots=True, kw_only=True)
class Fired:
    """What one due schedule did in a pass: the todo made for ``slot`` (None when the slots
    found were missed, or the todo could not be made), and the schedule's next slot."""

    schedule_id: int
    slot: datetime | None
    todo_id: int | None
    next_run_at: datetime | None


def missed_after() -> timedelta:
    """How late a slot may be found and still be made under ``catch_up: none``."""
    return timedelta(seconds=max(60, 2 * settings.SWITCHBOARD_SWEEP_INTERVAL_SECONDS))


def fire_due(*, batch: int = FIRE_BATCH) -> list[Fired]:
    """Make the todos of every due schedule (not paused, of a live endpoint), a batch at a
    time, each batch one transaction holding its schedules ``FOR UPDATE SKIP LOCKED``:
    several sweepers split the due schedules, and each slot makes one todo."""
    fired: list[Fired] = []
    while True:
        done = _fire_batch(batch)
        fired += done
        if len(done) < batch:
            return fired


def seconds_until_due() -> float | None:
    """Seconds until the next slot of a schedule not yet due (by the database's clock), or
    None when there is none: the sweeper wakes for it. Due ones are being made by a pass."""
    wait = (
        Schedule.objects.filter(
            paused_at__isnull=True, endpoint__revoked_at__isnull=True, next_run_at__gt=Now()
        )
        .aggregate(wait=Min(F("next_run_at") - Now()))
        .get("wait")
    )
    return None if wait is None else max(0.0, wait.total_seconds())


def _fire_batch(batch: int) -> list[Fired]:
    with transaction.atomic():
        due = list(
            Schedule.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                paused_at__isnull=True,
                next_run_at__lte=Now(),
                endpoint__revoked_at__isnull=True,
            )
            .annotate(now=Now())
            .order_by("next_run_at")[:batch]
        )
        if not due:
            return []
        slots: dict[int, datetime | None] = {}
        following: dict[int, datetime | None] = {}
        for schedule in due:
            latest, following[schedule.pk] = _latest_and_next(schedule, schedule.now)
            missed = schedule.now - latest > missed_after()
            slots[schedule.pk] = None if missed and schedule.catch_up == CatchUp.NONE else latest
        result = make_slot_todos(
            [_slot_todo(schedule, slot) for schedule in due if (slot := slots[schedule.pk])]
        )
        for schedule_id, why in result.refused.items():
            # Checked when saved, so only bounds changed since: the slot is skipped, not tried
            # again each pass.
            log.warning("schedule %s made no todo for %s: %s", schedule_id, slots[schedule_id], why)
        fired = [
            Fired(
                schedule_id=schedule.pk,
                slot=slots[schedule.pk] if schedule.pk in result.made else None,
                todo_id=result.made.get(schedule.pk),
                next_run_at=following[schedule.pk],
            )
            for schedule in due
        ]
        db.fetch(
            sql.ADVANCE_SCHEDULES,
            {
                "ids": [f.schedule_id for f in fired],
                "next_run_at": [f.next_run_at for f in fired],
                "last_run_at": [f.slot for f in fired],
                "last_todo_id": [f.todo_id for f in fired],
            },
        )
    return fired


def _slot_todo(schedule: Schedule, slot: datetime) -> SlotTodo:
    def text(template: str) -> str:
        return render(template, name=schedule.name, slot=slot, zone=schedule.timezone)

    return SlotTodo(
        schedule_id=schedule.pk,
        scheduled_for=slot,
        title=text(schedule.title_template),
        body=text(schedule.body_template),
        priority=schedule.priority,
        max_attempts=schedule.max_attempts,
    )


def _latest_and_next(schedule: Schedule, now: datetime) -> tuple[datetime, datetime | None]:
    """The latest slot at or before ``now`` (``next_run_at`` is one) and the first after."""
    first = schedule.next_run_at
    assert first is not None and first <= now
    if schedule.interval_seconds:
        step = timedelta(seconds=schedule.interval_seconds)
        latest = first + step * ((now - first) // step)
        return latest, latest + step
    expression, zone = cron.parse(schedule.cron), cron.zone(schedule.timezone)
    start = first
    # Long missed: start from a slot near now rather than walk every one missed.
    for window in (timedelta(hours=1), timedelta(days=2), timedelta(days=40), timedelta(days=400)):
        if now - window <= first:
            break
        near = cron.next_after(expression, zone, now - window)
        if near is not None and near <= now:
            start = near
            break
    latest = start
    while (after := cron.next_after(expression, zone, latest)) is not None and after <= now:
        latest = after
    return latest, after


def _next_slot(schedule: Schedule, after: datetime) -> datetime | None:
    if schedule.interval_seconds:
        return after + timedelta(seconds=schedule.interval_seconds)
    return cron.next_after(schedule.cron, schedule.timezone, after)


def _first_slot(values: dict, now: datetime) -> datetime | None:
    if values["interval_seconds"]:
        return now + timedelta(seconds=values["interval_seconds"])
    return cron.next_after(values["cron"], values["timezone"], now)


# ---------------------------------------------------------------------------------------
# Checks and helpers

_DEFAULTS: dict[str, Any] = {
    "cron": "",
    "interval_seconds": None,
    "timezone": "UTC",
    "body_template": "",
    "priority": 0,
    "max_attempts": None,
    "catch_up": CatchUp.NONE.value,
}


def _check_fields(fields: dict) -> None:
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise Invalid(f"Unknown schedule fields: {', '.join(unknown)}. Known: {', '.join(FIELDS)}.")


def _checked(values: dict) -> dict:
    """Every field checked, as stored; Invalid names the first one at fault."""
    name = values.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX_CHARS:
        raise Invalid(f"name must be a non-empty string of at most {NAME_MAX_CHARS} characters.")
    if any(ord(c) < 32 for c in name):
        raise Invalid("name must not contain control characters.")
    expression = values.get("cron") or ""
    interval = values.get("interval_seconds")
    if bool(expression) == (interval is not None):
        raise Invalid("Give a schedule either cron (5 fields) or interval_seconds, not both.")
    zone = values.get("timezone") or "UTC"
    cron.zone(zone)
    if expression:
        expression = cron.parse(expression).text
    else:
        interval = whole_number(
            interval, "interval_seconds", INTERVAL_MIN_SECONDS, INTERVAL_MAX_SECONDS
        )
    catch_up = values.get("catch_up")
    if catch_up not in CatchUp.values:
        raise Invalid(f"catch_up must be one of: {', '.join(CatchUp.values)}.")
    max_attempts = values.get("max_attempts")
    if max_attempts is not None:
        max_attempts = whole_number(max_attempts, "max_attempts", 1, bounds.MAX_ATTEMPTS_MAX)
    checked = {
        "name": name,
        "cron": expression,
        "interval_seconds": interval,
        "timezone": zone,
        "title_template": _template(values.get("title_template"), "title_template"),
        "body_template": _template(values.get("body_template", ""), "body_template"),
        "priority": whole_number(
            values.get("priority", 0), "priority", bounds.PRIORITY_MIN, bounds.PRIORITY_MAX
        ),
        "max_attempts": max_attempts,
        "catch_up": catch_up,
    }
    _check_rendered(checked)
    return checked


def _template(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{field} must be a string.")
    bounds.storable(value, field=field)
    unknown = sorted({m.group(1) for m in _PLACEHOLDER.finditer(value)} - set(PLACEHOLDERS))
    if unknown:
        raise Invalid(
            f"{field}: unknown placeholder {{{unknown[0]}}}; known: "
            + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            + "."
        )
    return value


def _check_rendered(values: dict) -> None:
    """The todo a slot makes fits the todo's bounds: a slot's text has a fixed length, so one
    sample slot says it for all."""
    sample = datetime(2026, 12, 31, 23, 59, tzinfo=UTC)
    title = render(
        values["title_template"], name=values["name"], slot=sample, zone=values["timezone"]
    )
    if not title.strip():
        raise Invalid("title_template must make a non-empty title.")
    if len(title) > bounds.TITLE_MAX_CHARS:
        raise Invalid(f"title_template makes a title over {bounds.TITLE_MAX_CHARS} characters.")
    body = render(
        values["body_template"], name=values["name"], slot=sample, zone=values["timezone"]
    )
    if len(body.encode("utf-8")) > bounds.BODY_MAX_BYTES:
        raise Invalid(f"body_template makes a body over {bounds.BODY_MAX_BYTES} bytes of UTF-8.")


def _id(value: object) -> int:
    if isinstance(value, bool):
        raise NotFound("No such schedule.")
    try:
        number = int(str(value))
    except ValueError:
        raise NotFound("No such schedule.") from None
    if not 1 <= number <= 2**63 - 1:
        raise NotFound("No such schedule.")
    return number


def _locked(schedule_id: object, by) -> Schedule:
    """The schedule, locked for a change, in ``by``'s scope (NotFound otherwise)."""
    found = visible(by).select_for_update(of=("self",)).filter(pk=_id(schedule_id)).first()
    if found is None:
        raise NotFound("No such schedule.")
    return found


def _user(by):
    return None if by is OPERATOR else by


def _signed_in(by) -> bool:
    """A person: a user who is signed in (neither None nor the anonymous user)."""
    return by is not None and getattr(by, "is_authenticated", False) is True


def _timing_detail(schedule: Schedule) -> dict:
    timing = (
        {"cron": schedule.cron, "timezone": schedule.timezone}
        if schedule.cron
        else {"interval_seconds": schedule.interval_seconds}
    )
    return {**timing, "catch_up": schedule.catch_up}


def _record(kind: EventKind, schedule: Schedule, by, **detail) -> None:
    audit.record_now(
        kind,
        team_id=schedule.endpoint.team_id,
        user=_user(by),
        detail={
            "agent_id": schedule.endpoint.agent_id,
            "schedule": schedule.name,
            "schedule_id": schedule.pk,
            **({"by": "operator"} if by is OPERATOR else {}),
            **detail,
        },
    )
