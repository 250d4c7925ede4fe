"""ADR-0039's bar, measured (section ``adr``): throughput with attempt history >= 0.90 x without.

Ours is the product's loop, claim_next + heartbeat + complete, each the plan of
``queues.transitions`` run by ``queues.db.run`` in worker processes; nohist is the same plans
with their three statements swapped for the same statements without attempt arms
(bench/nohist.py: built by the product's builders, so they cannot drift); bare is the plain
``SKIP LOCKED`` loop on a table without history, the physical reference. At each worker count
and history size (an empty history, and done todos with as many closed attempts): every
system drains the same number of todos from the same state (bench/seed.py: the previous
drain's todos deleted, VACUUM (ANALYZE), the todos queued, ANALYZE, CHECKPOINT), ours and
nohist in reversed order every other run. Per drain: todos/s; CPU per todo of the worker
processes (Python) and of their PostgreSQL backends (/proc); WAL bytes per todo
(pg_current_wal_lsn). Per history size: EXPLAIN (ANALYZE, BUFFERS, WAL) of one claim,
heartbeat and complete of each (rolled back), and each statement's latency and WAL over a
few hundred todos run one at a time in this process.
"""

from __future__ import annotations

import statistics
import time

from bench import db, explain, nohist, seed
from bench.inprocess import cell, log
from bench.ledger import cpu_ratio
from bench.table import f, f2, spread, table
from queues.transitions import Actor

BAR = 0.90
SYSTEMS = ["bare", "ours", "nohist"]  # reversed every other run: ours and nohist swap places
VERBS = ("claim_next", "heartbeat", "complete")


def add_arguments(p, ints) -> None:
    p.add_argument("--adr-workers", type=ints, default=[1, 4, 8], help="worker counts [1,4,8]")
    p.add_argument(
        "--adr-history",
        type=ints,
        default=None,
        help="attempt rows before [0,200000; quick 0,20000]",
    )
    p.add_argument(
        "--adr-once",
        action="store_true",
        help="also drain once, the attempt row written at close (bench/writeonce.py; adds its"
        " lease_* columns to the bench database's todos)",
    )
    p.add_argument("--adr-todos", type=int, default=None, help="todos per drain [--todos]")
    p.add_argument("--adr-reps", type=int, default=None, help="runs per cell [3; quick 2]")
    p.add_argument(
        "--adr-probe",
        type=int,
        default=None,
        help="todos of the per-statement probe [300; quick 100]",
    )


def finish_arguments(args) -> None:
    args.adr_history = args.adr_history or ([0, 20_000] if args.quick else [0, 200_000])
    args.adr_todos = args.adr_todos or args.todos
    args.adr_reps = args.adr_reps or (2 if args.quick else 3)
    args.adr_probe = args.adr_probe or (100 if args.quick else 300)


def _plans(endpoint_id: int):
    """The three plans of one todo, as the product's loop makes them."""
    from queues import transitions
    from queues.models import Endpoint

    endpoint = Endpoint.objects.get(pk=endpoint_id)
    actor = transitions.Actor.agent(endpoint)
    return (
        lambda: transitions.claim_next_plan(Actor.agent(endpoint)),
        lambda c: transitions.heartbeat_plan(actor, c.todo.id, attempt_seq=c.attempt_seq),
        lambda c: transitions.complete_plan(
            actor, c.todo.id, attempt_seq=c.attempt_seq, result={"ok": True}
        ),
    )


def probe(endpoint_id: int, system: str, twins: dict, todos: int) -> dict:
    """Each statement's wall time and WAL (its commit included), one todo at a time in this
    process, ``todos`` todos (the scenario reset before)."""
    from queues import db as ledger_db

    claim, beat, done = _plans(endpoint_id)

    def run(plan):
        return ledger_db.run(plan if system == "ours" else nohist.swapped(plan, twins))

    lat: dict[str, list[float]] = {v: [] for v in VERBS}
    wal: dict[str, list[int]] = {v: [] for v in VERBS}
    for _ in range(todos):
        claimed = None
        for verb, make in zip(VERBS, (claim, beat, done), strict=True):
            w0, t = db.wal_lsn(), time.perf_counter()
            result = run(make() if verb == "claim_next" else make(claimed))
            lat[verb].append(time.perf_counter() - t)
            wal[verb].append(db.wal_lsn() - w0)
            claimed = claimed or result
    return {
        v: {
            "p50_ms": round(statistics.median(lat[v]) * 1000, 3),
            "wal_b": round(statistics.fmean(wal[v])),
            "wal_p50_b": statistics.median(wal[v]),
        }
        for v in VERBS
    }


