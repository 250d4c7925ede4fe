"""Cron expressions and time zones (queues/cron.py): fixed cases, the errors, and properties
checked against an oracle that walks UTC minute by minute and knows nothing of the parser's
wall-clock walk: an instant fires when its wall time matches and is that wall time's first
occurrence, or when it ends a gap that swallowed a matching wall time."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from switchboard.queues import cron
from switchboard.queues.errors import Invalid

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"
# Zones with clock changes of every kind: an hour, half an hour (Lord Howe), none (Kolkata),
# 45-minute offsets (Chatham), a change at midnight (Santiago, so a day starts in a gap).
ZONES = [
    "UTC",
    BERLIN,
    NEW_YORK,
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "Pacific/Chatham",
    "America/Santiago",
]


def at(*parts: int, tz: str = "UTC") -> datetime:
    return datetime(*parts, tzinfo=ZoneInfo(tz))  # type: ignore[misc]


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


# ---------------------------------------------------------------------------------------
# Fixed cases


def test_every_weekday_at_nine_skips_the_weekend():
    # Friday 4 December 2026, after nine: the next is Monday the 7th.
    assert cron.upcoming("0 9 * * MON-FRI", BERLIN, at(2026, 12, 4, 10, tz=BERLIN), 3) == [
        at(2026, 12, 7, 9, tz=BERLIN),
        at(2026, 12, 8, 9, tz=BERLIN),
        at(2026, 12, 9, 9, tz=BERLIN),
    ]


def test_every_fifteen_minutes_fires_on_the_quarter_hours():
    found = cron.upcoming("*/15 * * * *", "UTC", utc(2026, 12, 6, 23, 40, 12), 4)

    assert found == [utc(2026, 12, 6, 23, 45), utc(2026, 12, 7), utc(2026, 12, 7, 0, 15),
                     utc(2026, 12, 7, 0, 30)]  # fmt: skip


def test_the_next_is_strictly_after_even_on_a_matching_instant():
    assert cron.next_after("0 9 * * *", "UTC", utc(2026, 12, 7, 9)) == utc(2026, 12, 8, 9)


def test_the_29th_of_february_waits_for_a_leap_year():
    assert cron.next_after("0 0 29 2 *", "UTC", utc(2026, 3, 1)) == utc(2028, 2, 29)
    # 2100 is not a leap year: eight years from 2096 to 2104.
    assert cron.next_after("0 0 29 2 *", "UTC", utc(2096, 3, 1)) == utc(2104, 2, 29)


def test_day_of_month_and_day_of_week_both_restricted_match_either():
    # The 13th, or any Friday (Vixie cron's rule): 11 December 2026 is a Friday.
    assert cron.upcoming("0 0 13 * FRI", "UTC", utc(2026, 12, 6), 3) == [
        utc(2026, 12, 11),
        utc(2026, 12, 13),
        utc(2026, 12, 18),
    ]


def test_a_starred_day_field_with_a_step_still_means_both():
    # '*/2' starts with '*': day-of-month odd days AND Mondays (7 and 21 December 2026).
    assert cron.upcoming("0 0 */2 * MON", "UTC", utc(2026, 12, 1), 2) == [
        utc(2026, 12, 7),
        utc(2026, 12, 21),
    ]


def test_names_macros_and_sunday_as_seven():
    assert cron.parse("0 0 1 jan,Jul *").months == (1, 7)
    assert cron.parse("0 0 * * 7").weekdays == frozenset({0})
    assert replace(cron.parse("@daily"), text="") == replace(cron.parse("0 0 * * *"), text="")
    assert cron.parse("5/20 * * * *").minutes == (5, 25, 45)
    assert cron.parse("  0   9 * *   1-5 ").text == "0 9 * * 1-5"


# ---------------------------------------------------------------------------------------
# Clocks going forward and back


def test_a_time_the_clocks_skip_fires_once_at_the_end_of_the_gap():
    # Berlin, 29 March 2026: 02:00 CET jumps to 03:00 CEST (01:00 UTC). 02:30 never happens.
    assert cron.upcoming("30 2 * * *", BERLIN, at(2026, 3, 28, 12, tz=BERLIN), 2) == [
        utc(2026, 3, 29, 1),  # 03:00 CEST, the first instant after the gap
        at(2026, 3, 30, 2, 30, tz=BERLIN),
    ]


def test_several_skipped_times_and_the_gaps_end_fire_once_together():
    # New York, 8 March 2026: 02:00 EST jumps to 03:00 EDT (07:00 UTC).
    assert cron.upcoming("*/15 * * * *", NEW_YORK, utc(2026, 3, 8, 6, 40), 3) == [
        utc(2026, 3, 8, 6, 45),  # 01:45 EST
        utc(2026, 3, 8, 7),  # 02:00, 02:15, 02:30, 02:45 and 03:00 EDT: one instant
        utc(2026, 3, 8, 7, 15),  # 03:15 EDT
    ]


def test_a_time_the_clocks_repeat_fires_once_at_its_first_occurrence():
    # Berlin, 25 October 2026: 03:00 CEST goes back to 02:00 CET; 02:30 happens twice.
    found = cron.upcoming("30 2 * * *", BERLIN, at(2026, 10, 24, 12, tz=BERLIN), 2)

    assert found == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]  # CEST, then CET


def test_after_the_first_occurrence_the_repeat_does_not_fire():
    # Between 02:30 CEST and 02:30 CET (00:30 and 01:30 UTC): the next is the 26th.
    assert cron.next_after("30 2 * * *", BERLIN, utc(2026, 10, 25, 1)) == utc(2026, 10, 26, 1, 30)


def test_every_minute_through_the_repeated_hour_fires_each_minute_once():
    # New York, 1 November 2026: 02:00 EDT goes back to 01:00 EST (06:00 UTC).
    found = cron.upcoming("* * * * *", NEW_YORK, utc(2026, 11, 1, 5, 58), 4)

    # 01:59 EDT, then the repeat of 01:00-01:59 is skipped (fired in its first pass), then
    # 02:00 EST, an hour later in real time.
    assert found == [utc(2026, 11, 1, 5, 59), utc(2026, 11, 1, 7), utc(2026, 11, 1, 7, 1),
                     utc(2026, 11, 1, 7, 2)]  # fmt: skip


def test_a_day_that_starts_in_a_gap_fires_its_midnight_at_one():
    # Santiago, 6 September 2026: 00:00 -04 jumps to 01:00 -03 (04:00 UTC).
    assert cron.next_after("0 0 * * *", "America/Santiago", utc(2026, 9, 5, 12)) == utc(
        2026, 9, 6, 4
    )


# ---------------------------------------------------------------------------------------
# Errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("* * * *", "must have five fields"),
        ("", "must have five fields"),
        ("60 * * * *", "minute field: 60 is outside 0-59"),
        ("* 24 * * *", "hour field: 24 is outside 0-23"),
        ("* * 0 * *", "day-of-month field: 0 is outside 1-31"),
        ("* * * 13 *", "month field: 13 is outside 1-12"),
        ("* * * * 8", "day-of-week field: 8 is outside 0-7"),
        ("* * * * FUNDAY", "day-of-week field: 'FUNDAY' is not a number"),
        ("*/0 * * * *", "minute field: the step in '*/0'"),
        ("10-5 * * * *", "minute field: the range '10-5' runs backwards"),
        ("1,,2 * * * *", "minute field has an empty item"),
        ("0 0 31 4,6,9,11 *", "never matches"),
        ("0 0 30 FEB *", "never matches"),
        ("@fortnightly", "unknown macro"),
        ("x" * 101, "at most 100 characters"),
    ],
)
def test_a_bad_expression_is_invalid_and_names_its_field(text, message):
    with pytest.raises(Invalid, match=re.escape(message)):
        cron.parse(text)


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../etc/passwd", "Europe/", "x" * 65])
def test_an_unknown_time_zone_is_invalid(name):
    with pytest.raises(Invalid, match="IANA"):
        cron.zone(name)


# ---------------------------------------------------------------------------------------
# Properties, against the minute-by-minute oracle

WINDOW = timedelta(days=2)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    value = st.integers(low, high)
    single = value.map(str)
    ranged = st.tuples(value, value).map(lambda p: f"{min(p)}-{max(p)}")
    stepped = st.tuples(st.sampled_from(["*", f"{low}"]), st.integers(1, 30)).map(
        lambda p: f"{p[0]}/{p[1]}"
    )
    item = st.one_of(st.just("*"), single, ranged, stepped)
    return st.lists(item, min_size=1, max_size=3).map(",".join)


# Dense enough to fire within the oracle's window most of the time: hours and days often '*'.
EXPRESSIONS = st.tuples(
    _field(0, 59),
    st.one_of(st.just("*"), _field(0, 23)),
    st.one_of(st.just("*"), st.just("*"), _field(1, 31)),
    st.just("*"),
    st.one_of(st.just("*"), st.just("*"), _field(0, 7)),
).map(" ".join)


def _transitions(tz: ZoneInfo, year: int) -> list[datetime]:
    """The instants (UTC) the zone's offset changes in ``year``."""
    found = []
    t = utc(year, 1, 1)
    while t.year == year:
        step = t + timedelta(hours=6)
        if t.astimezone(tz).utcoffset() != step.astimezone(tz).utcoffset():
            low, high = t, step
            while high - low > timedelta(minutes=1):
                middle = low + (high - low) / 2
                if middle.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = middle
                else:
                    high = middle
            found.append(high.replace(second=0, microsecond=0))
        t = step
    return found


