"""Cron expressions: the five fields of Vixie cron (minute, hour, day of month, month, day of
week) and when one next matches in an IANA time zone.

Each field is a comma list of ``*``, a value, a range ``a-b``, and any of those with a step
(``*/15``, ``1-30/2``, ``5/10`` = from 5 to the field's end); months and days of the week also
by name (``JAN``–``DEC``, ``SUN``–``SAT``, either case); Sunday is 0 or 7. ``@hourly``,
``@daily`` (``@midnight``), ``@weekly``, ``@monthly`` and ``@yearly`` (``@annually``) stand
for their five fields. As in Vixie cron, when both the day of month and the day of week are
restricted (neither field starts with ``*``) a day matches when either does; otherwise both
must.

Time zones (``next_after``): the expression is read in local wall-clock time. A local time
that does not exist (the hour skipped when clocks go forward) fires once, at the first instant
after the gap; a local time that happens twice (the hour repeated when clocks go back) fires
once, at its first occurrence.
"""

from __future__ import annotations

import bisect
import calendar
import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from switchboard.queues.errors import Invalid

EXPRESSION_MAX_CHARS = 100
ZONE_MAX_CHARS = 64
# Past this many years without a match an expression is taken never to match. Eight years is
# the longest wait a matching expression can have (the 29th of February, across 2100).
_HORIZON_YEARS = 9

_MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: dict[str, int]


_FIELDS = (
    _Field("minute", 0, 59, {}),
    _Field("hour", 0, 23, {}),
    _Field("day-of-month", 1, 31, {}),
    _Field("month", 1, 12, {name: n for n, name in enumerate(_MONTHS, start=1)}),
    _Field("day-of-week", 0, 7, {name: n for n, name in enumerate(_DAYS)}),
)


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed expression: the values each field allows, sorted."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: tuple[int, ...]
    weekdays: frozenset[int]  # 0 = Sunday … 6 = Saturday
    day_star: bool  # the day-of-month field starts with '*'
    weekday_star: bool

    def matches(self, local: datetime) -> bool:
        """Does this wall-clock time (its minute) match?"""
        return (
            local.minute in self.minutes
            and local.hour in self.hours
            and local.month in self.months
            and self._day_matches(local.date())
        )

    def _day_matches(self, day: date) -> bool:
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.day_star or self.weekday_star:
            return in_month and in_week
        return in_month or in_week  # Vixie: both restricted, either will do

    def next_wall(self, start: datetime) -> datetime | None:
        """The first wall-clock minute at or after ``start`` (naive) that matches, or None
        within the horizon."""
        t = start.replace(second=0, microsecond=0)
        if t < start:
            t += timedelta(minutes=1)
        limit = t.year + _HORIZON_YEARS
        while t.year <= limit:
            if t.month not in self.months:
                i = bisect.bisect_left(self.months, t.month)
                if i == len(self.months):
                    t = datetime(t.year + 1, self.months[0], 1)  # noqa: DTZ001 (wall time)
                else:
                    t = datetime(t.year, self.months[i], 1)  # noqa: DTZ001 (wall time)
                continue
            if not self._day_matches(t.date()):
                t = datetime.combine(t.date() + timedelta(days=1), datetime.min.time())
                continue
            if t.hour not in self.hours:
                i = bisect.bisect_left(self.hours, t.hour)
                if i == len(self.hours):
                    t = datetime.combine(t.date() + timedelta(days=1), datetime.min.time())
                else:
                    t = t.replace(hour=self.hours[i], minute=0)
                continue
            if t.minute not in self.minutes:
                i = bisect.bisect_left(self.minutes, t.minute)
                if i == len(self.minutes):
                    t = t.replace(minute=0) + timedelta(hours=1)
                else:
                    t = t.replace(minute=self.minutes[i])
                continue
            return t
        return None


def parse(text: str) -> Cron:
    """A 5-field expression (or a macro), or Invalid naming the field at fault."""
    if not isinstance(text, str):
        raise Invalid("cron must be a string of five fields, e.g. '0 9 * * MON-FRI'.")
    return _parse(text)


