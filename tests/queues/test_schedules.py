"""Schedules (queues/schedules.py): adding, editing, pausing, resuming and removing one, who may,
what is refused, the audit rows; and the sweeper's step, fire_due: one todo per slot (with
three sweepers at once too), catch_up, paused and revoked schedules."""

from __future__ import annotations

import re
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db.models import Case, When
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from switchboard.queues import cron, endpoints, schedules, sql, sweeper, teams, transitions
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import EventKind, Membership, Schedule, Todo, TodoEvent
from switchboard.queues.schedules import OPERATOR
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    ADDED_PAUSED_RESUMED_REMOVED,
    run_together,
    schedule_audit,
    wait_for,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def nightly():
    """Add a schedule (by the operator unless ``by``), every night at 02:00 in Berlin unless
    told otherwise."""

    def add(endpoint, *, by=OPERATOR, **fields):
        values = {
            "name": "nightly",
            "cron": "0 2 * * *",
            "timezone": "Europe/Berlin",
            "title_template": "Triage for {date}",
        }
        return schedules.add(endpoint, by=by, **(values | fields))

    return add


def _catching_up(endpoint, **when) -> Schedule:
    """A schedule that makes a todo for its latest missed slot only, run ``when`` says (its
    ``interval_seconds`` or its ``cron``)."""
    return schedules.add(
        endpoint, by=OPERATOR, name="poll", title_template="Poll", catch_up="latest", **when
    )


def hourly_half_an_hour_away() -> str:
    """An hourly cron whose slots fall half an hour from now: its latest slot stays missed, and
    its next to come, however long the test takes. (At "0 * * * *", a run in the first minute
    of an hour found that hour's slot just due: made, as it should be, and the test failed.)"""
    return f"{(timezone.now().minute + 30) % 60} * * * *"


def make_due(schedule: Schedule, ago: timedelta) -> datetime:
    """Move its next slot to ``ago`` before now (on its own grid for a cron: the latest slot at
    least ``ago`` ago) and return it."""
    slot = timezone.now() - ago
    if schedule.cron:
        slot = _slot_at_or_before(schedule, slot)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=slot)
    return slot


def _slot_at_or_before(schedule: Schedule, moment: datetime) -> datetime:
    expression, zone = cron.parse(schedule.cron), cron.zone(schedule.timezone)
    found = cron.next_after(expression, zone, moment - timedelta(days=8))
    if found > moment:  # a sparse one: look back a year
        found = cron.next_after(expression, zone, moment - timedelta(days=400))
    while (after := cron.next_after(expression, zone, found)) <= moment:
        found = after
    return found


def events(kind: EventKind) -> list[TodoEvent]:
    return list(TodoEvent.objects.filter(kind=kind).order_by("id"))


# ---------------------------------------------------------------------------------------
# Adding


def test_a_cron_schedule_runs_first_at_its_next_due_time(endpoint, nightly, user):
    before = timezone.now()

    schedule = nightly(endpoint, by=user)

    expected = cron.next_after("0 2 * * *", "Europe/Berlin", before)
    assert schedule.next_run_at == expected
    assert schedule.next_run_at.astimezone(cron.zone("Europe/Berlin")).hour == 2
    assert schedule.created_by == user and schedule.paused_at is None
    [row] = events(EventKind.SCHEDULE_ADD)
    assert (row.team_id, row.actor_user_id, row.todo_id) == (endpoint.team_id, user.pk, None)
    assert row.detail == {
        "agent_id": endpoint.agent_id,
        "schedule": "nightly",
        "schedule_id": schedule.pk,
        "cron": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "catch_up": "none",
    }