_NEAR = {name: [t for y in (2026, 2027) for t in _transitions(ZoneInfo(name), y)] for name in ZONES}


@st.composite
def moments(draw, name: str) -> datetime:
    """An instant near one of the zone's clock changes (if it has any), or anywhere."""
    near = _NEAR[name]
    if near and draw(st.booleans()):
        base = draw(st.sampled_from(near))
        return base + timedelta(seconds=draw(st.integers(-2 * 86400, 2 * 86400)))
    return utc(2026, 1, 1) + timedelta(seconds=draw(st.integers(0, 2 * 365 * 86400)))


def _fires(expression: cron.Cron, tz: ZoneInfo, u: datetime) -> bool:
    wall = u.astimezone(tz).replace(tzinfo=None)
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC) == u
    if first and expression.matches(wall):
        return True
    before = (u - timedelta(minutes=1)).astimezone(tz).replace(tzinfo=None)
    skipped = before + timedelta(minutes=1)
    while skipped < wall:  # the wall minutes a gap ending at u swallowed
        if expression.matches(skipped):
            return True
        skipped += timedelta(minutes=1)
    return False


def _oracle(expression: cron.Cron, tz: ZoneInfo, after: datetime) -> datetime | None:
    u = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while u <= after + WINDOW:
        if _fires(expression, tz, u):
            return u
        u += timedelta(minutes=1)
    return None


