"""The bench's ledger: every drain of a run, the cells they aggregate into, and every section's
notes; written to ``bench/results/ledger-<timestamp>.json`` (git-ignored).

A *cell* is one configuration (section, scenario, history rows, workers, heartbeat) with one
drain per system per repeat. Throughput is the median over repeats; a ratio such as
``ours/bare`` or ``ours/nohist`` is the median of the per-repeat ratios (each repeat's drains
ran back to back, in alternating order), with the lowest and highest beside it; latency
percentiles pool every claim of the cell.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

REFERENCES = ("bare", "nohist")  # what a ratio may be taken against


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of raw values; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    return xs[int(max(1, -(-len(xs) * q // 100))) - 1]


def median(xs) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ms(seconds: float | None, digits: int = 3) -> float | None:
    return None if seconds is None else round(seconds * 1000, digits)


def ratio_summary(per_rep: list[float]) -> dict | None:
    if not per_rep:
        return None
    return {
        "median": round(statistics.median(per_rep), 3),
        "min": round(min(per_rep), 3),
        "max": round(max(per_rep), 3),
        "per_rep": [round(r, 3) for r in per_rep],
    }


class Ledger:
    def __init__(self, meta: dict | None = None):
        self.meta: dict = meta or {}
        self.drains: list[dict] = []
        self.notes: dict = {}
        self._raw: dict[tuple, dict[str, list]] = {}
        self._stored: dict[tuple, dict] = {}

    def add_drain(self, *, section, scenario, history, workers, heartbeat, system, rep, stats):
        n = stats["n"] or 1
        record = {
            "section": section,
            "scenario": scenario,
            "history": history,
            "workers": workers,
            "heartbeat": heartbeat,
            "system": system,
            "rep": rep,
            "todos": stats["n"],
            "wall_s": round(stats["wall"], 4),
            "todos_per_s": round(stats["per_s"], 2),
            "claim_p50_ms": ms(percentile(stats["lat"], 50)),
            "claim_p95_ms": ms(percentile(stats["lat"], 95)),
            "client_cpu_ms_per_todo": round(stats["client_cpu"] * 1000 / n, 4),
            "server_cpu_ms_per_todo": (
                None if stats["server_cpu"] is None else round(stats["server_cpu"] * 1000 / n, 4)
            ),
            "wal_bytes_per_todo": round(stats["wal_bytes"] / n, 1),
            "per_worker": stats["per_worker"],
        }
        self.drains.append(record)
        raw = self._raw.setdefault(_key(record), {})
        raw.setdefault(system, []).extend(stats["lat"])
        raw.setdefault(system + "#hb", []).extend(stats["hb_lat"])
        return record

    def cells(self, section: str | None = None) -> list[dict]:
        """One dict per configuration, in the order the configurations were first run."""
        grouped: dict[tuple, list[dict]] = {}
        for d in self.drains:
            grouped.setdefault(_key(d), []).append(d)
        out = [
            self._cell(key, ds)
            if key in self._raw or key not in self._stored
            else self._stored[key]
            for key, ds in grouped.items()
        ]
        return [c for c in out if section is None or c["section"] == section]

    def _cell(self, key: tuple, drains: list[dict]) -> dict:
        section, scenario, history, workers, heartbeat = key
        raw = self._raw.get(key, {})
        systems = {}
        for name in dict.fromkeys(d["system"] for d in drains):
            mine = [d for d in drains if d["system"] == name]
            client = median(d["client_cpu_ms_per_todo"] for d in mine)
            server = median(d["server_cpu_ms_per_todo"] for d in mine)
            systems[name] = {
                "runs": len(mine),
                "todos_per_s": median(d["todos_per_s"] for d in mine),
                "todos_per_s_all": [d["todos_per_s"] for d in mine],
                "claim_p50_ms": ms(percentile(raw.get(name, []), 50)),
                "claim_p95_ms": ms(percentile(raw.get(name, []), 95)),
                "heartbeat_p50_ms": ms(percentile(raw.get(name + "#hb", []), 50)),
                "client_cpu_ms_per_todo": client,
                "server_cpu_ms_per_todo": server,
                "cpu_ms_per_todo": None if client is None else round(client + (server or 0), 3),
                "wal_bytes_per_todo": median(d["wal_bytes_per_todo"] for d in mine),
            }
        ratios = {}
        for ref in REFERENCES:
            base = {d["rep"]: d["todos_per_s"] for d in drains if d["system"] == ref}
            for name in systems:
                if name != ref and base:
                    per_rep = [
                        d["todos_per_s"] / base[d["rep"]]
                        for d in drains
                        if d["system"] == name and base.get(d["rep"])
                    ]
                    if per_rep:
                        ratios[f"{name}/{ref}"] = ratio_summary(per_rep)
        return {
            "key": list(key),
            "section": section,
            "scenario": scenario,
            "history": history,
            "workers": workers,
            "heartbeat": heartbeat,
            "systems": systems,
            "ratios": ratios,
        }

    def to_json(self) -> dict:
        return {
            "meta": self.meta,
            "cells": self.cells(),
            "drains": self.drains,
            "notes": self.notes,
        }

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1, default=str) + "\n")

    @classmethod
    def load(cls, path: Path) -> Ledger:
        data = json.loads(Path(path).read_text())
        ledger = cls(data["meta"])
        ledger.drains = data["drains"]
        ledger.notes = data.get("notes", {})
        ledger._stored = {tuple(c["key"]): c for c in data["cells"]}
        return ledger


def _key(d: dict) -> tuple:
    return (d["section"], d["scenario"], d["history"], d["workers"], d["heartbeat"])


def cpu_ratio(ref: dict | None, other: dict | None) -> float | None:
    """ref's CPU per todo / other's: the throughput ratio both reach when CPU-bound on the
    same cores, barely moved by other load on the machine."""
    if not ref or not other or not ref["cpu_ms_per_todo"] or not other["cpu_ms_per_todo"]:
        return None
    return ref["cpu_ms_per_todo"] / other["cpu_ms_per_todo"]