def test_an_interval_schedule_runs_first_one_interval_from_now(endpoint):
    before = timezone.now()

    schedule = schedules.add(
        endpoint, by=OPERATOR, name="poll", interval_seconds=600, title_template="Poll"
    )

    assert before + timedelta(seconds=600) <= schedule.next_run_at
    assert schedule.next_run_at <= timezone.now() + timedelta(seconds=600)
    assert schedule.cron == "" and schedule.timezone == "UTC"
    assert events(EventKind.SCHEDULE_ADD)[0].detail["by"] == "operator"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "0 25 * * *"}, "cron's hour field: 25 is outside 0-23"),
        ({"cron": "0 9 * *"}, "must have five fields"),
        ({"timezone": "Europe/Atlantis"}, "Unknown time zone 'Europe/Atlantis'"),
        ({"cron": "", "interval_seconds": 59}, "interval_seconds must be"),
        ({"interval_seconds": 600}, "either cron (5 fields) or interval_seconds, not both"),
        ({"cron": ""}, "either cron (5 fields) or interval_seconds"),
        ({"name": ""}, "name must be a non-empty string"),
        ({"name": "x" * 101}, "at most 100 characters"),
        ({"title_template": "  "}, "must make a non-empty title"),
        ({"title_template": "x" * 495 + "{date}"}, "makes a title over 500 characters"),
        ({"title_template": "Run {__class__}"}, "unknown placeholder {__class__}"),
        ({"body_template": "{0}"}, "body_template: unknown placeholder {0}"),
        ({"body_template": "x" * (64 * 1024 + 1)}, "makes a body over 65536 bytes"),
        ({"catch_up": "all"}, "catch_up must be one of: none, latest"),
        ({"priority": 101}, "priority"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"colour": "red"}, "Unknown schedule fields: colour"),
    ],
)
def test_a_bad_field_is_refused_with_what_is_wrong(endpoint, nightly, fields, message):
    with pytest.raises(Invalid, match=re.escape(message)):
        nightly(endpoint, **fields)

    assert not Schedule.objects.exists()
    assert not events(EventKind.SCHEDULE_ADD)


def test_a_second_schedule_of_the_same_name_on_an_endpoint_is_a_conflict(endpoint, nightly):
    nightly(endpoint)

    with pytest.raises(Conflict, match="already has a schedule named 'nightly'"):
        nightly(endpoint, cron="0 3 * * *")

    assert Schedule.objects.count() == 1


def test_a_person_outside_the_team_cannot_add_one(endpoint, nightly, make_user):
    with pytest.raises(NotFound, match="No such endpoint"):
        nightly(endpoint, by=make_user("mallory"))

    assert not Schedule.objects.exists()


def test_a_revoked_endpoint_cannot_have_a_schedule(endpoint, nightly):
    transitions.revoke_endpoint(None, endpoint)
    endpoint.refresh_from_db()

    with pytest.raises(Conflict, match="revoked"):
        nightly(endpoint)


def test_json_braces_in_a_body_are_left_alone(endpoint, nightly):
    schedule = nightly(endpoint, body_template='{"repo": "cairn", "day": "{date}"}')
    slot = datetime(2026, 12, 6, 23, 30, tzinfo=UTC)  # already the 7th in Berlin

    body = schedules.render(schedule.body_template, name="n", slot=slot, zone="Europe/Berlin")

    assert body == '{"repo": "cairn", "day": "2026-12-07"}'


# ---------------------------------------------------------------------------------------
# Seeing, editing, pausing, resuming, removing


def test_another_teams_schedule_answers_like_an_unknown_one(endpoint, nightly, make_user):
    schedule = nightly(endpoint)
    mallory = make_user("mallory")  # her own personal team only

    for schedule_id in (schedule.pk, schedule.pk + 1000):
        for act in (
            lambda i: schedules.get(i, by=mallory),
            lambda i: schedules.edit(i, by=mallory, priority=5),
            lambda i: schedules.pause(i, by=mallory),
            lambda i: schedules.resume(i, by=mallory),
            lambda i: schedules.remove(i, by=mallory),
        ):
            with pytest.raises(NotFound) as caught:
                act(schedule_id)
            assert caught.value.message == "No such schedule."

    assert list(schedules.visible(mallory)) == []
    schedule.refresh_from_db()
    assert schedule.priority == 0 and schedule.paused_at is None
    assert TodoEvent.objects.filter(kind__startswith="schedule_").count() == 1  # the add


