"""The ledger in-process (sections ``main``, ``growth``, ``plans``): claim_next (+ heartbeat) +
complete through ``queues.transitions`` in worker processes (ours), next to a bare ``FOR
UPDATE SKIP LOCKED`` claim/complete loop on a plain table without history (bare) and a
hand-written loop that opens and closes a two-column attempt row (hand, calibration), on the
same database in the same run; from empty tables and from history; claim cost at two history
sizes with the claim's plan; and a plan cached while the tables were empty."""

from __future__ import annotations

import sys
import time

from bench import explain, seed
from bench.ledger import cpu_ratio
from bench.table import f, f2, spread, table
from bench.workers import DrainFailed

BAR = 0.90


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def drain(ctx, scenario, section: str, system: str, workers: int, hb: bool, rep: int, todos: int):
    after = scenario.reset(system, todos)
    stats = ctx.pool.run(system, workers, scenario.endpoint_id, hb)
    left = seed.unfinished(system, after)
    if stats["n"] != todos or left:
        raise DrainFailed(f"{system}: drained {stats['n']} of {todos}, {left} left")
    ctx.ledger.add_drain(
        section=section,
        scenario=scenario.name,
        history=scenario.history or 0,
        workers=workers,
        heartbeat=hb,
        system=system,
        rep=rep,
        stats=stats,
    )


def cell(ctx, scenario, section, systems, workers, hb, reps, todos) -> dict:
    """``reps`` runs of every system, the order reversed every other run; the cell."""
    for rep in range(reps):
        for system in systems if rep % 2 == 0 else systems[::-1]:
            drain(ctx, scenario, section, system, workers, hb, rep, todos)
    return ctx.ledger.cells(section)[-1]


def run_section(ctx) -> None:
    args, ledger = ctx.args, ctx.ledger
    systems = ["bare", "ours", "hand"]
    for name in args.scenarios if "main" in args.sections else []:
        scenario = seed.Scenario(name, ctx.endpoint_id, None if name == "empty" else args.todos)
        scenario.build(systems)
        for workers in args.workers:
            for hb in [False] if args.no_heartbeat else [False, True]:
                # The calibration loop runs without heartbeats only (it calibrates the
                # claim/complete pair against the figure).
                c = cell(
                    ctx,
                    scenario,
                    "main",
                    systems[: 2 if hb else 3],
                    workers,
                    hb,
                    args.reps,
                    args.todos,
                )
                log(
                    f"{name:8s} w={workers} hb={'yes' if hb else 'no '} bare "
                    f"{c['systems']['bare']['todos_per_s']:.0f}/s ours "
                    f"{c['systems']['ours']['todos_per_s']:.0f}/s ratio "
                    f"{c['ratios']['ours/bare']['median']:.2f}"
                )
    plans = {}
    for size in args.history_sizes if "growth" in args.sections else []:
        scenario = seed.Scenario("growth", ctx.endpoint_id, size)
        t = time.monotonic()
        scenario.build(["bare", "ours"])
        log(f"history {size:,} rows built in {time.monotonic() - t:.1f}s")
        scenario.reset("ours", args.todos)
        lines, summary = explain.explain_claim(ctx.endpoint_id)
        plans[str(size)] = {"summary": summary, "lines": lines}
        # at least 3 runs: one-off noise would decide
        c = cell(
            ctx,
            scenario,
            "growth",
            ["bare", "ours"],
            args.growth_workers,
            False,
            max(args.reps, 3),
            args.todos,
        )
        log(f"growth {size:,}: ours {c['systems']['ours']['todos_per_s']:.0f}/s")
    if plans:
        ledger.notes["plans"] = plans
    if "plans" in args.sections:
        t = time.monotonic()
        log("plan-cache check (claims on empty tables, then history, same session)")
        ledger.notes["plan_cache"] = explain.plan_cache_check(
            ctx.endpoint_id, args.history_sizes[-1]
        )
        ledger.notes["plan_cache_history"] = args.history_sizes[-1]
        log(f"plan-cache check took {time.monotonic() - t:.1f}s")