def explained(endpoint_id: int, system: str, twins: dict) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS, WAL) of one claim, then a heartbeat and a complete of the
    todo it claimed, with the parameters the plans build (their first statement), rolled back."""
    from django.db import transaction

    claim, beat, done = _plans(endpoint_id)

    def first(plan):
        plan = plan if system == "ours" else nohist.swapped(plan, twins)
        step = next(plan)
        plan.close()
        return step

    out = {}
    with transaction.atomic():
        step = first(claim())
        out["claim_next"] = explain.summarize(explain.explain(step.statement.text, step.params))
        todo_id, seq = db.with_cursor(
            "SELECT id, last_attempt_seq FROM todos WHERE state = 'claimed' ORDER BY claimed_at DESC, id DESC LIMIT 1"
        )

        class Claimed:  # what the plans read of a Claim
            attempt_seq = seq

            class todo:  # noqa: N801
                id = todo_id

        for verb, make in (("heartbeat", beat), ("complete", done)):
            step = first(make(Claimed))
            out[verb] = explain.summarize(explain.explain(step.statement.text, step.params))
        transaction.set_rollback(True)
    return out


def run_section(ctx) -> None:
    args, ledger = ctx.args, ctx.ledger
    twins = nohist.statements()
    systems = SYSTEMS + ["once"] if args.adr_once else SYSTEMS
    if args.adr_once:  # before any drain: every system runs on the same table
        from django.db import connection

        from bench import writeonce

        with connection.cursor() as cursor:
            writeonce.add_lease_columns(cursor)
    note = {"history": args.adr_history, "workers": args.adr_workers, "explain": {}, "probe": {}}
    for history in args.adr_history:
        scenario = seed.Scenario("adr", ctx.endpoint_id, history)
        t = time.monotonic()
        scenario.build(["bare", "ours"])
        log(f"adr: history {history:,} built in {time.monotonic() - t:.1f}s")
        for workers in args.adr_workers:
            c = cell(ctx, scenario, "adr", systems, workers, True, args.adr_reps, args.adr_todos)
            s = c["systems"]
            log(
                f"adr history {history:,} w={workers}: ours {s['ours']['todos_per_s']:.0f}/s nohist "
                f"{s['nohist']['todos_per_s']:.0f}/s ratio {c['ratios']['ours/nohist']['median']:.2f}"
                + (
                    f"; once {s['once']['todos_per_s']:.0f}/s ratio "
                    f"{c['ratios']['once/nohist']['median']:.2f}"
                    if "once" in s
                    else ""
                )
            )
        for system in ("ours", "nohist"):
            # the probe first: the pages it touches have had their full-page images written
            # (after the reset's CHECKPOINT) before the EXPLAIN's writes are counted
            scenario.reset(system, args.adr_probe + 1)
            probed = probe(ctx.endpoint_id, system, twins, args.adr_probe)
            note["probe"].setdefault(str(history), {})[system] = probed
            plans = explained(ctx.endpoint_id, system, twins)
            note["explain"].setdefault(str(history), {})[system] = plans
    note["statements"] = {k: v.text for k, v in twins.items()}
    ledger.notes["adr"] = note


# --- text ------------------------------------------------------------------------------------


def _cpu(s: dict) -> str:
    return f"{f2(s['client_cpu_ms_per_todo'])}+{f2(s['server_cpu_ms_per_todo'])} = {f2(s['cpu_ms_per_todo'])}"


def _ratio(cell: dict) -> float:
    """A cell's ours/nohist throughput ratio (the median over its runs)."""
    return cell["ratios"]["ours/nohist"]["median"]


def _meets(cells: list[dict]) -> bool:
    """ADR-0039's bar over these cells: every one at BAR or above."""
    return min(_ratio(c) for c in cells) >= BAR


def verdict(cells: list[dict]) -> str:
    ratios = [_ratio(c) for c in cells]
    worst = min(cells, key=_ratio)
    cpu = [x for c in cells if (x := cpu_ratio(c["systems"]["nohist"], c["systems"]["ours"]))]
    return (
        f"ADR-0039 bar: ours >= {BAR:.2f} x nohist at every worker count and history: ours/nohist "
        f"{min(ratios):.2f}-{max(ratios):.2f} over {len(cells)} cells (worst: {worst['workers']} "
        f"workers, history {worst['history']:,}), by CPU {min(cpu):.2f}-{max(cpu):.2f} => "
        + ("MET" if _meets(cells) else "NOT MET")
    )