@pytest.mark.parametrize("nobody", [None, AnonymousUser()])
def test_no_one_signed_in_sees_or_adds_any(endpoint, nightly, nobody):
    schedule = nightly(endpoint)
    # A team with no member: a None taken for a person would match its schedules.
    lonely = teams.get_or_create_team("lonely", name="Lonely")
    lonely_endpoint, _ = endpoints.vend(lonely, "alone")
    nightly(lonely_endpoint)

    assert list(schedules.visible(nobody)) == []
    with pytest.raises(NotFound):
        schedules.pause(schedule.pk, by=nobody)
    with pytest.raises(NotFound, match="No such endpoint"):
        nightly(endpoint, by=nobody, name="another")


def test_a_member_of_the_team_sees_and_changes_it(endpoint, nightly, team, make_user):
    bob = make_user("bob")
    Membership.objects.create(team=team, user=bob)
    schedule = nightly(endpoint)

    assert schedules.get(str(schedule.pk), by=bob) == schedule
    assert schedules.pause(schedule.pk, by=bob) is True


def test_editing_the_cron_starts_again_from_now_and_is_audited(endpoint, nightly, user):
    schedule = nightly(endpoint)

    edited = schedules.edit(schedule.pk, by=user, cron="30 7 * * MON-FRI", priority=3)

    assert (edited.cron, edited.priority) == ("30 7 * * MON-FRI", 3)
    local = edited.next_run_at.astimezone(cron.zone("Europe/Berlin"))
    assert (local.hour, local.minute) == (7, 30) and local.isoweekday() <= 5
    [row] = events(EventKind.SCHEDULE_EDIT)
    assert row.actor_user_id == user.pk
    assert row.detail["changed"] == ["cron", "priority"]
    assert row.detail["cron"] == "30 7 * * MON-FRI"


def test_an_interval_replaces_the_cron_and_a_template_change_keeps_the_next_slot(endpoint, nightly):
    schedule = nightly(endpoint)
    same_slot = schedules.edit(schedule.pk, by=OPERATOR, title_template="Nightly {name}")

    switched = schedules.edit(schedule.pk, by=OPERATOR, interval_seconds=3600)

    assert same_slot.next_run_at == schedule.next_run_at
    assert (switched.cron, switched.interval_seconds) == ("", 3600)
    changed = [row.detail["changed"] for row in events(EventKind.SCHEDULE_EDIT)]
    assert changed == [["title_template"], ["cron", "interval_seconds"]]


def test_an_edit_that_changes_nothing_writes_no_row(endpoint, nightly):
    schedule = nightly(endpoint)

    schedules.edit(schedule.pk, by=OPERATOR, cron="0 2 * * *", priority=0)

    assert not events(EventKind.SCHEDULE_EDIT)


def test_an_edit_to_a_taken_name_is_a_conflict(endpoint, nightly):
    nightly(endpoint)
    other = nightly(endpoint, name="weekly", cron="0 2 * * SUN")

    with pytest.raises(Conflict, match="already has a schedule named 'nightly'"):
        schedules.edit(other.pk, by=OPERATOR, name="nightly")

    assert not events(EventKind.SCHEDULE_EDIT)


def test_pause_resume_and_remove_are_each_audited_once(endpoint, nightly, user, make_todo):
    schedule = nightly(endpoint)

    assert schedules.pause(schedule.pk, by=user) is True
    assert schedules.pause(schedule.pk, by=user) is False  # already: nothing written
    assert schedules.upcoming(Schedule.objects.get(pk=schedule.pk)) == []
    assert schedules.resume(schedule.pk, by=user) is True
    assert schedules.resume(schedule.pk, by=user) is False
    schedules.remove(schedule.pk, by=user)

    assert not Schedule.objects.exists()
    assert schedule_audit() == ADDED_PAUSED_RESUMED_REMOVED


