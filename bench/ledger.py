"""The bench's ledger: every drain of a run, the cells they aggregate into, and the table.

``bench/run.py`` fills a Ledger and writes it to ``bench/results/ledger-<timestamp>.json``
(git-ignored). Re-print a stored run's table with:

    .venv/bin/python bench/ledger.py bench/results/ledger-<timestamp>.json

A *cell* is one configuration (scenario, history rows, workers, heartbeat) with one drain per
system per repeat. Throughput is the median over repeats; ours/bare is the median of the
per-repeat ratios (each repeat's bare and ours drains ran back to back, in alternating order),
with the lowest and highest ratio beside it; latency percentiles pool every claim of the cell.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

TARGET = 0.90  # ADR-0039: ours >= 0.90 x bare


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of raw values; None when empty."""
    if not values:
        return None
    xs = sorted(values)
    rank = max(1, -(-len(xs) * q // 100))  # ceil(n*q/100), at least 1
    return xs[int(rank) - 1]


def _median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class Ledger:
    def __init__(self, meta: dict | None = None):
        self.meta: dict = meta or {}
        self.drains: list[dict] = []
        self.notes: dict = {}
        self._raw: dict[tuple, dict[str, list]] = {}

    # -- recording -----------------------------------------------------------------------

    def add_drain(
        self,
        *,
        scenario: str,
        history: int,
        workers: int,
        heartbeat: bool,
        system: str,
        rep: int,
        position: int,
        stats: dict,
        section: str = "main",
    ) -> dict:
        n = stats["n"] or 1
        record = {
            "section": section,
            "scenario": scenario,
            "history": history,
            "workers": workers,
            "heartbeat": heartbeat,
            "system": system,
            "rep": rep,
            "position": position,
            "todos": stats["n"],
            "wall_s": round(stats["wall"], 4),
            "todos_per_s": round(stats["per_s"], 2),
            "claim_p50_ms": _ms(percentile(stats["lat"], 50)),
            "claim_p95_ms": _ms(percentile(stats["lat"], 95)),
            "claim_p99_ms": _ms(percentile(stats["lat"], 99)),
            "heartbeat_p50_ms": _ms(percentile(stats["hb_lat"], 50)),
            "client_cpu_ms_per_todo": round(stats["client_cpu"] * 1000 / n, 4),
            "server_cpu_ms_per_todo": (
                None if stats["server_cpu"] is None else round(stats["server_cpu"] * 1000 / n, 4)
            ),
            "wal_bytes_per_todo": (
                None if stats["wal_bytes"] is None else round(stats["wal_bytes"] / n, 1)
            ),
            "per_worker": stats["per_worker"],
        }
        self.drains.append(record)
        key = _cell_key(record)
        raw = self._raw.setdefault(key, {})
        raw.setdefault(system, []).extend(stats["lat"])
        raw.setdefault(system + "#hb", []).extend(stats["hb_lat"])
        return record

    # -- aggregation ---------------------------------------------------------------------

    def cells(self) -> list[dict]:
        """One dict per configuration, in the order the configurations were first run."""
        order: list[tuple] = []
        grouped: dict[tuple, list[dict]] = {}
        for d in self.drains:
            key = _cell_key(d)
            if key not in grouped:
                order.append(key)
                grouped[key] = []
            grouped[key].append(d)
        stored = {tuple(c["key"]): c for c in self.meta.get("_cells", [])}
        out = []
        for key in order:
            if key not in self._raw and key in stored:
                out.append(stored[key])  # re-rendering a stored ledger
                continue
            out.append(self._cell(key, grouped[key]))
        return out

    def _cell(self, key: tuple, drains: list[dict]) -> dict:
        section, scenario, history, workers, heartbeat = key
        systems: dict[str, dict] = {}
        for name in dict.fromkeys(d["system"] for d in drains):
            mine = [d for d in drains if d["system"] == name]
            lat = self._raw.get(key, {}).get(name, [])
            hb = self._raw.get(key, {}).get(name + "#hb", [])
            systems[name] = {
                "runs": len(mine),
                "todos_per_s": _median([d["todos_per_s"] for d in mine]),
                "todos_per_s_all": [d["todos_per_s"] for d in mine],
                "claim_p50_ms": _ms(percentile(lat, 50)),
                "claim_p95_ms": _ms(percentile(lat, 95)),
                "heartbeat_p50_ms": _ms(percentile(hb, 50)),
                "cpu_ms_per_todo": _sum_or_none(
                    _median([d["client_cpu_ms_per_todo"] for d in mine]),
                    _median([d["server_cpu_ms_per_todo"] for d in mine]),
                ),
                "client_cpu_ms_per_todo": _median([d["client_cpu_ms_per_todo"] for d in mine]),
                "server_cpu_ms_per_todo": _median([d["server_cpu_ms_per_todo"] for d in mine]),
                "wal_bytes_per_todo": _median([d["wal_bytes_per_todo"] for d in mine]),
            }
        ratios: dict[str, dict] = {}
        bare = {d["rep"]: d["todos_per_s"] for d in drains if d["system"] == "bare"}
        for name in systems:
            if name == "bare" or not bare:
                continue
            per_rep = [
                d["todos_per_s"] / bare[d["rep"]]
                for d in drains
                if d["system"] == name and bare.get(d["rep"])
            ]
            if per_rep:
                ratios[name] = {
                    "median": round(statistics.median(per_rep), 3),
                    "min": round(min(per_rep), 3),
                    "max": round(max(per_rep), 3),
                    "per_rep": [round(r, 3) for r in per_rep],
                }
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

    # -- output --------------------------------------------------------------------------

    def to_json(self) -> dict:
        meta = {k: v for k, v in self.meta.items() if k != "_cells"}
        return {"meta": meta, "cells": self.cells(), "drains": self.drains, "notes": self.notes}

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=1, default=str) + "\n")

    @classmethod
    def load(cls, path: Path) -> Ledger:
        data = json.loads(Path(path).read_text())
        ledger = cls(dict(data["meta"], _cells=data["cells"]))
        ledger.drains = data["drains"]
        ledger.notes = data.get("notes", {})
        return ledger

    def render(self) -> str:
        return render(self)