# --- text ------------------------------------------------------------------------------------


def verdict(cells: list[dict]) -> list[str]:
    """Per scenario and heartbeat setting: ours/bare over the worker counts, by wall clock and
    by CPU per todo (the same comparison with other load on the machine factored out)."""
    lines = [
        f"ours vs the bare loop (the physical reference; ADR-0039's bar itself, ours vs the same "
        f"statements without history, is the adr section): >= {BAR:.2f} x bare at every worker count?"
    ]
    groups: dict[tuple, list[dict]] = {}
    for c in cells:
        groups.setdefault((c["scenario"], c["history"], c["heartbeat"]), []).append(c)
    for (scenario, history, hb), cs in groups.items():
        ratios = [c["ratios"]["ours/bare"]["median"] for c in cs]
        worst = min(cs, key=lambda c: c["ratios"]["ours/bare"]["median"])
        cpu = [x for c in cs if (x := cpu_ratio(c["systems"]["bare"], c["systems"]["ours"]))]
        hand = [c["ratios"]["hand/bare"]["median"] for c in cs if "hand/bare" in c["ratios"]]
        lines.append(
            f"  {scenario:7s} (history {history:,}) heartbeat {'yes' if hb else 'no ':3s}: "
            f"ours/bare {min(ratios):.2f}-{max(ratios):.2f} over {len(cs)} worker counts "
            f"(worst at {worst['workers']})"
            + (f", by CPU {min(cpu):.2f}-{max(cpu):.2f}" if cpu else "")
            + f" => {'MET' if min(ratios) >= BAR else 'NOT MET'}"
            + (f"; hand-written SQL with attempts {min(hand):.2f}-{max(hand):.2f}" if hand else "")
        )
    return lines


def growth_lines(cells: list[dict], plans: dict) -> list[str]:
    """'Claim cost must not grow with history', judged on what other load on the machine
    cannot fake (CPU per todo, the plan's buffers and scans); wall clock beside it."""
    small, large = cells[0], cells[-1]
    so, lo = small["systems"]["ours"], large["systems"]["ours"]
    sb, lb = small["systems"]["bare"], large["systems"]["bare"]
    cpu = lo["cpu_ms_per_todo"] / so["cpu_ms_per_todo"] if so["cpu_ms_per_todo"] else None
    rs, rl = small["ratios"]["ours/bare"]["median"], large["ratios"]["ours/bare"]["median"]
    bs, bl = (plans[str(c["history"])]["summary"].get("buffers") for c in (small, large))
    seq = any(p["summary"]["seq_scan_todo_attempts"] for p in plans.values())
    ok = (cpu is None or cpu <= 1.25) and not seq and (not bs or not bl or bl <= 1.5 * bs)
    return [
        f"Claim cost as history grows ({large['workers']} workers, no heartbeat; history = done "
        "todos with closed attempts, ANALYZEd):",
        f"  {large['history']:,} vs {small['history']:,} rows: ours CPU/todo x{f2(cpu)}, ours/bare "
        f"{rs:.2f} -> {rl:.2f} (x{rl / rs:.2f}), claim plan buffers {bs} -> {bl}, Seq Scan on "
        f"todo_attempts: {'YES' if seq else 'none'} => {'no degradation' if ok else 'DEGRADES'}",
        f"  (bars: no Seq Scan, claim buffers <= x1.5, CPU/todo <= x1.25; wall clock, which other "
        f"load on the machine moves: ours {so['todos_per_s']:.0f} -> {lo['todos_per_s']:.0f}/s, "
        f"bare {sb['todos_per_s']:.0f} -> {lb['todos_per_s']:.0f}/s, ours claim p50 "
        f"{so['claim_p50_ms']:.2f} -> {lo['claim_p50_ms']:.2f} ms, p95 {so['claim_p95_ms']:.2f} "
        f"-> {lo['claim_p95_ms']:.2f} ms)",
    ]