def test_removing_a_schedule_keeps_the_todos_it_made(endpoint, nightly):
    schedule = nightly(endpoint, catch_up="latest")
    slot = make_due(schedule, timedelta(seconds=5))
    [fired] = schedules.fire_due()

    schedules.remove(schedule.pk, by=OPERATOR)

    todo = Todo.objects.get(pk=fired.todo_id)
    assert (todo.schedule_id, todo.scheduled_for) == (None, slot)


def test_upcoming_lists_the_next_slots(endpoint, nightly):
    schedule = nightly(endpoint)

    slots = schedules.upcoming(schedule, 3)

    assert slots[0] == schedule.next_run_at
    assert [s - slots[0] for s in slots[1:]] in (
        [timedelta(days=1), timedelta(days=2)],
        # across a clock change a Berlin night is 23 or 25 hours
        *[[timedelta(days=1, hours=h), timedelta(days=2, hours=h)] for h in (-1, 1)],
        [timedelta(days=1), timedelta(days=2, hours=-1)],
        [timedelta(days=1), timedelta(days=2, hours=1)],
    )


# ---------------------------------------------------------------------------------------
# Firing


def test_a_due_slot_makes_one_todo_from_the_templates(endpoint, nightly):
    schedule = nightly(
        endpoint,
        title_template="Triage for {date}",
        body_template="{name} at {scheduled_for}",
        priority=7,
        max_attempts=2,
        catch_up="latest",  # its slot is the last 02:00 in Berlin, hours ago
    )
    slot = make_due(schedule, timedelta(seconds=5))

    [fired] = schedules.fire_due()
    again = schedules.fire_due()

    todo = Todo.objects.get(pk=fired.todo_id)
    local = slot.astimezone(cron.zone("Europe/Berlin"))
    assert todo.title == f"Triage for {local.date().isoformat()}"
    assert todo.body == f"nightly at {local.isoformat()}"
    assert (todo.priority, todo.max_attempts, todo.state) == (7, 2, "pending")
    assert (todo.endpoint_id, todo.requester_id, todo.created_by_id) == (endpoint.pk, None, None)
    assert (todo.schedule_id, todo.scheduled_for) == (schedule.pk, slot)
    schedule.refresh_from_db()
    assert (schedule.last_run_at, schedule.last_todo_id) == (slot, todo.id)
    assert schedule.next_run_at == cron.next_after("0 2 * * *", "Europe/Berlin", slot)
    assert schedule.next_run_at > timezone.now()
    assert again == []
    assert Todo.objects.count() == 1
    assert not TodoEvent.objects.filter(kind="create").exists()  # the sweeper acts for nobody


def test_a_slot_whose_todo_exists_makes_no_second_one(endpoint, nightly):
    schedule = nightly(endpoint, catch_up="latest")
    slot = make_due(schedule, timedelta(seconds=5))
    transitions.create_todo(
        Actor(), endpoint=endpoint, title="made already", schedule_slot=(schedule.pk, slot)
    )

    [fired] = schedules.fire_due()

    assert (fired.todo_id, fired.slot) == (None, None)
    assert Todo.objects.count() == 1
    schedule.refresh_from_db()
    assert schedule.next_run_at > timezone.now()  # moved on all the same


def test_a_second_create_of_one_slot_is_a_conflict_and_writes_nothing(endpoint, nightly):
    schedule = nightly(endpoint, catch_up="latest")
    slot = make_due(schedule, timedelta(seconds=5))
    create = partial(transitions.create_todo, Actor(), endpoint=endpoint, title="slot")
    create(schedule_slot=(schedule.pk, slot))

    with pytest.raises(Conflict, match="schedule slot has its todo already"):
        create(schedule_slot=(schedule.pk, slot))

    assert Todo.objects.count() == 1