def _cell_key(d: dict) -> tuple:
    return (d["section"], d["scenario"], d["history"], d["workers"], d["heartbeat"])


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _sum_or_none(a, b):
    if a is None:
        return None
    return round(a + (b or 0.0), 3)


# --- text ------------------------------------------------------------------------------------


def _f(x, fmt="{:.0f}", none="-") -> str:
    return none if x is None else fmt.format(x)


def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]

    def line(cells):
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return out


def _ratio(r: dict | None) -> str:
    if not r:
        return "-"
    if r["min"] == r["max"]:
        return f"{r['median']:.2f}"
    return f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"


def _lat(s: dict | None) -> str:
    if not s:
        return "-"
    return f"{_f(s['claim_p50_ms'], '{:.2f}')}/{_f(s['claim_p95_ms'], '{:.2f}')}"


def main_rows(cells: list[dict]) -> tuple[list[str], list[list[str]], set[int]]:
    headers = [
        "scenario",
        "history",
        "wk",
        "hb",
        "bare/s",
        "ours/s",
        "ours/bare",
        "hand/bare",
        "claim p50/p95 ms bare",
        "ours",
        "hb p50 ms bare/ours",
        "CPU ms/todo bare/ours",
        "CPU ratio",
        "WAL B/todo bare/ours",
    ]
    rows = []
    for c in cells:
        s = c["systems"]
        bare, ours = s.get("bare"), s.get("ours")
        hb = "-"
        if c["heartbeat"] and bare and ours:
            hb = (
                f"{_f(bare['heartbeat_p50_ms'], '{:.2f}')}/{_f(ours['heartbeat_p50_ms'], '{:.2f}')}"
            )
        rows.append(
            [
                c["scenario"],
                f"{c['history']:,}",
                str(c["workers"]),
                "yes" if c["heartbeat"] else "no",
                _f(bare and bare["todos_per_s"]),
                _f(ours and ours["todos_per_s"]),
                _ratio(c["ratios"].get("ours")),
                _ratio(c["ratios"].get("hand")),
                _lat(bare),
                _lat(ours),
                hb,
                f"{_f(bare and bare['cpu_ms_per_todo'], '{:.2f}')}/"
                f"{_f(ours and ours['cpu_ms_per_todo'], '{:.2f}')}",
                _cpu_ratio(bare, ours),
                f"{_f(bare and bare['wal_bytes_per_todo'])}/{_f(ours and ours['wal_bytes_per_todo'])}",
            ]
        )
    return headers, rows, {1, 2, 4, 5, 8, 9, 10, 11, 12, 13}


def _cpu_ratio(bare: dict | None, other: dict | None) -> str:
    """bare CPU per todo / other CPU per todo: the throughput ratio the two would reach if
    both were CPU-bound on the same cores. Barely moved by other load on the machine."""
    if not bare or not other or not bare["cpu_ms_per_todo"] or not other["cpu_ms_per_todo"]:
        return "-"
    return f"{bare['cpu_ms_per_todo'] / other['cpu_ms_per_todo']:.2f}"


