"""The bench's ledger (``bench/results/ledger-<stamp>.json``): the run's drains, the cells they
make and each section's notes; and the statistics every section shares."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of raw values; None when empty."""
    xs = sorted(values)
    return xs[int(max(1, -(-len(xs) * q // 100))) - 1] if xs else None


def median(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ms(seconds: float | None, digits: int = 3) -> float | None:
    return None if seconds is None else round(seconds * 1000, digits)


def latency(values: list[float], *qs: int) -> dict:
    """n, the percentiles ``qs`` (default p50 and p95) and the max, in ms, of raw seconds."""
    out = {"n": len(values), **{f"p{q}_ms": ms(percentile(values, q)) for q in qs or (50, 95)}}
    return {**out, "max_ms": ms(max(values, default=None))}


def ratio_summary(per_rep: list[float]) -> dict | None:
    """The median of per-run ratios, with the lowest and the highest."""
    rs = [round(r, 3) for r in per_rep]
    return {"median": median(rs), "min": min(rs), "max": max(rs), "per_rep": rs} if rs else None


def paired(mine: list[dict], reference: list[dict], rate) -> dict | None:
    """ratio_summary of each of ``mine``'s drains' ``rate(drain)`` over the reference drain's
    of the same round (``rep``): drains run side by side, compared pair by pair."""
    ref = {d.get("rep"): rate(d) for d in reference}
    return ratio_summary([rate(d) / ref[d.get("rep")] for d in mine if ref.get(d.get("rep"))])


def per_todo(seconds: float | None, n: int) -> float | None:
    """CPU seconds over ``n`` todos, in ms per todo."""
    return None if seconds is None else round(seconds * 1000 / max(n, 1), 4)


def cpu_ratio(ref: dict, other: dict) -> float | None:
    """ref's CPU per todo / other's: the throughput ratio both reach when CPU-bound on the
    same cores, barely moved by other load on the machine."""
    a, b = ref["cpu_ms_per_todo"], other["cpu_ms_per_todo"]
    return a / b if a and b else None


class Ledger:
    """A run's meta, its drains, the cells made of them (``close_cell``), the sections' notes."""

    def __init__(self, meta: dict | None = None):
        self.meta, self.drains, self.all_cells, self.notes = meta or {}, [], [], {}
        self._lat: dict[str, list[float]] = {}  # the open cell's claims (and heartbeats)

    def add_drain(self, *, system: str, rep: int, stats: dict, **config) -> None:
        n = stats["n"]
        cpu = per_todo(stats["client_cpu"] + (stats["server_cpu"] or 0), n)
        wal = round(stats["wal_bytes"] / max(n, 1), 1)
        per_s = round(stats["per_s"], 2)
        self.drains.append(
            {
                **config,
                "system": system,
                "rep": rep,
                "todos": n,
                "todos_per_s": per_s,
                "cpu_ms_per_todo": cpu,
                "wal_bytes_per_todo": wal,
            }
        )
        self._lat.setdefault(system, []).extend(stats["lat"])
        self._lat.setdefault(system + "#hb", []).extend(stats["hb_lat"])

    def close_cell(self) -> dict:
        """The cell of the drains added since the last one closed (one configuration): per
        system the median throughput and CPU, pooled claim latency; the ours/bare ratios."""
        drains = self.drains[sum(c["drains"] for c in self.all_cells) :]
        lat, self._lat, systems = self._lat, {}, {}
        for name in dict.fromkeys(d["system"] for d in drains):
            mine = [d for d in drains if d["system"] == name]
            systems[name] = {
                k: median(d[k] for d in mine)
                for k in ("todos_per_s", "cpu_ms_per_todo", "wal_bytes_per_todo")
            }
            systems[name] |= {"todos_per_s_all": [d["todos_per_s"] for d in mine]}
            systems[name] |= {f"claim_{k}": v for k, v in latency(lat.get(name, [])).items()}
            systems[name]["heartbeat_p50_ms"] = ms(percentile(lat.get(name + "#hb", []), 50))
        bare = {d["rep"]: d["todos_per_s"] for d in drains if d["system"] == "bare"}
        ours = [
            d["todos_per_s"] / bare[d["rep"]]
            for d in drains
            if d["system"] == "ours" and bare.get(d["rep"])
        ]
        config = {
            k: v
            for k, v in drains[0].items()
            if k in ("section", "scenario", "history", "workers", "heartbeat")
        }
        cell = {**config, "drains": len(drains), "systems": systems, "ratios": {}}
        if ours:
            cell["ratios"]["ours/bare"] = ratio_summary(ours)
        self.all_cells.append(cell)
        return cell

    def cells(self, section: str) -> list[dict]:
        return [c for c in self.all_cells if c["section"] == section]

    def write(self, path: Path) -> None:
        data = {
            "meta": self.meta,
            "cells": self.all_cells,
            "drains": self.drains,
            "notes": self.notes,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1, default=str) + "\n")

    @classmethod
    def load(cls, path: Path) -> Ledger:
        data = json.loads(Path(path).read_text())
        ledger = cls(data["meta"])
        ledger.drains, ledger.all_cells = data["drains"], data["cells"]
        ledger.notes = data.get("notes", {})
        return ledger