def test_a_slots_todo_is_the_todo_create_todo_makes_for_a_slot(endpoint, nightly):
    schedule = nightly(endpoint, catch_up="latest", title_template="Nightly", priority=3)
    slot = make_due(schedule, timedelta(seconds=5))
    by_create, _ = transitions.create_todo(
        Actor(),
        endpoint=endpoint,
        title="Nightly",
        priority=3,
        schedule_slot=(schedule.pk, slot - timedelta(days=1)),
    )

    [fired] = schedules.fire_due()

    differ = {"id", "created_at", "updated_at", "scheduled_for"}
    made, other = (
        {k: v for k, v in row.items() if k not in differ}
        for row in Todo.objects.filter(pk__in=[fired.todo_id, by_create.id])
        .order_by(Case(When(pk=fired.todo_id, then=0), default=1))
        .values()
    )
    assert made == other


def test_the_slot_insert_writes_the_columns_of_every_new_todo():
    def columns(statement) -> list[str]:
        listed = re.search(r"INSERT INTO todos \(([^)]*)\)", statement.text).group(1)
        return [name.strip() for name in listed.split(",")]

    assert columns(sql.INSERT_SLOT_TODOS) == columns(sql.INSERT_TODO)


def test_a_slot_whose_todo_breaks_the_bounds_is_skipped_not_retried(endpoint, nightly):
    schedule = nightly(endpoint, catch_up="latest")
    make_due(schedule, timedelta(seconds=5))
    Schedule.objects.filter(pk=schedule.pk).update(title_template=" ")  # past the checks

    [fired] = schedules.fire_due()

    assert (fired.slot, fired.todo_id) == (None, None)
    assert not Todo.objects.exists()
    schedule.refresh_from_db()
    assert schedule.next_run_at > timezone.now()


def test_catch_up_none_skips_missed_slots_to_the_next_to_come(endpoint):
    schedule = schedules.add(
        endpoint,
        by=OPERATOR,
        name="hourly",
        cron=hourly_half_an_hour_away(),
        title_template="{scheduled_for}",
    )
    make_due(schedule, timedelta(hours=5))

    [fired] = schedules.fire_due()

    assert (fired.slot, fired.todo_id) == (None, None)
    assert not Todo.objects.exists()
    schedule.refresh_from_db()
    assert timezone.now() < schedule.next_run_at <= timezone.now() + timedelta(hours=1)
    assert schedule.last_run_at is None


def test_catch_up_none_still_makes_a_slot_found_a_little_late(endpoint):
    schedule = schedules.add(
        endpoint, by=OPERATOR, name="poll", interval_seconds=600, title_template="Poll"
    )
    slot = make_due(schedule, schedules.missed_after() - timedelta(seconds=10))

    [fired] = schedules.fire_due()

    assert fired.slot == slot and fired.todo_id is not None


def test_catch_up_latest_makes_one_todo_for_the_latest_missed_slot(endpoint):
    schedule = _catching_up(endpoint, cron=hourly_half_an_hour_away())
    make_due(schedule, timedelta(hours=5))
    latest = _slot_at_or_before(schedule, timezone.now())

    [fired] = schedules.fire_due()

    assert fired.slot == latest
    assert list(Todo.objects.values_list("scheduled_for", flat=True)) == [latest]
    schedule.refresh_from_db()
    assert schedule.next_run_at == latest + timedelta(hours=1)


def test_catch_up_latest_finds_a_slot_missed_long_ago(endpoint):
    schedule = _catching_up(endpoint, cron="0 0 1 1 *")  # every new year
    make_due(schedule, timedelta(days=3 * 366))  # three new years missed
    latest = _slot_at_or_before(schedule, timezone.now())

    [fired] = schedules.fire_due()

    assert fired.slot == latest and latest.month == 1
    assert timezone.now() - latest < timedelta(days=367)


