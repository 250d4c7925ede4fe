"""The one table at the end of ``make bench``: each section's headline figure against its bar.
``python -m bench.summary ledger.json [re-run ledgers ...]``: a later ledger's sections replace
the first's. docs/benchmarks.md, "The summary"."""

from __future__ import annotations

import sys
from pathlib import Path

from bench import a2a, ask, growth, httpbench, peers, schedules, waits
from bench.ledger import Ledger
from bench.table import f, f2, spread, table, verdict

PEER_BAR = 2.0  # issue 13: ours in-process at twice Procrastinate's throughput
PEER_HTTP_BAR = 1.0  # issue 31: ours over the Python client at least Procrastinate in-process
ADR_BAR = 0.90  # ADR-0039: claim throughput with attempt history within 10 % of without
MCP_BAR = 0.90  # issue 31: MCP's drain with then at least 0.9 of HTTP's
KEYS = ("section", "measure", "wk", "ours", "reference", "ratio", "note")
HOW = {
    "ours": "in-process",
    "ours-then": "in-process with then",
    "ours-http": "over the Python client",
}


def _cell(cells: list[dict], **match) -> dict:
    """The cell of a section with these values (its reference system, say)."""
    return next(c for c in cells if all(c[k] == v for k, v in match.items()))


def rows(ledger: Ledger) -> list[dict]:
    out: list[dict] = []

    def row(*values) -> None:
        out.append(dict(zip(KEYS, values, strict=True)))

    notes = ledger.notes
    if g := notes.get("growth"):
        j, (small, large) = growth.judge(g), (g["rows"][0], g["rows"][-1])
        bar = f"bar CPU <= {growth.BAR['cpu']}, buffers <= {growth.BAR['buffers']}, no seq scan"
        note = (
            f"{bar}: {verdict(j['met'])}; buffers x{f2(j['buffers'])}, seq scans {j['seq_scans']}"
        )
        measure = (
            f"CPU/todo of a drain at {large['history']:,} vs {small['history']:,} history rows"
        )
        ours, ref = f"{f2(large['cpu_ms_per_todo'])} ms", f"{f2(small['cpu_ms_per_todo'])} ms"
        row("growth", measure, str(g["workers"]), ours, ref, f2(j["cpu"]), note)
    peer = notes.get("peers") or {}
    for c in peer.get("cells", []):
        if c["system"] not in HOW or not c["vs_procrastinate"]:
            continue
        p = _cell(peer["cells"], system="procrastinate", workers=c["workers"])
        want = PEER_HTTP_BAR if c["system"] == "ours-http" else PEER_BAR
        note = f"bar >= {want:.2f}: {verdict(c['vs_procrastinate']['median'] >= want)}; CPU ratio {f2(c['cpu_vs_procrastinate'])}; claim p50 {f2(c['claim']['p50_ms'])} vs {f2(p['claim']['p50_ms'])} ms"
        measure = f"no-op job drain ({peer['jobs']:,}), ours {HOW[c['system']]} vs Procrastinate"
        ours, ref = f"{c['jobs_per_s']:.0f} jobs/s", f"procrastinate {p['jobs_per_s']:.0f}/s"
        row("peer", measure, str(c["workers"]), ours, ref, spread(c["vs_procrastinate"]), note)
    for c in peer.get("cells", []):
        if c.get("vs_nohist"):
            twin = _cell(peer["cells"], system=peers.NOHIST[c["system"]], workers=c["workers"])
            note = f"bar >= {ADR_BAR:.2f}: {verdict(c['vs_nohist']['median'] >= ADR_BAR)}; PostgreSQL CPU ratio {f2(c['pg_cpu_vs_nohist'])}"
            measure = "ADR-0039: drain with then in-process, with attempt history vs without"
            ours, ref = f"{c['jobs_per_s']:.0f} todos/s", f"no history {twin['jobs_per_s']:.0f}/s"
            row("adr", measure, str(c["workers"]), ours, ref, spread(c["vs_nohist"]), note)
    http = notes.get("http") or {}
    for c in http.get("cells", []):
        if c["clients"] == (t := http["target"])["clients"]:
            p95, fast, quick = httpbench.judge(c, t)
            ceiling = f((http["cpus"] or 1) * 1000 / c["cpu_ms_per_todo"]["total"])
            note = f"throughput {verdict(fast)} (CPU ceiling {ceiling}/s); worst verb p95 {p95:.1f} ms (< {t['p95_ms']:.0f}) {verdict(quick)}"
            measure = f"claim_next+complete over {c['protocol']} (switchboard serve) vs target"
            ours, ref = f"{c['todos_per_s']:.0f} todos/s", f"target {t['todos_per_s']:.0f}/s"
            ratio = f"{c['todos_per_s'] / t['todos_per_s']:.2f}"
            row("http", measure, str(c["clients"]), ours, ref, ratio, note)
    for c in http.get("cells", []):
        if c["protocol"] == "MCP then" and c["clients"] in (1, 4) and c.get("vs_http"):
            h = _cell(http["cells"], protocol="HTTP then", clients=c["clients"])
            note = f"bar >= {MCP_BAR:.2f}: {verdict(c['vs_http']['median'] >= MCP_BAR)}"
            measure = "drain with then over MCP vs over HTTP (switchboard serve)"
            ours, ref = f"{c['todos_per_s']:.0f} todos/s", f"HTTP then {h['todos_per_s']:.0f}/s"
            row("mcp", measure, str(c["clients"]), ours, ref, spread(c["vs_http"]), note)
    if ak := notes.get("ask"):
        t, m, w = ak["target"], ask.met(ak), ak["wake"]["wake"]
        measure = f"an answer's commit -> a parked claim_next answered, p95 ({w['n']} of {ak['wake']['asks']})"
        ratio = f2(w["p95_ms"] / t["wake_p95_ms"]) if w["p95_ms"] else "-"
        ours, ref = f"{f2(w['p95_ms'])} ms", f"target {t['wake_p95_ms']:.0f} ms"
        row("ask", measure, "-", ours, ref, ratio, f"every answer woke it: {verdict(m['wake'])}")
        worst = max(ak["streams"], key=lambda s: s["fresh"]["p95_ms"] or 1e9)
        viewers = ", ".join(str(s["viewers"]) for s in ak["streams"])
        measure = f"a question's commit -> /live/ update, worst p95 of {viewers} viewers"
        p95 = worst["fresh"]["p95_ms"]
        ratio = f2(p95 / t["stream_p95_ms"]) if p95 else "-"
        ours, ref = f"{f2(p95)} ms", f"target {t['stream_p95_ms']:.0f} ms"
        note = f"every question seen within the target: {verdict(m['stream'])}"
        row("ask", measure, str(worst["viewers"]), ours, ref, ratio, note)
    if a2 := notes.get("a2a"):
        t, m, lat = a2["target"], a2a.met(a2), a2["latency"]
        sent, floor = lat["send_to_completed"], a2["bare"]["heard"]
        measure = f"A2A SendStreamingMessage -> claim -> complete -> COMPLETED on its stream, p95 ({sent['n']} of {lat['rounds']})"
        ratio = f2(sent["p95_ms"] / t["send_p95_ms"]) if sent["p95_ms"] else "-"
        ours, ref = f"{f2(sent['p95_ms'])} ms", f"target {t['send_p95_ms']:.0f} ms"
        note = f"every round within the target: {verdict(m['send'])}; commit -> stream p95 {f2(lat['commit_to_completed']['p95_ms'])} ms, bare NOTIFY {f2(floor['p95_ms'])} ms"
        row("a2a", measure, "-", ours, ref, ratio, note)
        k, n = a2a.kib(a2), a2["memory"][0]["streams"]["n"]
        gets = [rep["streams"]["get_after"] for rep in a2["memory"]]
        measure = f"server KiB per open SubscribeToTask stream vs per idle claim_next long-poll ({n:,} each, {len(a2['memory'])} reps)"
        ours, ref = f"{k['streams']:.1f} KiB", f"long-poll {k['polls']:.1f} KiB"
        note = f"bar <= {t['memory_ratio']:.2f}, all open: {verdict(m['memory'])}; GetTask p95 after, worst {f2(max(g['p95_ms'] or 0 for g in gets))} ms: {verdict(m['get'])}"
        ratio = spread(k["ratio"])
        row("a2a", measure, "-", ours, ref, ratio, note)
    if (sc := notes.get("schedules")) and sc["rows"]:
        slowest, bar = schedules.worst(sc), schedules.BAR_SECONDS
        measure = f"{sc['schedules']:,} schedules due in one minute: slowest minute until all committed ({len(sc['rows'])} minutes)"
        note = f"every todo within {bar:.0f} s, one a slot: {verdict(all(schedules.met(r) for r in sc['rows']))}"
        ours = "-" if slowest is None else f"{slowest * 1000:.0f} ms"
        ratio = "-" if slowest is None else f2(slowest / bar)
        ref = f"bar {bar * 1000:.0f} ms"
        row("schedules", measure, str(sc["sweepers"]), ours, ref, ratio, note)
    if wt := notes.get("waits"):
        k, met = wt["keyed"], waits.met(wt)["keys"]
        r = " / ".join(spread(wt[x], 3) for x in ("keys_ratio", "keys_then_ratio"))
        measure = f"drain / with then, {k['n']:,} todos over {k['keys']} keys, limit 1, vs no keys"
        ours = f"{k['todos_per_s']:.0f} / {wt['keyed_then']['todos_per_s']:.0f} todos/s"
        ref = f"{wt['plain']['todos_per_s']:.0f} / {wt['plain_then']['todos_per_s']:.0f}/s"
        note = f"bar >= {wt['target']['keys_ratio']:.2f} both, one claimed a key: {verdict(met)}"
        row("waits", measure, str(wt["workers"]), ours, ref, r, note)
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
            "ratio = ours / reference for throughput (peer, adr, mcp: median of per-run ratios, "
            "lowest-highest in brackets); measured / target for latency and growth. wk = worker "
            "processes (http: clients). docs/benchmarks.md says how to read each row.",
            f"ledger: {m.get('ledger_path', '-')}",
        ]
    )


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit("usage: python -m bench.summary ledger.json [re-run ledgers ...]")
    ledger, replaced = Ledger.load(Path(argv[1])), []
    for path in argv[2:]:
        for key, note in Ledger.load(path).notes.items():
            if key != "summary":
                ledger.notes[key] = note
                replaced.append(f"{key} from {path}")
    print(render(ledger, rows(ledger) if replaced else None))
    if replaced:
        print("sections replaced by a later run: " + "; ".join(replaced))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
