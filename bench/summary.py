"""The one table at the end of ``make bench``: each section's headline figure against its bar.

    .venv/bin/python -m bench.summary bench/results/ledger-<stamp>.json           # re-print
    .venv/bin/python -m bench.summary full.json http-rerun.json soak-<stamp>.json

A later ledger's section notes (a section re-run alone) replace the first one's; a soak file
adds the soak's row.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import cluster, httpbench, inprocess, peers
from bench.ledger import Ledger, cpu_ratio
from bench.table import f, f2, spread, table

PEER_BAR = 2.0  # issue 13: ours in-process at twice Procrastinate's throughput
PEER_HTTP_BAR = 1.0  # issue 31: ours over the Python client at least Procrastinate in-process
ADR_BAR = 0.90  # ADR-0039: claim throughput with attempt history within 10 % of without
MCP_BAR = 0.90  # issue 31: MCP's drain with then at least 0.9 of HTTP's
KEYS = ("section", "measure", "wk", "ours", "reference", "ratio", "note")


def verdict(met: bool) -> str:
    return "MET" if met else "NOT MET"


def _cell(cells: list[dict], **match) -> dict:
    """The cell of a section with these values (its reference system, say)."""
    return next(c for c in cells if all(c[k] == v for k, v in match.items()))


def rows(ledger: Ledger, soak: dict | None = None) -> list[dict]:
    out: list[dict] = []

    def row(*values) -> None:
        out.append(dict(zip(KEYS, values, strict=True)))

    notes, main = ledger.notes, [c for c in ledger.cells("main") if not c["heartbeat"]]
    scenario = "history" if any(c["scenario"] == "history" for c in main) else "empty"
    for c in main:
        o, b, r = c["systems"]["ours"], c["systems"]["bare"], c["ratios"].get("ours/bare")
        if c["scenario"] == scenario and c["workers"] in (1, 4) and r:
            measure = f"claim_next+complete in-process vs a bare SKIP LOCKED loop ({scenario} {c['history']:,})"
            note = f"no bar (the physical floor); CPU ratio {f2(cpu_ratio(b, o))}; claim p95 {f2(o['claim_p95_ms'])} ms"
            row(
                "ledger",
                measure,
                str(c["workers"]),
                f"{o['todos_per_s']:.0f} todos/s",
                f"bare {b['todos_per_s']:.0f}/s",
                spread(r),
                note,
            )
    if len(cells := ledger.cells("growth")) >= 2:
        g = inprocess.growth(cells, notes.get("plans") or {})
        small, large = (c["systems"]["ours"]["cpu_ms_per_todo"] for c in (cells[0], cells[-1]))
        measure = (
            f"claim CPU/todo at {cells[-1]['history']:,} vs {cells[0]['history']:,} history rows"
        )
        note = f"bar <= {inprocess.GROWTH_BAR}, no Seq Scan: {verdict(g['met'])}; plan buffers {g['buffers'][0]} -> {g['buffers'][1]}"
        row(
            "growth",
            measure,
            str(cells[-1]["workers"]),
            f"{f2(large)} ms",
            f"{f2(small)} ms",
            f2(g["cpu"]),
            note,
        )
    for c in (peer := notes.get("peers") or {}).get("cells", []):
        p = _cell(peer["cells"], system="procrastinate", workers=c["workers"])
        if c["system"] in ("procrastinate", *peers.NOHIST.values()) or not c["vs_procrastinate"]:
            continue
        ratio = c["vs_procrastinate"]["median"]
        in_process = c["system"] != "ours-http"
        want = PEER_BAR if in_process else PEER_HTTP_BAR
        bar = f"bar >= {want:.2f}: {verdict(ratio >= want)}"
        how = {
            "ours": "in-process",
            "ours-then": "in-process with then",
            "ours-http": "over the Python client",
        }[c["system"]]
        note = f"{bar}; CPU ratio {f2(c['cpu_vs_procrastinate'])}; claim p50 {f2(c['claim']['p50_ms'])} vs {f2(p['claim']['p50_ms'])} ms"
        row(
            "peer",
            f"no-op job drain ({peer['jobs']:,}), ours {how} vs Procrastinate",
            str(c["workers"]),
            f"{c['jobs_per_s']:.0f} jobs/s",
            f"procrastinate {p['jobs_per_s']:.0f}/s",
            spread(c["vs_procrastinate"]),
            note,
        )
    for c in peer.get("cells", []):
        if not c.get("vs_nohist"):
            continue
        twin = _cell(peer["cells"], system=peers.NOHIST[c["system"]], workers=c["workers"])
        how = "in-process" if c["system"] == "ours-then" else "over the Python client (HTTP)"
        ratio = c["vs_nohist"]["median"]
        row(
            "adr",
            f"ADR-0039: drain with then {how}, with attempt history vs without",
            str(c["workers"]),
            f"{c['jobs_per_s']:.0f} todos/s",
            f"no history {twin['jobs_per_s']:.0f}/s",
            spread(c["vs_nohist"]),
            f"bar >= {ADR_BAR:.2f}: {verdict(ratio >= ADR_BAR)}; CPU ratio {f2(c['cpu_vs_nohist'])}",
        )
    for c in (http := notes.get("http") or {}).get("cells", []):
        if c["clients"] == (t := http["target"])["clients"]:
            p95, fast, quick = httpbench.verdict(c, t)
            ceiling = f((http["cpus"] or 1) * 1000 / c["cpu_ms_per_todo"]["total"])
            note = f"throughput {verdict(fast)} (CPU ceiling {ceiling}/s); worst verb p95 {p95:.1f} ms (< {t['p95_ms']:.0f}) {verdict(quick)}"
            row(
                "http",
                f"claim_next+complete over {c['protocol']} (switchboard serve) vs target",
                str(c["clients"]),
                f"{c['todos_per_s']:.0f} todos/s",
                f"target {t['todos_per_s']:.0f}/s",
                f"{c['todos_per_s'] / t['todos_per_s']:.2f}",
                note,
            )
    for c in http.get("cells", []):
        if c["protocol"] == "MCP then" and c["clients"] in (1, 4) and c.get("vs_http"):
            ratio = c["vs_http"]["median"]
            h = _cell(http["cells"], protocol="HTTP then", clients=c["clients"])
            row(
                "mcp",
                "drain with then over MCP vs over HTTP (switchboard serve)",
                str(c["clients"]),
                f"{c['todos_per_s']:.0f} todos/s",
                f"HTTP then {h['todos_per_s']:.0f}/s",
                spread(c["vs_http"]),
                f"bar >= {MCP_BAR:.2f}: {verdict(ratio >= MCP_BAR)}",
            )
    if (fl := notes.get("fleet")) and fl["fleets"]:
        t, tried = fl["target"], max(r["waiters"] for r in fl["fleets"])
        measure = f"idle long-polls with others' p95 < {t['p95_ms']:.0f} ms, wake-up p95 < {t['wake_p95_ms']:.0f} ms, no error (largest tried {tried:,})"
        row(
            "fleet",
            measure,
            "-",
            f"{fl['best']:,} waiters",
            f"target {t['waiters']:,}",
            f"{fl['best'] / t['waiters']:.2f}",
            f"fleet >= target: {verdict(fl['best'] >= t['waiters'])}",
        )
    if cl := notes.get("cluster"):
        if w := (cl.get("wake") or {}).get("wake"):
            measure = f"wake-up p95 of todos created on one node, {cl['waiters']:,} waiters on 3 behind HAProxy"
            note = f"every todo claimed (also after kill -9 and drain), no drain error: {verdict(cluster.met(cl))}"
            ratio = f2(w["p95_ms"] / cluster.WAKE_P95_MS) if w["p95_ms"] else "-"
            row(
                "cluster",
                measure,
                "-",
                f"{f2(w['p95_ms'])} ms",
                f"target {cluster.WAKE_P95_MS:.0f} ms",
                ratio,
                note,
            )
        if fo := cl.get("failover"):
            acked, lost = fo["acked_creates"] + fo["acked_completions"], cluster.lost(cl)
            measure = f"kill -9 the primary, promote after {fo['detect_s']:.0f} s: first 200 through HAProxy"
            note = (
                f"acked writes missing on the new primary {lost} of {acked:,}: {verdict(not lost)}"
            )
            row("failover", measure, "-", f"{fo['kill_to_200_s']:.2f} s", "-", "-", note)
        if "failed" in cl:
            row("cluster", f"failed: {cl['failed'][:80]}", "-", "-", "-", "-", verdict(False))
    if (lv := notes.get("live")) and (fr := lv.get("freshness")):
        lat, t = fr["fresh"], lv["target"]
        seen = lat["n"] == fr["changes"]
        row(
            "live",
            f"a complete over HTTP -> its row 'done' in a Chromium on /queue/, p95 ({lat['n']} of {fr['changes']} seen)",
            "-",
            f"{f2(lat['p95_ms'])} ms",
            f"target {t['fresh_p95_ms']:.0f} ms",
            f2(lat["p95_ms"] / t["fresh_p95_ms"]) if lat["p95_ms"] else "-",
            f"every change seen within the target: {verdict(seen and (lat['p95_ms'] or 1e9) <= t['fresh_p95_ms'])}",
        )
    for kind, label in (("queue", "queue pages"), ("drawer", "drawer (50 attempts)")):
        if group := [r for r in (notes.get("board") or {}).get("rows", []) if r["kind"] == kind]:
            worst = max(group, key=lambda r: r["p95_ms"] if r["status"] == 200 else -1)
            failed = [r["page"] for r in group if r["status"] != 200]
            met = not failed and all(r["p95_ms"] <= r["target_ms"] for r in group)
            note = f"p95/target <= 1: {verdict(met)}" + (
                f"; not 200: {', '.join(failed)}" if failed else ""
            )
            quick = " [quick data]" if notes["board"].get("quick") else ""
            row(
                "board",
                f"{label}, worst p95 of {len(group)} ({worst['page']}){quick}",
                "-",
                f"{worst['p95_ms']:.1f} ms",
                f"target {worst['target_ms']:.0f} ms",
                f"{worst['p95_ms'] / worst['target_ms']:.2f}",
                note,
            )
    for run in (soak or {}).get("runs", []):
        done, created = (
            run["outcomes"].get("completed", 0) / run["elapsed_s"],
            run["counts"].get("created", 0),
        )
        p95, dead = run["latency"].get("claim_next", {}).get("p95_ms"), run["peak_dead"]
        note = f"completions {done:.1f}/s of {created / run['elapsed_s']:.1f}/s created; dead tuples peak todos {dead['todos']:,}, attempts {dead['todo_attempts']:,}"
        row(
            "soak",
            f"{run['minutes']:g} min mixed load over HTTP, claim_next p95 vs completions",
            str(run["workers"]),
            f"{f(p95, '{:.1f}')} ms",
            f"offered {run['rate']:g}/s",
            f"{done / run['rate']:.2f}",
            note,
        )
    return out


def render(ledger: Ledger, data: list[dict] | None = None) -> str:
    m = ledger.meta
    data = data if data is not None else (ledger.notes.get("summary") or rows(ledger))
    return "\n".join(
        [
            f"Summary: each section's headline figure against its bar ({m.get('code')}; "
            f"{m.get('cpus')} CPUs; load average before/after {m.get('loadavg_start')} / "
            f"{m.get('loadavg_end')}" + ("; --quick" if m.get("quick") else "") + ")",
            "",
            *table(list(KEYS), [[r[k] for k in KEYS] for r in data], left=2),
            "",
            "ratio = ours / reference for throughput (ledger and peer rows: median of per-run "
            "ratios, lowest-highest in brackets); measured / target for latency, fleet and "
            "growth; soak: completions / offered. wk = worker processes (http: clients; soak: "
            "agent threads). docs/benchmarks.md says how to read each row.",
            f"ledger: {m.get('ledger_path', '-')}",
        ]
    )


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(
            "usage: python -m bench.summary ledger.json [re-run ledgers, soak json ...]"
        )
    ledger, soak, replaced = Ledger.load(Path(argv[1])), None, []
    for path in argv[2:]:
        if "runs" in (data := json.loads(Path(path).read_text())):
            soak = data
            continue
        for key in ("http", "peers", "fleet", "cluster", "live", "board"):
            if data.get("notes", {}).get(key):
                ledger.notes[key] = data["notes"][key]
                replaced.append(f"{key} from {path}")
    print(render(ledger, rows(ledger, soak) if replaced or soak else None))
    if replaced:
        print("sections replaced by a later run: " + "; ".join(replaced))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