def render(ledger) -> str:
    cells, note = ledger.cells("adr"), ledger.notes.get("adr") or {}
    if not cells:
        return ""
    m = ledger.meta
    out = [
        "ADR-0039's bar: the product's claim_next + heartbeat + complete (ours, with attempt "
        "history) vs the same plans and statements without their attempt arms (nohist,",
        "bench/nohist.py), next to the bare SKIP LOCKED loop; worker processes in-process (no "
        f"HTTP), {m.get('adr_todos')} todos per drain, {m.get('adr_reps')} runs per cell, order "
        "reversed every other run; one heartbeat per todo.",
        "",
    ]
    rows = []
    for c in cells:
        s, r = c["systems"], c["ratios"]
        rows.append(
            [
                f"{c['history']:,}",
                c["workers"],
                f(s["ours"]["todos_per_s"]),
                f(s["nohist"]["todos_per_s"]),
                spread(r.get("ours/nohist")),
                f(s["bare"]["todos_per_s"]),
                spread(r.get("ours/bare")),
                spread(r.get("nohist/bare")),
                _cpu(s["ours"]),
                _cpu(s["nohist"]),
                f2(cpu_ratio(s["nohist"], s["ours"])),
                f"{f(s['ours']['wal_bytes_per_todo'])}/{f(s['nohist']['wal_bytes_per_todo'])}",
                f"{f2(s['ours']['claim_p50_ms'])}/{f2(s['nohist']['claim_p50_ms'])}",
            ]
        )
    headers = "history|wk|ours/s|nohist/s|ours/nohist|bare/s|ours/bare|nohist/bare|CPU ms/todo ours py+pg|nohist py+pg|CPU ratio|WAL B/todo ours/nohist|claim p50 ms ours/nohist"
    out += table(headers.split("|"), rows)
    out += [
        "",
        "history = done todos with one closed attempt each, before the drain. CPU = worker "
        "process (Python) + its PostgreSQL backend (/proc), per todo; CPU ratio = nohist CPU / "
        "ours: the ratio both reach when CPU-bound.",
        verdict(cells),
    ]
    once = [c for c in cells if "once" in c["systems"]]
    if once:
        out += [
            "",
            "once (bench/writeonce.py, an experiment: the attempt row written once, at close; the "
            "open attempt's facts on the todo) against nohist, same runs:",
        ]
        out += table(
            "history|wk|once/s|once/nohist|CPU ms/todo once py+pg|CPU ratio|WAL B/todo".split("|"),
            [
                [
                    f"{c['history']:,}",
                    c["workers"],
                    f(c["systems"]["once"]["todos_per_s"]),
                    spread(c["ratios"].get("once/nohist")),
                    _cpu(c["systems"]["once"]),
                    f2(cpu_ratio(c["systems"]["nohist"], c["systems"]["once"])),
                    f(c["systems"]["once"]["wal_bytes_per_todo"]),
                ]
                for c in once
            ],
            left=2,
        )
    rows = []
    for history, systems in (note.get("explain") or {}).items():
        for verb in VERBS:
            o, n = systems["ours"][verb], systems["nohist"][verb]
            po, pn = note["probe"][history]["ours"][verb], note["probe"][history]["nohist"][verb]
            writes = ", ".join(
                f"{k} {w['bytes']:,} ({w['records']} rec"
                + (f", {w['fpi']} fpi)" if w["fpi"] else ")")
                for k, w in o["writes"].items()
            )
            rows.append(
                [
                    f"{int(history):,}",
                    verb,
                    f"{f2(po['p50_ms'])}/{f2(pn['p50_ms'])}",
                    f"{f(po['wal_p50_b'])}/{f(pn['wal_p50_b'])}",
                    f"{f(po['wal_b'])}/{f(pn['wal_b'])}",
                    f"{f(o.get('buffers'))}/{f(n.get('buffers'))}",
                    f"{f(o.get('execution_ms'), '{:.3f}')}/{f(n.get('execution_ms'), '{:.3f}')}",
                    writes or "-",
                ]
            )
    if rows:
        out += [
            "",
            "Per statement, ours/nohist: latency p50 and WAL bytes (its commit record included; "
            f"p50, and mean with full-page images) over {m.get('adr_probe')} todos one at a time "
            "in this process; buffers and execution",
            "of one EXPLAIN (ANALYZE, BUFFERS, WAL), rolled back (no commit), with ours' WAL by the "
            "node that wrote it (records; fpi = full-page images):",
        ]
        headers = "history|statement|p50 ms|WAL B p50|WAL B mean|buffers|execution ms|ours' WAL by write node"
        out += table(headers.split("|"), rows, left=2)
    return "\n".join(out)


def summary_rows(ledger) -> list[dict]:
    """'ADR-0039 bar (ours/nohist)', one row per worker count: the figures at the largest
    history; MET only if every history at that worker count reaches the bar (the section's
    own rule, per worker count), so one history's noise cannot pass the row."""
    cells = ledger.cells("adr")
    if not cells:
        return []
    largest = max(c["history"] for c in cells)
    rows = []
    for c in [c for c in cells if c["history"] == largest]:
        s, r = c["systems"], c["ratios"]["ours/nohist"]
        empty = next((x for x in cells if x["history"] == 0 and x["workers"] == c["workers"]), None)
        same_workers = [x for x in cells if x["workers"] == c["workers"]]
        rows.append(
            {
                "section": "adr",
                "measure": f"ADR-0039 bar (ours/nohist): claim_next+heartbeat+complete, history {largest:,}",
                "wk": str(c["workers"]),
                "ours": f"{s['ours']['todos_per_s']:.0f} todos/s",
                "reference": f"nohist {s['nohist']['todos_per_s']:.0f}/s",
                "ratio": spread(r),
                "note": f"bar >= {BAR:.2f} at every history: "
                f"{'MET' if _meets(same_workers) else 'NOT MET'}; CPU ratio "
                f"{f2(cpu_ratio(s['nohist'], s['ours']))}"
                + (
                    f"; empty history {empty['ratios']['ours/nohist']['median']:.2f}"
                    if empty
                    else ""
                )
                + f"; bare {s['bare']['todos_per_s']:.0f}/s",
            }
        )
    return rows
