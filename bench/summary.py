"""The one table at the end of ``make bench``: each section's headline figure and its ratio.

    .venv/bin/python -m bench.summary bench/results/ledger-<stamp>.json           # re-print
    .venv/bin/python -m bench.summary full.json peers-rerun.json soak-<stamp>.json

A later ledger's http, peers, board or adr section (a re-run of that section alone) replaces
the first one's; a soak file adds the soak's row.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import adr0039
from bench.ledger import Ledger, cpu_ratio
from bench.table import f, f2, spread, table

SUMMARY_WORKERS = (1, 4)
SECTION_NOTES = ("http", "peers", "board", "adr")


def _row(section, measure, wk, ours, reference, ratio, note) -> dict:
    return dict(
        section=section,
        measure=measure,
        wk=wk,
        ours=ours,
        reference=reference,
        ratio=ratio,
        note=note,
    )


def rows(ledger: Ledger, soak: dict | None = None) -> list[dict]:
    out: list[dict] = []
    notes = ledger.notes
    main = [c for c in ledger.cells("main") if not c["heartbeat"]]
    scenario = "history" if any(c["scenario"] == "history" for c in main) else "empty"
    for c in main:
        o, b, r = c["systems"].get("ours"), c["systems"].get("bare"), c["ratios"].get("ours/bare")
        if c["scenario"] == scenario and c["workers"] in SUMMARY_WORKERS and o and b and r:
            out.append(
                _row(
                    "ledger",
                    f"claim_next+complete in-process vs bare SKIP LOCKED loop ({scenario} {c['history']:,})",
                    str(c["workers"]),
                    f"{o['todos_per_s']:.0f} todos/s",
                    f"bare {b['todos_per_s']:.0f}/s",
                    spread(r),
                    f"bar >= 0.90: {'MET' if r['median'] >= 0.90 else 'NOT MET'}; CPU ratio "
                    f"{f2(cpu_ratio(b, o))}; claim p95 {f2(o['claim_p95_ms'])} ms",
                )
            )
    growth, plans = ledger.cells("growth"), notes.get("plans") or {}
    if len(growth) >= 2:
        so, lo = growth[0]["systems"]["ours"], growth[-1]["systems"]["ours"]
        cpu = lo["cpu_ms_per_todo"] / so["cpu_ms_per_todo"] if so["cpu_ms_per_todo"] else None
        seq = any(p["summary"]["seq_scan_todo_attempts"] for p in plans.values())
        buffers = [
            plans[str(c["history"])]["summary"].get("buffers") for c in (growth[0], growth[-1])
        ]
        out.append(
            _row(
                "growth",
                f"claim CPU/todo at {growth[-1]['history']:,} vs {growth[0]['history']:,} history rows",
                str(growth[-1]["workers"]),
                f"{f2(lo['cpu_ms_per_todo'])} ms",
                f"{f2(so['cpu_ms_per_todo'])} ms",
                f2(cpu),
                f"bar <= 1.25, no Seq Scan: {'MET' if (cpu or 0) <= 1.25 and not seq else 'NOT MET'}; "
                f"plan buffers {buffers[0]} -> {buffers[1]}",
            )
        )
    out += adr0039.summary_rows(ledger)
    if peer := notes.get("peers"):
        for wk in peer["workers"]:
            p = next(
                (c for c in peer["cells"] if c["system"] == "procrastinate" and c["workers"] == wk),
                None,
            )
            for system, label in (("ours", "in-process"), ("ours-http", "over the Python client")):
                c = next(
                    (x for x in peer["cells"] if x["system"] == system and x["workers"] == wk), None
                )
                if p and c:
                    out.append(
                        _row(
                            "peer",
                            f"no-op job drain ({peer['jobs']:,}), ours {label} vs Procrastinate",
                            str(wk),
                            f"{c['jobs_per_s']:.0f} jobs/s",
                            f"procrastinate {p['jobs_per_s']:.0f}/s",
                            spread(c["vs_procrastinate"]),
                            f"CPU ratio {f2(c['cpu_vs_procrastinate'])}; claim p50 "
                            f"{f2(c['claim_p50_ms'])} vs {f2(p['claim_p50_ms'])} ms",
                        )
                    )
    if http := notes.get("http"):
        t = http["target"]
        for c in http["cells"]:
            if c["clients"] == t["clients"]:
                p95 = max(c["claim_next"]["p95_ms"] or 0, c["complete"]["p95_ms"] or 0)
                total = c["cpu_ms_per_todo"]["total"]
                out.append(
                    _row(
                        "http",
                        "claim_next+complete over HTTP (gunicorn) vs target",
                        str(c["clients"]),
                        f"{c['todos_per_s']:.0f} todos/s",
                        f"target {t['todos_per_s']:.0f}/s",
                        f"{c['todos_per_s'] / t['todos_per_s']:.2f}",
                        f"throughput {'MET' if c['todos_per_s'] >= t['todos_per_s'] else 'NOT MET'} "
                        f"(CPU ceiling {f((http['cpus'] or 1) * 1000 / total if total else None)}/s); "
                        f"worst verb p95 {p95:.1f} ms (< {t['p95_ms']:.0f}) {'MET' if p95 < t['p95_ms'] else 'NOT MET'}",
                    )
                )
    if board := notes.get("board"):
        for kind, label in (("queue", "queue pages"), ("drawer", "drawer (50 attempts)")):
            group = [r for r in board["rows"] if r["kind"] == kind and r["status"] == 200]
            if group:
                worst = max(group, key=lambda r: r["p95_ms"])
                met = all(r["p95_ms"] <= r["target_ms"] for r in group)
                out.append(
                    _row(
                        "board",
                        f"{label}, worst p95 of {len(group)} ({worst['page']})"
                        + (" [quick data]" if board.get("quick") else ""),
                        "-",
                        f"{worst['p95_ms']:.1f} ms",
                        f"target {worst['target_ms']:.0f} ms",
                        f"{worst['p95_ms'] / worst['target_ms']:.2f}",
                        f"p95/target <= 1: {'MET' if met else 'NOT MET'}",
                    )
                )
    for run in (soak or {}).get("runs", []):
        claim, created = run["latency"].get("claim_next", {}), run["counts"].get("created", 0)
        done = run["outcomes"].get("completed", 0) / run["elapsed_s"]
        out.append(
            _row(
                "soak",
                f"{run['minutes']:g} min mixed load over HTTP [{run['profile']}], claim_next p95 vs completions",
                str(run["workers"]),
                f"{f(claim.get('p95_ms'), '{:.1f}')} ms",
                f"offered {run['rate']:g}/s",
                f"{done / run['rate']:.2f}",
                f"completions {done:.1f}/s of {created / run['elapsed_s']:.1f}/s created; dead tuples "
                f"peak todos {run['peak_dead']['todos']:,}, attempts {run['peak_dead']['todo_attempts']:,}",
            )
        )
    return out


def render(ledger: Ledger, data: list[dict] | None = None) -> str:
    m = ledger.meta
    data = data if data is not None else (ledger.notes.get("summary") or rows(ledger))
    keys = ("section", "measure", "wk", "ours", "reference", "ratio", "note")
    return "\n".join(
        [
            "Summary: each section's headline figure, ours beside its reference, and the ratio "
            f"({m.get('code')}; {m.get('cpus')} CPUs; load average before/after "
            f"{m.get('loadavg_start')} / {m.get('loadavg_end')}"
            + ("; --quick" if m.get("quick") else "")
            + ")",
            "",
            *table(list(keys), [[r[k] for k in keys] for r in data], left=2),
            "",
            "ratio = ours / reference for throughput (higher is better; ledger, adr and peer rows: "
            "median of per-run ratios, lowest-highest in brackets); measured / target for latency "
            "and growth's CPU at the large history / the small (lower is better); soak: "
            "completions / offered.",
            "CPU ratio = reference CPU per job / ours (the throughput ratio when both are CPU-bound; "
            "barely moved by other load). wk = worker processes (http: client processes; soak: agent threads).",
            f"ledger: {m.get('ledger_path', '-')}",
        ]
    )


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(
            "usage: python -m bench.summary ledger.json [section re-run ledgers, soak json ...]",
            file=sys.stderr,
        )
        return 2
    ledger, soak, replaced = Ledger.load(Path(argv[1])), None, []
    for path in argv[2:]:
        data = json.loads(Path(path).read_text())
        if "runs" in data:
            soak = data
            continue
        other = Ledger.load(Path(path))
        for key in SECTION_NOTES:
            if other.notes.get(key):
                ledger.notes[key] = other.notes[key]
                replaced.append(
                    f"{key} from {other.meta.get('ledger_path', path)} ({other.meta.get('code')})"
                )
        if other.cells("adr"):
            ledger.drains = [d for d in ledger.drains if d["section"] != "adr"] + [
                d for d in other.drains if d["section"] == "adr"
            ]
            ledger._stored.update(other._stored)
    print(render(ledger, rows(ledger, soak) if replaced or soak else None))
    if replaced:
        print("sections replaced by a later run: " + "; ".join(replaced))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