def test_an_interval_keeps_its_phase_when_found_late(endpoint):
    schedule = _catching_up(endpoint, interval_seconds=60)
    first = make_due(schedule, timedelta(seconds=150))

    [fired] = schedules.fire_due()

    assert fired.slot == first + timedelta(seconds=120)
    schedule.refresh_from_db()
    assert schedule.next_run_at == first + timedelta(seconds=180)


def test_a_paused_schedule_makes_nothing_and_resuming_skips_what_it_paused_over(endpoint):
    schedule = _catching_up(endpoint, interval_seconds=60)
    schedules.pause(schedule.pk, by=OPERATOR)
    first = make_due(schedule, timedelta(seconds=150))

    assert schedules.fire_due() == []
    schedules.resume(schedule.pk, by=OPERATOR)

    assert schedules.fire_due() == []
    assert not Todo.objects.exists()
    schedule.refresh_from_db()
    assert schedule.next_run_at == first + timedelta(seconds=180)  # the same grid, ahead


def test_a_revoked_endpoints_schedule_makes_nothing_and_wakes_no_one(endpoint, nightly):
    schedule = nightly(endpoint, catch_up="latest")
    transitions.revoke_endpoint(None, endpoint)
    make_due(schedule, timedelta(seconds=5))

    assert schedules.fire_due() == []
    assert schedules.seconds_until_due() is None
    assert not Todo.objects.exists()


def test_the_sweeper_wakes_for_the_next_slot(endpoint):
    assert schedules.seconds_until_due() is None
    schedules.add(endpoint, by=OPERATOR, name="poll", interval_seconds=90, title_template="P")

    due_in = schedules.seconds_until_due()

    assert due_in is not None and 80 < due_in <= 90


def test_a_sweep_pass_makes_the_due_slots_todos(endpoint, nightly):
    schedule = nightly(endpoint, catch_up="latest")
    make_due(schedule, timedelta(seconds=1))

    report = sweeper.sweep_once()

    assert report.scheduled == 1
    assert Todo.objects.get().schedule_id == schedule.pk


# ---------------------------------------------------------------------------------------
# Several sweepers at once