def whatif_rows(cells: list[dict]) -> tuple[list[str], list[list[str]], set[int]]:
    headers = [
        "scenario",
        "history",
        "wk",
        "hb",
        "variant",
        "todos/s",
        "x/bare",
        "vs ours baseline",
        "claim p50/p95 ms",
        "CPU ms/todo",
        "CPU ratio",
        "WAL B/todo",
    ]
    rows = []
    for c in cells:
        s = c["systems"]
        base = s.get("ours")
        for name, sysd in s.items():
            if name == "bare":
                continue
            variant = name.split(":", 1)[1] if ":" in name else "baseline"
            vs = "-"
            if base and name != "ours" and base["todos_per_s"]:
                vs = f"{sysd['todos_per_s'] / base['todos_per_s']:.2f}x"
            rows.append(
                [
                    c["scenario"],
                    f"{c['history']:,}",
                    str(c["workers"]),
                    "yes" if c["heartbeat"] else "no",
                    variant,
                    _f(sysd["todos_per_s"]),
                    _ratio(c["ratios"].get(name)),
                    vs,
                    _lat(sysd),
                    _f(sysd["cpu_ms_per_todo"], "{:.2f}"),
                    _cpu_ratio(s.get("bare"), sysd),
                    _f(sysd["wal_bytes_per_todo"]),
                ]
            )
        if "bare" in s:
            b = s["bare"]
            rows.append(
                [
                    c["scenario"],
                    f"{c['history']:,}",
                    str(c["workers"]),
                    "yes" if c["heartbeat"] else "no",
                    "(bare)",
                    _f(b["todos_per_s"]),
                    "1.00",
                    "-",
                    _lat(b),
                    _f(b["cpu_ms_per_todo"], "{:.2f}"),
                    "1.00",
                    _f(b["wal_bytes_per_todo"]),
                ]
            )
    return headers, rows, {1, 2, 5, 6, 7, 8, 9, 10, 11}


def render(ledger: Ledger) -> str:
    m = ledger.meta
    cells = ledger.cells()
    main = [c for c in cells if c["section"] == "main"]
    whatif = [c for c in cells if c["section"] == "whatif"]
    out = []
    out.append(
        "Switchboard bench: claim_next + complete through queues.transitions (ours, with "
        "attempt history)"
    )
    out.append(
        "vs a bare FOR UPDATE SKIP LOCKED claim/complete loop without history (bare), "
        "same database, same run."
    )
    if m:
        out.append(
            f"server: PostgreSQL {m.get('server', {}).get('server_version', '?')} "
            f"({'embedded, throwaway' if m.get('embedded') else 'DATABASE_URL'}), "
            f"db {m.get('database')}, synchronous_commit={m.get('server', {}).get('synchronous_commit')}"
            f", fsync={m.get('server', {}).get('fsync')}; {m.get('cpus')} CPUs; "
            f"code {m.get('git', {}).get('head', '?')[:10]}"
            + (
                " + uncommitted changes in " + ", ".join(m["git"]["dirty"])
                if m.get("git", {}).get("dirty")
                else ""
            )
        )
        out.append(
            f"{m.get('todos')} todos per drain, {m.get('reps')} runs per cell, order alternated "
            f"per run ({m.get('order_note')}); todos/s = median over runs, ours/bare = median "
            f"of per-run ratios (lowest-highest); claim p50/p95 pool every claim of the cell."
        )
    out.append("")
    if main:
        headers, rows, right = main_rows(main)
        out += _table(headers, rows, right)
    out.append("")
    out.append(
        "hand = hand-written SQL loop that opens/closes an attempt row (calibration; "
        "issue: 0.84-0.92 of bare). hb = one heartbeat per todo. CPU = worker process + "
        "its PostgreSQL backend,"
    )
    out.append(
        "per todo; CPU ratio = bare CPU / ours CPU, the ratio both would reach when "
        "CPU-bound, nearly immune to other load on the machine. WAL = WAL bytes per todo."
    )
    verdict = ledger.notes.get("verdict")
    if verdict:
        out.append("")
        out += verdict
    if not whatif:
        out.append("")
        out.append(
            "Proposed changes can be measured next to this baseline with --whatif "
            "(see bench/variants.py), e.g. --whatif prepared,lean-indexes"
        )
    if whatif:
        out.append("")
        out.append(
            "What-if (proposed changes, applied by monkeypatch / on the bench database "
            "only; same drains, same run):"
        )
        headers, rows, right = whatif_rows(whatif)
        out += _table(headers, rows, right)
    for key in ("growth", "explain", "plan_cache"):
        lines = ledger.notes.get(key)
        if lines:
            out.append("")
            out += lines
    if m.get("duration_s"):
        out.append("")
        out.append(
            f"run took {m['duration_s']:.0f} s; load average before/after "
            f"{m.get('loadavg_start')} / {m.get('loadavg_end')}; ledger: "
            f"{m.get('ledger_path', '-')}"
        )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python bench/ledger.py bench/results/ledger-<timestamp>.json", file=sys.stderr
        )
        return 2
    print(Ledger.load(Path(argv[1])).render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
