"""The run's ledger (its meta and each section's note, ``bench/results/ledger-<stamp>.json``),
and the statistics every section shares."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


class Ledger:
    """A run: its meta, and each section's note by name."""

    def __init__(self, meta: dict | None = None, notes: dict | None = None):
        self.meta, self.notes = meta or {}, notes or {}

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"meta": self.meta, "notes": self.notes}
        path.write_text(json.dumps(data, indent=1, default=str) + "\n")

    @classmethod
    def load(cls, path) -> Ledger:
        data = json.loads(Path(path).read_text())
        return cls(data["meta"], data.get("notes", {}))


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of raw values; None when empty."""
    xs = sorted(values)
    return xs[int(max(1, -(-len(xs) * q // 100))) - 1] if xs else None


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def latency(values: list[float], *qs: int) -> dict:
    """n, the percentiles ``qs`` (default p50 and p95) and the max, in ms, of raw seconds."""
    out = {"n": len(values), **{f"p{q}_ms": ms(percentile(values, q)) for q in qs or (50, 95)}}
    return {**out, "max_ms": ms(max(values, default=None))}


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread_of(ratios: list[float]) -> dict | None:
    """The median of some runs' ratios, the lowest and the highest (table.spread prints it)."""
    return {"median": median(ratios), "min": min(ratios), "max": max(ratios)} if ratios else None


def paired(mine: list[dict], reference: list[dict], rate) -> dict | None:
    """Each of ``mine``'s drains' ``rate(drain)`` over the reference drain's of the same round
    (``rep``), as a spread."""
    ref = {d.get("rep"): rate(d) for d in reference}
    return spread_of([round(rate(d) / ref[d.get("rep")], 3) for d in mine if ref.get(d.get("rep"))])


def per_todo(seconds: float | None, n: int) -> float | None:
    """CPU seconds over ``n`` todos, in ms per todo."""
    return None if seconds is None else round(seconds * 1000 / max(n, 1), 4)
