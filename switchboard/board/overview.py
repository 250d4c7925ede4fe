"""The team overview (``/``, once a team has endpoints): each team's endpoints at a glance —
what waits and for how long, what is held, retrying and dead, what the agents ended per
minute over the last hour, which agents were seen in the last five minutes — with Pause and
Resume on each row. Two statements for every team shown (queues/endpoint_health.py
``team_now`` and ``team_last_hour``), whatever its size.

The rows are drawn the same way for the page and for the live stream (board/live.py), which
draws them once per team for all its viewers: nothing in a row depends on who reads it. The
one cell that does, Pause or Resume (an owner's, with the reader's CSRF token), is drawn
only into the page and kept by the script when a row is patched (``data-keep``); both
buttons are there and the row's ``data-paused`` says which one shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.template.loader import render_to_string
from django.utils import timezone

from switchboard.board import charts
from switchboard.queues.endpoint_health import (
    MINUTES,
    Endings,
    EndpointNow,
    LastHour,
    Stall,
    endpoint_stall,
)
from switchboard.queues.selectors import TAB_COUNT_CAP

QUIET = LastHour(Endings.empty(MINUTES), [])


@dataclass(frozen=True, slots=True)
class Row:
    endpoint: EndpointNow
    chart: charts.Chart
    agents: list[tuple[str, datetime]]
    waiting_since: datetime | None  # when the oldest claimable todo became claimable
    dead: str  # the count as a tab says it ("10,000+" past the cap)
    stall: Stall | None = None  # work waits and no agent is seen (queues.endpoint_health)

    @property
    def dom_id(self) -> str:
        return f"ov-e{self.endpoint.pk}"

    @property
    def people(self) -> int:
        """Its todos waiting on people (a question asked, not answered yet): not those
        waiting for other todos or for their children."""
        return self.endpoint.people


@dataclass(frozen=True, slots=True)
class Totals:
    """A team's line above its endpoints."""

    team_id: int
    claimable: int
    held: int
    retry_wait: int
    people: int  # todos waiting on people: a question asked, not answered yet
    completed: int  # in the last hour
    failed: int
    died: int
    agents: int  # distinct names seen in the last five minutes
    waiting_since: datetime | None
    stalled: list[Row]  # its endpoints that are stalled, the longest waiting first

    @property
    def dom_id(self) -> str:
        return f"ov-t{self.team_id}"


def rows(now: list[EndpointNow], hour: dict[int, LastHour]) -> list[Row]:
    """A team's rows. Their charts share one scale, the team's busiest minute, so a bar of
    one endpoint compares with another's (each on its own scale, 27 and 1,780 tries an hour
    drew bars of the same height)."""
    at = timezone.now()
    scale = max((charts.peak(hour.get(e.pk, QUIET).per_minute) for e in now), default=0)
    return [
        Row(
            endpoint=e,
            chart=charts.per_minute(hour.get(e.pk, QUIET).per_minute, scale=scale),
            agents=hour.get(e.pk, QUIET).agents,
            waiting_since=at - e.oldest_claimable_age if e.oldest_claimable_age else None,
            dead=_capped(e.by_state["dead"]),
            stall=endpoint_stall(e, waits=e, per_minute=hour.get(e.pk, QUIET).per_minute, at=at),
        )
        for e in now
    ]


def totals(team_id: int, shown: list[Row]) -> Totals:
    since = [row.waiting_since for row in shown if row.waiting_since]
    ended = [row.chart.totals for row in shown]
    return Totals(
        team_id=team_id,
        claimable=sum(row.endpoint.claimable for row in shown),
        held=sum(row.endpoint.held for row in shown),
        retry_wait=sum(row.endpoint.retry_wait for row in shown),
        people=sum(row.people for row in shown),
        completed=sum(t["completed"] for t in ended),
        failed=sum(t["failed"] for t in ended),
        died=sum(t["died"] for t in ended),
        agents=len({who for row in shown for who, _ in row.agents}),
        waiting_since=min(since, default=None),
        stalled=sorted(
            (row for row in shown if row.stall), key=lambda row: row.stall.waiting, reverse=True
        ),
    )


def rows_html(now: list[EndpointNow], hour: dict[int, LastHour]) -> dict[str, str]:
    """DOM id → the row (or the team's totals line) as the page draws it, for the stream."""
    shown = rows(now, hour)
    drawn = {
        row.dom_id: render_to_string("board/overview.html#overview-row", {"row": row})
        for row in shown
    }
    if now:
        line = totals(now[0].team_id, shown)
        drawn[line.dom_id] = render_to_string(
            "board/overview.html#overview-totals", {"totals": line}
        )
    return drawn


def _capped(n: int) -> str:
    return f"{TAB_COUNT_CAP:,}+" if n > TAB_COUNT_CAP else f"{n:,}"