def render(ledger) -> str:
    m, main = ledger.meta, ledger.cells("main")
    sv = m.get("server", {})
    out = [
        "Switchboard bench: claim_next + complete through queues.transitions (ours, with attempt "
        "history) vs a bare FOR UPDATE SKIP LOCKED claim/complete loop without history (bare).",
        f"server: PostgreSQL {sv.get('server_version', '?')} ({'embedded, throwaway' if m.get('embedded') else 'DATABASE_URL'}), "
        f"db {m.get('database')}, synchronous_commit={sv.get('synchronous_commit')}, fsync="
        f"{sv.get('fsync')}; {m.get('cpus')} CPUs; {m.get('code')}",
        f"{m.get('todos')} todos per drain, {m.get('reps')} runs per cell, order reversed every "
        "other run; todos/s = median over runs, ratios = median of per-run ratios "
        "(lowest-highest); claim p50/p95 pool every claim of the cell.",
        "",
    ]
    rows = []
    for c in main:
        b, o = c["systems"].get("bare"), c["systems"].get("ours")
        rows.append(
            [
                c["scenario"],
                f"{c['history']:,}",
                c["workers"],
                "yes" if c["heartbeat"] else "no",
                f(b["todos_per_s"]),
                f(o["todos_per_s"]),
                spread(c["ratios"].get("ours/bare")),
                spread(c["ratios"].get("hand/bare")),
                f"{f2(b['claim_p50_ms'])}/{f2(b['claim_p95_ms'])}",
                f"{f2(o['claim_p50_ms'])}/{f2(o['claim_p95_ms'])}",
                f"{f2(b['heartbeat_p50_ms'])}/{f2(o['heartbeat_p50_ms'])}"
                if c["heartbeat"]
                else "-",
                f"{f2(b['cpu_ms_per_todo'])}/{f2(o['cpu_ms_per_todo'])}",
                f2(cpu_ratio(b, o)),
                f"{f(b['wal_bytes_per_todo'])}/{f(o['wal_bytes_per_todo'])}",
            ]
        )
    if rows:
        headers = "scenario|history|wk|hb|bare/s|ours/s|ours/bare|hand/bare|claim p50/p95 ms bare|ours|hb p50 ms bare/ours|CPU ms/todo bare/ours|CPU ratio|WAL B/todo bare/ours"
        out += table(headers.split("|"), rows)
        out += [
            "",
            "hand = hand-written SQL loop that opens/closes an attempt row (calibration; issue: "
            "0.84-0.92 of bare). hb = one heartbeat per todo. CPU = worker process + its "
            "PostgreSQL backend, per todo;",
            "CPU ratio = bare CPU / ours CPU, the ratio both would reach when CPU-bound, nearly "
            "immune to other load on the machine. WAL = WAL bytes per todo.",
            "",
            *verdict(main),
        ]
    growth, plans = ledger.cells("growth"), ledger.notes.get("plans") or {}
    if len(growth) >= 2 and plans:
        out += ["", *growth_lines(growth, plans), ""]
        out.append(
            "EXPLAIN (ANALYZE, BUFFERS) of queues.sql.CLAIM_NEXT (one claim, rolled back), scans "
            "on todos/todo_attempts:"
        )
        for size, p in plans.items():
            s = p["summary"]
            out.append(
                f"  history {int(size):>9,}: {explain.scan_line(s)}; buffers {s.get('buffers')}, "
                f"planning {s.get('planning_ms')} ms, execution {s.get('execution_ms')} ms; Seq "
                f"Scan on todo_attempts: {'YES' if s['seq_scan_todo_attempts'] else 'no'}"
            )
    if ledger.notes.get("plan_cache"):
        out += [
            "",
            *explain.plan_cache_lines(
                ledger.notes["plan_cache"], ledger.notes["plan_cache_history"]
            ),
        ]
    return "\n".join(out)