def _drawn(data, text: str, name: str) -> tuple[cron.Cron, ZoneInfo, datetime]:
    """A drawn expression (one the parser refuses is not an example), its zone, and a moment
    in that zone to look after."""
    try:
        expression = cron.parse(text)
    except Invalid:
        assume(False)
    return expression, ZoneInfo(name), data.draw(moments(name))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), text=EXPRESSIONS, name=st.sampled_from(ZONES))
def test_next_after_is_the_first_instant_the_oracle_says_fires(data, text, name):
    expression, tz, after = _drawn(data, text, name)

    found = cron.next_after(expression, tz, after)
    expected = _oracle(expression, tz, after)

    assert found is not None and found > after
    if expected is not None:
        assert found == expected  # nothing skipped, nothing early
    else:
        assert found > after + WINDOW


@settings(max_examples=200, deadline=None)
@given(data=st.data(), text=EXPRESSIONS, name=st.sampled_from(ZONES))
def test_what_fires_matches_in_local_time_or_ends_a_gap_that_did(data, text, name):
    expression, tz, after = _drawn(data, text, name)

    found = cron.upcoming(expression, tz, after, 5)

    assert found == sorted(set(found))  # strictly increasing: each fires once
    for instant in found:
        wall = instant.astimezone(tz).replace(tzinfo=None)
        ends_a_gap = (instant - timedelta(minutes=1)).astimezone(tz).replace(
            tzinfo=None
        ) + timedelta(minutes=1) < wall
        assert expression.matches(wall) or ends_a_gap
        assert instant.second == 0 or ends_a_gap
