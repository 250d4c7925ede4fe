"""The one table at the end of ``make bench``: each section's headline figure and its ratio.

    .venv/bin/python bench/summary.py bench/results/ledger-<timestamp>.json   # re-print it
    .venv/bin/python bench/summary.py full.json peers-rerun.json   # a section re-run replaces

One row per comparison, from the ledger the run wrote (sections that did not run have no
rows): ours in-process vs the bare SKIP LOCKED loop (ADR-0039's bar), claim cost as history
grows, ours vs Procrastinate (in-process and over the Python client), the agent API through
gunicorn against its target, and the Board's pages against theirs.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SUMMARY_WORKERS = (1, 4)


def _f(x, fmt: str = "{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def _range(r: dict | None) -> str:
    if not r:
        return "-"
    if r["min"] == r["max"]:
        return f"{r['median']:.2f}"
    return f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"


def _row(section, measure, wk, ours, reference, ratio, note) -> dict:
    return {
        "section": section,
        "measure": measure,
        "wk": wk,
        "ours": ours,
        "reference": reference,
        "ratio": ratio,
        "note": note,
    }


def rows(ledger) -> list[dict]:
    out: list[dict] = []
    cells = ledger.cells()
    notes = ledger.notes

    # -- the ledger: ours vs the bare loop, history scenario (else empty), no heartbeat --------
    main = [c for c in cells if c["section"] == "main" and not c["heartbeat"]]
    scenario = "history" if any(c["scenario"] == "history" for c in main) else "empty"
    for c in main:
        if c["scenario"] != scenario or c["workers"] not in SUMMARY_WORKERS:
            continue
        ours, bare = c["systems"].get("ours"), c["systems"].get("bare")
        r = c["ratios"].get("ours")
        if not ours or not bare or not r:
            continue
        cpu = (
            bare["cpu_ms_per_todo"] / ours["cpu_ms_per_todo"]
            if bare["cpu_ms_per_todo"] and ours["cpu_ms_per_todo"]
            else None
        )
        out.append(
            _row(
                "ledger",
                f"claim_next+complete in-process vs bare SKIP LOCKED loop ({scenario} "
                f"{c['history']:,})",
                str(c["workers"]),
                f"{ours['todos_per_s']:.0f} todos/s",
                f"bare {bare['todos_per_s']:.0f}/s",
                _range(r),
                f"bar >= 0.90: {'MET' if r['median'] >= 0.90 else 'NOT MET'}; CPU ratio "
                f"{_f(cpu, '{:.2f}')}; claim p95 {_f(ours['claim_p95_ms'], '{:.2f}')} ms",
            )
        )

    # -- claim cost as history grows ---------------------------------------------------------
    growth = [c for c in cells if c["scenario"] == "growth"]
    plans = notes.get("plans") or {}
    if len(growth) >= 2:
        small, large = growth[0], growth[-1]
        so, lo = small["systems"]["ours"], large["systems"]["ours"]
        cpu = (
            lo["cpu_ms_per_todo"] / so["cpu_ms_per_todo"]
            if so["cpu_ms_per_todo"] and lo["cpu_ms_per_todo"]
            else None
        )
        sizes = sorted(int(k) for k in plans) if plans else [small["history"], large["history"]]
        seq = any(p["summary"]["seq_scan_attempts"] for p in plans.values())
        b = [plans[str(s)]["summary"].get("buffers") for s in sizes] if plans else [None, None]
        out.append(
            _row(
                "growth",
                f"claim CPU/todo at {large['history']:,} vs {small['history']:,} history rows",
                str(large["workers"]),
                f"{_f(lo['cpu_ms_per_todo'], '{:.2f}')} ms",
                f"{_f(so['cpu_ms_per_todo'], '{:.2f}')} ms",
                _f(cpu, "{:.2f}"),
                f"bar <= 1.25, no Seq Scan: "
                f"{'MET' if (cpu or 0) <= 1.25 and not seq else 'NOT MET'}; plan buffers "
                f"{b[0]} -> {b[-1]}",
            )
        )

    # -- the peer ------------------------------------------------------------------------------
    peer = notes.get("peers")
    if peer:
        pc = peer["cells"]
        for wk in peer["workers"]:
            p = next((c for c in pc if c["system"] == "procrastinate" and c["workers"] == wk), None)
            if p is None:
                continue
            for system, label in (("ours", "in-process"), ("ours-http", "over the Python client")):
                c = next((x for x in pc if x["system"] == system and x["workers"] == wk), None)
                if c is None:
                    continue
                out.append(
                    _row(
                        "peer",
                        f"no-op job drain ({peer['jobs']:,}), ours {label} vs Procrastinate",
                        str(wk),
                        f"{c['jobs_per_s']:.0f} jobs/s",
                        f"procrastinate {p['jobs_per_s']:.0f}/s",
                        _range(c["vs_procrastinate"]),
                        f"CPU ratio {_f(c['cpu_vs_procrastinate'], '{:.2f}')}; claim p50 "
                        f"{_f(c['claim_p50_ms'], '{:.2f}')} vs {_f(p['claim_p50_ms'], '{:.2f}')} ms",
                    )
                )

    # -- the agent API through gunicorn ---------------------------------------------------------
    http = notes.get("http")
    if http:
        target = http["target"]
        for c in http["cells"]:
            if c["clients"] != target["clients"]:
                continue
            p95 = max(c["claim_next"]["p95_ms"] or 0, c["complete"]["p95_ms"] or 0)
            total = (c.get("cpu_ms_per_todo") or {}).get("total")
            ceiling = (http.get("cpus") or 1) * 1000 / total if total else None
            out.append(
                _row(
                    "http",
                    "claim_next+complete over HTTP (gunicorn) vs target",
                    str(c["clients"]),
                    f"{c['todos_per_s']:.0f} todos/s",
                    f"target {target['todos_per_s']:.0f}/s",
                    f"{c['todos_per_s'] / target['todos_per_s']:.2f}",
                    "throughput "
                    + ("MET" if c["todos_per_s"] >= target["todos_per_s"] else "NOT MET")
                    + f" (CPU ceiling {_f(ceiling)}/s); worst verb p95 {p95:.1f} ms (< "
                    f"{target['p95_ms']:.0f}) " + ("MET" if p95 < target["p95_ms"] else "NOT MET"),
                )
            )

    # -- the Board ------------------------------------------------------------------------------
    board = notes.get("board")
    if board:
        for kind, label in (("queue", "queue pages"), ("drawer", "drawer (50 attempts)")):
            group = [r for r in board["rows"] if r["kind"] == kind and r["status"] == 200]
            if not group:
                continue
            worst = max(group, key=lambda r: r["p95_ms"])
            out.append(
                _row(
                    "board",
                    f"{label}, worst p95 of {len(group)} ({worst['page']})"
                    + (" [quick data]" if board.get("quick") else ""),
                    "-",
                    f"{worst['p95_ms']:.1f} ms",
                    f"target {worst['target_ms']:.0f} ms",
                    f"{worst['p95_ms'] / worst['target_ms']:.2f}",
                    "p95/target <= 1: "
                    + ("MET" if all(r["p95_ms"] <= r["target_ms"] for r in group) else "NOT MET"),
                )
            )
    return out


def render(ledger) -> str:
    from bench.ledger import _table

    m = ledger.meta
    data = ledger.notes.get("summary") or rows(ledger)
    git = m.get("git") or {}
    out = [
        "Summary: each section's headline figure, ours beside its reference, and the ratio "
        f"(code {git.get('head', '?')[:10]}"
        + (" + uncommitted changes" if git.get("dirty") else "")
        + f"; {m.get('cpus')} CPUs; load average before/after {m.get('loadavg_start')} / "
        f"{m.get('loadavg_end')}" + ("; --quick" if m.get("quick") else "") + ")",
        "",
    ]
    headers = ["section", "measure", "wk", "ours", "reference", "ratio", "note"]
    table = [
        [r[h] for h in ("section", "measure", "wk", "ours", "reference", "ratio", "note")]
        for r in data
    ]
    out += _table(headers, table, {2, 3})
    out += [
        "",
        "ratio = ours / reference for throughput (higher is better; ledger and peer rows: median "
        "of per-run ratios, lowest-highest in brackets); measured / target for latency and "
        "growth's CPU at the large history / the small (lower is better).",
        "CPU ratio = reference CPU per job / ours (the throughput ratio when both are CPU-bound; "
        "barely moved by other load). wk = worker processes (http: client processes).",
        f"ledger: {m.get('ledger_path', '-')}",
    ]
    return "\n".join(out)


SECTION_NOTES = ("http", "peers", "board")


def main(argv: list[str]) -> int:
    """Re-print a run's summary; with more ledgers, a later one's http, peers or board
    section (one re-run alone with --sections) replaces the first one's, and says so."""
    from bench.ledger import Ledger

    if len(argv) < 2:
        print(
            "usage: python bench/summary.py bench/results/ledger-<timestamp>.json "
            "[ledger of a section re-run ...]",
            file=sys.stderr,
        )
        return 2
    ledger = Ledger.load(Path(argv[1]))
    replaced = []
    for path in argv[2:]:
        other = Ledger.load(Path(path))
        for key in SECTION_NOTES:
            if other.notes.get(key):
                ledger.notes[key] = other.notes[key]
                head = (other.meta.get("git") or {}).get("head", "?")[:10]
                replaced.append(f"{key} from {other.meta.get('ledger_path', path)} (code {head})")
    if replaced or "summary" not in ledger.notes:
        ledger.notes["summary"] = rows(ledger)
    print(render(ledger))
    if replaced:
        print("sections replaced by a later run: " + "; ".join(replaced))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
