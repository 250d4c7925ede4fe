"""The endpoint page's small charts, drawn on the server as SVG (no chart library, no script:
the Board's CSP runs none inline): stacked bars of completed, failed and died tries per
bucket, oldest on the left, now on the right. Pure functions over queues.endpoint_health's
numbers; the template (board/_endings_chart.html) only places what is computed here."""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.queues.endpoint_health import Endings

# The SVG's own units: each bucket is SLOT wide (its bar BAR wide), the plot HEIGHT tall.
# The template stretches it to the card's width (preserveAspectRatio="none"); nothing in it
# is text, so nothing is distorted.
SLOT = 10
BAR = 8
HEIGHT = 60

# Bottom to top. The names are the CSS classes' (static/board/board.css, .c-<kind>).
KINDS = ("completed", "failed", "died")


# Coordinates are strings written here, with a dot whatever the locale (a template would
# localize a float).


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str
    y: str
    height: str


@dataclass(frozen=True, slots=True)
class Bar:
    x: str
    segments: list[Segment]
    title: str  # "12–13 min ago: 4 completed, 1 failed"


@dataclass(frozen=True, slots=True)
class Chart:
    title: str  # "Last hour, per minute"
    bars: list[Bar]
    width: int
    height: int
    bar_width: int
    peak: int  # the tallest bucket's total
    totals: dict[str, int]
    start: str  # the axis' ends: "60 min ago", "now"
    end: str
    unit: str  # "minute", "hour"
    top: int = 0  # the top of the scale: the peak, or a scale shared with other charts

    @property
    def empty(self) -> bool:
        return not self.peak

    @property
    def summary(self) -> str:
        """The chart in words (its accessible name)."""
        if self.empty:
            return f"{self.title}: no tries ended."
        counts = ", ".join(f"{n} {kind}" for kind, n in self.totals.items())
        return f"{self.title}: {counts}; the busiest {self.unit} had {self.peak}."


def per_minute(endings: Endings, *, scale: int = 0) -> Chart:
    """``scale``: the top of a scale shared with other charts (the overview's endpoints of a
    team, so their bars compare), when above this chart's own peak."""
    return _chart(
        "Last hour, per minute", endings, unit="minute", short="min", ends="60 min ago", scale=scale
    )


def per_hour(endings: Endings) -> Chart:
    return _chart("Last day, per hour", endings, unit="hour", short="h", ends="24 h ago")


def peak(endings: Endings) -> int:
    """The busiest bucket's total."""
    return max(
        map(sum, zip(endings.completed, endings.failed, endings.died, strict=True)), default=0
    )


def _chart(
    title: str, endings: Endings, *, unit: str, short: str, ends: str, scale: int = 0
) -> Chart:
    columns = list(zip(endings.completed, endings.failed, endings.died, strict=True))
    peak = max((sum(c) for c in columns), default=0)
    top = max(peak, scale)
    bars = []
    for i, counts in enumerate(columns):
        ago = len(columns) - 1 - i  # buckets ago: 0 is the one ending now
        when = f"the last {unit}" if ago == 0 else f"{ago}–{ago + 1} {short} ago"
        said = ", ".join(f"{n} {kind}" for kind, n in zip(KINDS, counts, strict=True) if n)
        bars.append(
            Bar(
                x=_number(i * SLOT + (SLOT - BAR) / 2),
                segments=_stack(counts, top),
                title=f"{when}: {said or 'nothing ended'}",
            )
        )
    return Chart(
        title=title,
        bars=bars,
        width=len(columns) * SLOT,
        height=HEIGHT,
        bar_width=BAR,
        peak=peak,
        totals=endings.totals,
        start=ends,
        end="now",
        unit=unit,
        top=top,
    )


def _stack(counts: tuple[int, ...], top: int) -> list[Segment]:
    """Each kind's piece of a bar, bottom up, in the SVG's units (y grows downward). A
    bucket with any ending shows at least one unit of it."""
    segments = []
    bottom = float(HEIGHT)
    for kind, n in zip(KINDS, counts, strict=True):
        if not n:
            continue
        height = max(1.0, n / top * HEIGHT)
        bottom -= height
        segments.append(Segment(kind=kind, y=_number(max(bottom, 0.0)), height=_number(height)))
    return segments


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")