@functools.lru_cache(maxsize=1024)  # the sweeper reads each due schedule's every time
def _parse(text: str) -> Cron:
    if len(text) > EXPRESSION_MAX_CHARS:
        raise Invalid(f"cron must be at most {EXPRESSION_MAX_CHARS} characters.")
    normal = " ".join(text.split())
    fields = _MACROS.get(normal.lower(), normal).split(" ")
    if normal.startswith("@") and normal.lower() not in _MACROS:
        raise Invalid(f"cron: unknown macro {normal!r}; known: {', '.join(_MACROS)}.")
    if len(fields) != 5 or not normal:
        raise Invalid(
            f"cron must have five fields (minute hour day-of-month month day-of-week), "
            f"not {len(fields) if normal else 0}: e.g. '0 9 * * MON-FRI'."
        )
    minutes, hours, days, months, weekdays = (
        _values(part, field) for part, field in zip(fields, _FIELDS, strict=True)
    )
    weekdays = {d % 7 for d in weekdays}  # 7 is Sunday too
    cron = Cron(
        text=normal,
        minutes=tuple(sorted(minutes)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=tuple(sorted(months)),
        weekdays=frozenset(weekdays),
        day_star=fields[2].startswith("*"),
        weekday_star=fields[4].startswith("*"),
    )
    if cron.weekday_star or cron.day_star:
        # Days and months must meet: '0 0 30 2 *' (the 30th of February) never happens.
        if not any(d <= _longest_month(m) for m in cron.months for d in cron.days):
            raise Invalid(
                f"cron {normal!r} never matches: no month of its month field has a day of "
                "its day-of-month field."
            )
    return cron


def _longest_month(month: int) -> int:
    return calendar.monthrange(2000, month)[1]  # 2000 is a leap year: February has 29


def _values(part: str, field: _Field) -> set[int]:
    where = f"cron's {field.name} field"
    if not part:
        raise Invalid(f"{where} is empty.")
    found: set[int] = set()
    for item in part.split(","):
        if not item:
            raise Invalid(f"{where} has an empty item in {part!r}.")
        body, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise Invalid(f"{where}: the step in {item!r} must be a whole number above 0.")
            step = int(step_text)
        if body == "*":
            low, high = field.low, field.high
        elif "-" in body:
            first, _, last = body.partition("-")
            low, high = _value(first, field, where), _value(last, field, where)
            if low > high:
                raise Invalid(f"{where}: the range {body!r} runs backwards.")
        else:
            low = _value(body, field, where)
            high = field.high if slash else low  # '5/10': from 5 to the end, every 10
        found.update(range(low, high + 1, step))
    return found


def _value(text: str, field: _Field, where: str) -> int:
    named = field.names.get(text.upper())
    if named is not None:
        return named
    if not text.isdigit():
        known = f" or a name ({', '.join(field.names)})" if field.names else ""
        raise Invalid(f"{where}: {text!r} is not a number from {field.low} to {field.high}{known}.")
    value = int(text)
    if not field.low <= value <= field.high:
        raise Invalid(f"{where}: {value} is outside {field.low}-{field.high}.")
    return value


# ---------------------------------------------------------------------------------------
# Time zones


def zone(name: str) -> ZoneInfo:
    """The IANA zone by its name, or Invalid."""
    if not isinstance(name, str) or not name or len(name) > ZONE_MAX_CHARS:
        raise Invalid("timezone must be an IANA time zone name, e.g. Europe/Berlin.")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise Invalid(
            f"Unknown time zone {name!r}: give an IANA name, e.g. Europe/Berlin or UTC."
        ) from exc


def next_after(cron: Cron | str, tz: ZoneInfo | str, after: datetime) -> datetime | None:
    """The first instant strictly after ``after`` (aware) at which ``cron`` fires in ``tz``,
    in UTC; None if it never does again within the horizon. See the module's docstring for
    the clocks' gaps and repeats."""
    if isinstance(cron, str):
        cron = parse(cron)
    if isinstance(tz, str):
        tz = zone(tz)
    if after.tzinfo is None:
        raise ValueError("after must be an aware datetime")
    after = after.astimezone(UTC)
    # Wall times map to instants in the same order (a gap's times all to its end, a repeat's
    # to its first pass), so walking matching wall times from the wall time of ``after``
    # meets the answer first. A wall time already passed (the second pass of a repeated hour)
    # maps to an instant at or before ``after`` and is walked over.
    start = after.astimezone(tz).replace(tzinfo=None, fold=0)
    while (wall := cron.next_wall(start)) is not None:
        instant = _instant(wall, tz)
        if instant > after:
            return instant
        start = wall + timedelta(minutes=1)
    return None


def _instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant (UTC) a wall-clock time fires at: its first occurrence, or, if the clocks
    skipped it, the end of the gap."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    # In a gap: fold=0 read it with the offset before the jump (an instant after the gap),
    # fold=1 with the one after (an instant before it). The jump lies between; find it.
    low = int(wall.replace(tzinfo=tz, fold=1).astimezone(UTC).timestamp())
    high = int(first.timestamp())
    before = _offset(low, tz)
    while high - low > 1:
        middle = (low + high) // 2
        if _offset(middle, tz) == before:
            low = middle
        else:
            high = middle
    return datetime.fromtimestamp(high, UTC)


def _offset(timestamp: int, tz: ZoneInfo) -> timedelta | None:
    return datetime.fromtimestamp(timestamp, tz).utcoffset()


def upcoming(cron: Cron | str, tz: ZoneInfo | str, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` instants it fires at, after ``after``."""
    found: list[datetime] = []
    while len(found) < count and (following := next_after(cron, tz, after)) is not None:
        found.append(following)
        after = following
    return found