SCHEDULES = 200


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_three_sweepers_make_exactly_one_todo_per_slot_of_two_hundred_schedules(team):
    endpoint, _ = endpoints.vend(team, "nightly-agent")
    due = timezone.now() - timedelta(seconds=2)
    first: dict[int, datetime] = {}
    for n in range(SCHEDULES):
        schedule = schedules.add(
            endpoint,
            by=OPERATOR,
            name=f"s{n}",
            cron="* * * * *" if n % 2 else "",
            interval_seconds=None if n % 2 else 60,
            title_template="{name} {scheduled_for}",
        )
        slot = due if schedule.interval_seconds else due.replace(second=0, microsecond=0)
        Schedule.objects.filter(pk=schedule.pk).update(next_run_at=slot)
        first[schedule.pk] = slot
    made: dict[int, list[schedules.Fired]] = {}

    def sweep(n: int) -> None:
        made[n] = [f for f in schedules.fire_due(batch=10) if f.todo_id is not None]

    assert run_together(sweep, 3) == []
    ended = timezone.now()

    fired = [f for each in made.values() for f in each]
    assert sum(1 for each in made.values() if each) > 1  # they really split the work
    # Each slot made once, by one sweeper. While no later slot comes due, that is each
    # schedule's first slot, exactly. A sweep that runs into the next minute (a newcomer's run
    # did: 230 todos) finds the every-minute schedules' next slot due as well: one already
    # swept makes it too, one not yet swept makes only that one (catch_up "latest"). Either
    # way a schedule's slots are a minute apart, none after the sweepers' end, and its next
    # run the minute after its last.
    slots = Counter(Todo.objects.values_list("schedule_id", "scheduled_for"))
    assert set(slots.values()) == {1}
    assert Counter((f.schedule_id, f.slot) for f in fired) == slots
    kept = {s.pk: s.next_run_at for s in Schedule.objects.all()}
    for pk, slot in first.items():
        mine = sorted(at for schedule_id, at in slots if schedule_id == pk)
        assert mine and slot <= mine[0] and mine[-1] <= ended, (pk, slot, mine, ended)
        assert mine == [mine[0] + timedelta(minutes=k) for k in range(len(mine))], (pk, mine)
        assert kept[pk] == mine[-1] + timedelta(minutes=1), (pk, kept[pk], mine)
        if slot + timedelta(minutes=1) > ended:
            assert mine == [slot], (pk, mine)
    newest = {}  # each schedule's todo of its latest slot: its last_todo
    for todo_id, schedule_id in Todo.objects.order_by("scheduled_for").values_list(
        "id", "schedule_id"
    ):
        newest[schedule_id] = todo_id
    assert dict(Schedule.objects.values_list("pk", "last_todo_id")) == newest


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_three_sweep_passes_at_once_make_each_slot_once(team):
    endpoint, _ = endpoints.vend(team, "nightly-agent")
    other = teams.get_or_create_team("platform", name="Platform")
    elsewhere, _ = endpoints.vend(other, "nightly-agent")
    for queue in (endpoint, elsewhere):
        for n in range(30):
            schedule = schedules.add(
                queue, by=OPERATOR, name=f"s{n}", interval_seconds=60, title_template="{name}"
            )
            make_due(schedule, timedelta(seconds=1))
    reports: dict[int, sweeper.SweepReport] = {}

    def sweep(n: int) -> None:
        reports[n] = sweeper.sweep_once()

    assert run_together(sweep, 3) == []

    assert sum(r.scheduled for r in reports.values()) == 60
    assert Todo.objects.count() == 60
    assert Todo.objects.filter(endpoint=elsewhere).count() == 30


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_sweeper_between_passes_wakes_for_the_next_slot(team):
    """With a minute between passes, a slot a few seconds off is made long before the next
    pass would come."""
    endpoint, _ = endpoints.vend(team, "poller")
    schedule = schedules.add(
        endpoint, by=OPERATOR, name="poll", interval_seconds=60, title_template="Poll"
    )
    slot = timezone.now() + timedelta(seconds=3)
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=slot)
    stop = threading.Event()
    loop = threading.Thread(target=sweeper.run_forever, args=(60, stop))
    loop.start()  # its first pass comes at once, before the slot; the next in a minute
    try:
        made = wait_for(lambda: Todo.objects.filter(schedule=schedule).exists(), seconds=30)
    finally:
        stop.set()
        loop.join(timeout=30)

    assert made
    assert Todo.objects.get().scheduled_for == slot


# ---------------------------------------------------------------------------------------
# The latest slot found late, however long ago (fire_due's skip ahead), against a plain walk


@settings(max_examples=60, deadline=None)
@given(
    text=st.sampled_from(
        [
            "* * * * *",
            "*/7 * * * *",
            "0 * * * *",
            "30 2 * * *",
            "0 9 * * MON-FRI",
            "0 0 1 * *",
            "0 0 29 2 *",
            "15 3 13 * FRI",
        ]
    ),  # fmt: skip
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]),
    start=st.integers(0, 2 * 365 * 86400),
    late=st.integers(0, 3 * 365 * 86400),
)
def test_the_latest_slot_and_the_next_are_what_walking_every_slot_finds(text, zone, start, late):
    first = cron.next_after(text, zone, datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=start))
    now = first + timedelta(seconds=late)
    schedule = Schedule(cron=text, timezone=zone, next_run_at=first)
    walked = first
    if late <= 40 * 86400 or text not in ("* * * * *", "*/7 * * * *"):
        while (after := cron.next_after(text, zone, walked)) <= now:
            walked = after

        assert schedules._latest_and_next(schedule, now) == (walked, after)
