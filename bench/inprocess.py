"""The ledger in-process (sections ``main`` and ``growth``): claim_next (+ heartbeat) +
complete through ``queues.transitions`` in worker processes (ours) next to a bare ``FOR UPDATE
SKIP LOCKED`` loop on a plain table (bare), same database, same run; from empty tables and
from history; claim cost at two history sizes with the claim's plan; and a plan cached while
the tables were empty."""

from __future__ import annotations

from bench import explain, seed
from bench.ledger import cpu_ratio
from bench.table import f, f2, log, spread, table
from bench.workers import DrainFailed

GROWTH_BAR = 1.25  # ours' CPU per todo at the large history / the small


def cell(ctx, scenario, section: str, workers: int, hb: bool, reps: int) -> dict:
    """``reps`` drains of bare and of ours, the order reversed every other run; the cell."""
    todos = ctx.args.todos
    for rep in range(reps):
        for system in ("bare", "ours") if rep % 2 == 0 else ("ours", "bare"):
            after = scenario.reset(system, todos)
            stats = ctx.pool.run(system, workers, scenario.endpoint_id, hb)
            left = seed.unfinished(system, after)
            if stats["n"] != todos or left:
                raise DrainFailed(f"{system}: drained {stats['n']} of {todos}, {left} left")
            config = {
                "section": section,
                "scenario": scenario.name,
                "history": scenario.history or 0,
            }
            ctx.ledger.add_drain(
                **config, workers=workers, heartbeat=hb, system=system, rep=rep, stats=stats
            )
    c = ctx.ledger.close_cell()
    s = c["systems"]
    log(
        f"{section} {scenario.name} {c['history']:,} w={workers} hb={hb}: bare {s['bare']['todos_per_s']:.0f}/s ours {s['ours']['todos_per_s']:.0f}/s"
    )
    return c


def run_section(ctx) -> None:
    args, notes = ctx.args, ctx.ledger.notes
    for name in args.scenarios if "main" in args.sections else []:
        scenario = seed.Scenario(name, ctx.endpoint_id, None if name == "empty" else args.todos)
        scenario.build(["bare", "ours"])
        for workers in args.workers:
            for hb in [False] if args.no_heartbeat else [False, True]:
                cell(ctx, scenario, "main", workers, hb, args.reps)
    for size in args.history_sizes if "growth" in args.sections else []:
        scenario = seed.Scenario("growth", ctx.endpoint_id, size)
        scenario.build(["bare", "ours"])
        scenario.reset("ours", args.todos)
        lines, summary = explain.explain_claim(ctx.endpoint_id)
        notes.setdefault("plans", {})[str(size)] = {"summary": summary, "lines": lines}
        cell(ctx, scenario, "growth", args.growth_workers, False, max(args.reps, 3))  # 3: noise


def growth(cells: list[dict], plans: dict) -> dict:
    """Claim cost as history grows, judged on what other load cannot fake: CPU per todo (at
    most GROWTH_BAR times), the claim plan's buffers (at most 1.5 times), no Seq Scan."""
    small, large = (c["systems"]["ours"]["cpu_ms_per_todo"] for c in (cells[0], cells[-1]))
    cpu = large / small if small else None
    bs, bl = (
        plans.get(str(c["history"]), {}).get("summary", {}).get("buffers")
        for c in (cells[0], cells[-1])
    )
    seq = any(p["summary"]["seq_scan_todo_attempts"] for p in plans.values())
    met = (cpu or 0) <= GROWTH_BAR and not seq and (not bs or not bl or bl <= 1.5 * bs)
    return {"cpu": cpu, "buffers": [bs, bl], "seq_scan": seq, "met": met}


def render(ledger) -> str:
    m, sv, out = ledger.meta, ledger.meta.get("server", {}), []
    rows = []
    for c in ledger.cells("main") + ledger.cells("growth"):
        b, o = c["systems"]["bare"], c["systems"]["ours"]
        rows.append(
            [
                c["scenario"],
                f"{c['history']:,}",
                c["workers"],
                "yes" if c["heartbeat"] else "no",
                f(b["todos_per_s"]),
                f(o["todos_per_s"]),
                spread(c["ratios"].get("ours/bare")),
                *(f"{f2(s['claim_p50_ms'])}/{f2(s['claim_p95_ms'])}" for s in (b, o)),
                f"{f2(b['heartbeat_p50_ms'])}/{f2(o['heartbeat_p50_ms'])}"
                if c["heartbeat"]
                else "-",
                f"{f2(b['cpu_ms_per_todo'])}/{f2(o['cpu_ms_per_todo'])}",
                f2(cpu_ratio(b, o)),
                f"{f(b['wal_bytes_per_todo'])}/{f(o['wal_bytes_per_todo'])}",
            ]
        )
    headers = "scenario|history|wk|hb|bare/s|ours/s|ours/bare|claim p50/p95 ms bare|ours|hb p50 ms bare/ours|CPU ms/todo bare/ours|CPU ratio|WAL B/todo bare/ours"
    if rows:
        out += [
            "The ledger in-process: claim_next + complete through queues.transitions (ours) vs a bare "
            f"FOR UPDATE SKIP LOCKED loop without history (bare); PostgreSQL {sv.get('server_version')}, "
            f"synchronous_commit={sv.get('synchronous_commit')}; {m.get('cpus')} CPUs; {m.get('code')}; "
            f"{m.get('todos')} todos per drain, {m.get('reps')} runs per cell.",
            "",
        ]
        out += table(headers.split("|"), rows)
    cells, plans = ledger.cells("growth"), ledger.notes.get("plans") or {}
    if len(cells) >= 2:
        g = growth(cells, plans)
        out += [
            "",
            f"Claim cost at {cells[-1]['history']:,} vs {cells[0]['history']:,} history rows: ours "
            f"CPU/todo x{f2(g['cpu'])} (bar <= {GROWTH_BAR}), claim plan buffers {g['buffers'][0]}"
            f" -> {g['buffers'][1]}, Seq Scan on todo_attempts: {'YES' if g['seq_scan'] else 'none'}"
            f" => {'MET' if g['met'] else 'NOT MET'}",
        ]
        out += [
            f"  claim plan at {int(size):,}: {explain.scan_line(p['summary'])}; buffers "
            f"{p['summary'].get('buffers')}, execution {p['summary'].get('execution_ms')} ms"
            for size, p in plans.items()
        ]
    return "\n".join(out)
