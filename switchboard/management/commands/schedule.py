"""``switchboard schedule``: an endpoint's schedules from the command line, as the operator:
``add``, ``list``, ``pause``, ``resume``, ``remove`` (queues/schedules.py; every change
audited, as from the Board)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from django.core.management.base import CommandError

from switchboard.management.base import RowCommand
from switchboard.queues import schedules
from switchboard.queues.errors import DomainError
from switchboard.queues.models import CatchUp, Endpoint, Schedule, Team
from switchboard.queues.schedules import OPERATOR


class Command(RowCommand):
    help = (
        "Manage an endpoint's schedules: add (prints only the new schedule's id on stdout), "
        "list, pause, resume, remove. Templates may use {scheduled_for}, {date} and {name}."
    )

    def add_arguments(self, parser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

        add = actions.add_parser("add", help="add a schedule to an endpoint")
        add.add_argument("name", metavar="NAME", help="unique on its endpoint, e.g. nightly")
        add.add_argument("--team", required=True, metavar="SLUG", help="the endpoint's team")
        add.add_argument("--endpoint", required=True, metavar="AGENT_ID", help="whose queue")
        when = add.add_mutually_exclusive_group(required=True)
        when.add_argument("--cron", metavar="'M H DOM MON DOW'", help="e.g. '0 9 * * MON-FRI'")
        when.add_argument("--every", type=int, metavar="SECONDS", help="an interval, >= 60")
        add.add_argument(
            "--timezone", default="UTC", metavar="ZONE", help="the cron's IANA zone [UTC]"
        )
        add.add_argument("--title", required=True, metavar="TEMPLATE", help="the todo's title")
        add.add_argument("--body", default="", metavar="TEMPLATE", help="the todo's body")
        add.add_argument("--priority", type=int, default=0)
        add.add_argument("--max-attempts", type=int, default=None)
        add.add_argument(
            "--catch-up",
            choices=CatchUp.values,
            default=CatchUp.NONE,
            help="missed slots: none skips them, latest makes one todo [none]",
        )

        listing = actions.add_parser("list", help="list schedules, soonest first")
        listing.add_argument("--team", metavar="SLUG", help="only this team's")
        listing.add_argument("--endpoint", metavar="AGENT_ID", help="only this endpoint's")

        for action, what in (
            ("pause", "stop making todos until resumed"),
            ("resume", "make todos again, from the next due time"),
            ("remove", "delete it (the todos it made stay)"),
        ):
            one = actions.add_parser(action, help=what)
            one.add_argument("schedule_id", metavar="ID", help="as `schedule list` shows it")

    def handle(self, *args, action: str, **options) -> None:
        try:
            getattr(self, f"_{action}")(**options)
        except DomainError as exc:
            raise CommandError(exc.message) from exc

    def _add(self, *, name, team, endpoint, cron, every, timezone, title, body, **options):
        found = _endpoint(team, endpoint)
        schedule = schedules.add(
            found,
            by=OPERATOR,
            name=name,
            cron=cron or "",
            interval_seconds=every,
            timezone=timezone,
            title_template=title,
            body_template=body,
            priority=options["priority"],
            max_attempts=options["max_attempts"],
            catch_up=options["catch_up"],
        )
        self.stderr.write(
            f"Schedule {schedule.pk} {schedule.name!r} on {found.agent_id} (team {team}): "
            f"{_when(schedule)}; next run {_at(schedule.next_run_at, schedule.timezone)}."
        )
        self.stdout.write(str(schedule.pk))

    def _list(self, *, team, endpoint, **options):
        found = schedules.visible(OPERATOR).order_by("next_run_at", "pk")
        if team:
            if not Team.objects.filter(slug=team).exists():
                raise CommandError(f"No team with slug {team!r}.")
            found = found.filter(endpoint__team__slug=team)
        if endpoint:
            found = found.filter(endpoint__agent_id=endpoint)
        rows = [
            (
                str(s.pk),
                f"{s.endpoint.team.slug}/{s.endpoint.agent_id}",
                s.name,
                _when(s),
                s.catch_up,
                "paused" if s.paused else _at(s.next_run_at, s.timezone),
                _at(s.last_run_at, s.timezone),
            )
            for s in found
        ]
        if not rows:
            self.stderr.write("No schedules.")
            return
        header = ("ID", "ENDPOINT", "NAME", "WHEN", "CATCH-UP", "NEXT RUN", "LAST RUN")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))

    def _pause(self, *, schedule_id, **options):
        changed = schedules.pause(schedule_id, by=OPERATOR)
        self.stderr.write(f"Schedule {schedule_id} " + ("paused." if changed else "was paused."))

    def _resume(self, *, schedule_id, **options):
        changed = schedules.resume(schedule_id, by=OPERATOR)
        schedule = Schedule.objects.get(pk=schedule_id)
        self.stderr.write(
            f"Schedule {schedule_id} "
            + ("resumed" if changed else "was not paused")
            + f"; next run {_at(schedule.next_run_at, schedule.timezone)}."
        )

    def _remove(self, *, schedule_id, **options):
        schedules.remove(schedule_id, by=OPERATOR)
        self.stderr.write(f"Schedule {schedule_id} removed; the todos it made stay.")


def _endpoint(team: str, agent_id: str) -> Endpoint:
    found = Team.objects.filter(slug=team).first()
    if found is None:
        raise CommandError(f"No team with slug {team!r}.")
    endpoint = Endpoint.objects.filter(team=found, agent_id=agent_id).first()
    if endpoint is None:
        raise CommandError(f"No endpoint {agent_id!r} in team {team!r}.")
    return endpoint


def _when(schedule: Schedule) -> str:
    if schedule.cron:
        return f"{schedule.cron} ({schedule.timezone})"
    return f"every {schedule.interval_seconds} s"


def _at(moment: datetime | None, zone: str) -> str:
    """A time in the schedule's zone, to the minute (most schedules run on minutes)."""
    if moment is None:
        return "-"
    return moment.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z")
