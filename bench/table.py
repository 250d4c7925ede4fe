"""The bench's text: one table renderer, the number formats every section shares, the log."""

from __future__ import annotations

import re
import statistics
import sys
import time

_NUMERIC = re.compile(r"^[-+]?[\d.,]+")


def ints(text: str) -> list[int]:
    """'1,4,16' -> [1, 4, 16] (a command-line list)."""
    return [int(x) for x in text.split(",") if x.strip()]


def log(msg: str) -> None:
    """Progress, on stderr (stdout gets the tables)."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def table(headers: list[str], rows: list[list], *, left: int = 1) -> list[str]:
    """Lines of a plain-text table: a header, a rule, the rows. Cells are str()-ed; the first
    ``left`` columns are left-aligned, and so is any other column with a cell that does not
    start with a number ('-' counts as one)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    right = [
        i >= left and all(_NUMERIC.match(r[i]) or r[i] == "-" for r in cells)
        for i in range(len(headers))
    ]

    def line(row: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right, strict=True)
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *map(line, cells)]


def f(x, spec: str = "{:.0f}") -> str:
    """A number in ``spec``, or '-' when there is none."""
    return "-" if x is None else spec.format(x)


def f2(x) -> str:
    return f(x, "{:.2f}")


def pp(lat: dict, *qs: str, spec: str = "{:.2f}") -> str:
    """'p50/p95' of a latency summary (or the percentiles ``qs``, "p99", "max")."""
    return "/".join(f(lat.get(f"{q}_ms"), spec) for q in qs or ("p50", "p95"))


def spread(r: dict | None, d: int = 2) -> str:
    """A ratio summary {median, min, max} to ``d`` places: '0.82 (0.79-0.88)', or one run's."""
    if not r:
        return "-"
    if r["min"] == r["max"]:
        return f"{r['median']:.{d}f}"
    return f"{r['median']:.{d}f} ({r['min']:.{d}f}-{r['max']:.{d}f})"


def all_of(values: list[float]) -> str:
    """'547 (536, 547, 584)': the median first, every run in brackets when more than one."""
    if not values:
        return "-"
    head = f"{statistics.median(values):.0f}"
    return head if len(values) == 1 else f"{head} ({', '.join(f'{v:.0f}' for v in values)})"


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"
