"""Switchboard's benchmarks (``make bench``; ``make soak`` for ``--soak``). docs/benchmarks.md
says what each section measures and how to read it.

    .venv/bin/python -m bench.run                    # every section, then the summary table
    .venv/bin/python -m bench.run --quick            # small counts, fewer runs per cell
    .venv/bin/python -m bench.run --sections adr     # sections: main, growth, plans, adr,
                                                     #   http, peers, fleet, board
    .venv/bin/python -m bench.run --soak --minutes 1 --quick

The database is always a dedicated ``switchboard_bench`` (bench/db.py). stdout gets the
tables; progress goes to stderr; everything measured goes to bench/results/ledger-<stamp>.json.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from types import SimpleNamespace

try:
    from bench import adr0039, board_pages, db, fleet, httpbench, inprocess, peers, soak, summary
    from bench.inprocess import log
except ModuleNotFoundError as exc:  # run as a script: the repository is not on sys.path
    raise SystemExit(
        f"{exc}: run the bench from the repository as .venv/bin/python -m bench.run"
    ) from None

SECTIONS = ("main", "growth", "plans", "adr", "http", "peers", "fleet", "board")
DRAINS = {"main", "growth", "plans", "adr", "http", "peers"}  # need the worker pool


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="small counts, one run per cell (adr: two)")
    p.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"which of {','.join(SECTIONS)} [all]"
    )
    p.add_argument(
        "--workers", type=ints, default=None, help="main: worker counts [1,2,4,8; quick 1,4]"
    )
    p.add_argument("--todos", type=int, default=None, help="todos per drain [1500; quick 300]")
    p.add_argument(
        "--reps",
        type=int,
        default=None,
        help="runs per cell, order reversed every other [3; quick 1]",
    )
    p.add_argument("--scenarios", default="empty,history", help="main: empty,history [both]")
    p.add_argument("--no-heartbeat", action="store_true", help="main: skip the heartbeat cells")
    p.add_argument(
        "--history-sizes", type=ints, default=None, help="growth [10000,200000; quick 10000,50000]"
    )
    p.add_argument("--growth-workers", type=int, default=4, help="growth: workers [4]")
    for module in (adr0039, httpbench, peers, fleet, board_pages, soak):
        module.add_arguments(p, ints)
    p.add_argument(
        "--keep-db", action="store_true", help="keep the bench databases on a DATABASE_URL server"
    )
    args = p.parse_args(argv)
    args.workers = args.workers or ([1, 4] if args.quick else [1, 2, 4, 8])
    args.todos = args.todos or (300 if args.quick else 1500)
    args.reps = args.reps or (1 if args.quick else 3)
    args.history_sizes = args.history_sizes or (
        [10_000, 50_000] if args.quick else [10_000, 200_000]
    )
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.sections = {s for s in args.sections.split(",") if s}
    if unknown := args.sections - set(SECTIONS):
        raise SystemExit(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    for module in (adr0039, httpbench, peers, fleet, board_pages, soak):
        module.finish_arguments(args)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.soak:
        return soak.main(args)
    started, load0 = time.monotonic(), os.getloadavg()
    env = db.prepare_environment()
    db.setup_django()
    db.migrate()
    import django
    import psycopg

    from bench import seed
    from bench.ledger import Ledger
    from bench.workers import LedgerPool

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    ledger_path = db.RESULTS / f"ledger-{stamp}.json"
    git = db.git_state()
    ledger = Ledger(
        {
            "started_utc": stamp,
            "argv": sys.argv[1:],
            "quick": args.quick,
            "todos": args.todos,
            "reps": args.reps,
            "adr_todos": args.adr_todos,
            "adr_reps": args.adr_reps,
            "adr_probe": args.adr_probe,
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "django": django.get_version(),
            "psycopg": psycopg.__version__,
            **env,
            "git": git,
            "code": db.code_line(git),
            "server": db.server_facts(),
            "loadavg_start": [round(x, 2) for x in load0],
            "ledger_path": str(ledger_path.relative_to(db.ROOT)),
        }
    )
    drains = bool(args.sections & DRAINS)
    ctx = SimpleNamespace(args=args, ledger=ledger, stamp=stamp, pool=None, endpoint_id=None)
    if drains:
        ctx.endpoint_id = seed.make_endpoint()
        size = max([*args.workers, args.growth_workers, *args.adr_workers, *args.peer_workers])
        log(
            f"database {env['database']} ({'embedded' if env['embedded'] else 'DATABASE_URL'}); {size} worker processes"
        )
        ctx.pool = LedgerPool(size)
    try:
        if drains:  # warm-up: every loop once at full width on empty tables (not recorded)
            warm = seed.Scenario("warm-up", ctx.endpoint_id, None)
            for loop in ("bare", "hand", "ours", "nohist"):
                warm.reset(loop, max(200, args.todos // 4))
                ctx.pool.run(loop, size, ctx.endpoint_id, False)
            log("warm-up done")
        if args.sections & {"main", "growth", "plans"}:
            inprocess.run_section(ctx)
        if "adr" in args.sections:
            adr0039.run_section(ctx)
        if "http" in args.sections:
            httpbench.run_section(ctx)
        if "peers" in args.sections and peers.available():
            peers.run_section(ctx)
        elif "peers" in args.sections:
            log("peers: procrastinate is not installed (make bench installs it); section skipped")
    finally:
        if ctx.pool is not None:
            ctx.pool.close()
    if "fleet" in args.sections:  # its own servers and clients (bench/fleet.py)
        fleet.run_section(ctx)
    if "board" in args.sections:  # last: it empties the todo tables
        board_pages.run_section(ctx)
    ledger.meta["duration_s"] = round(time.monotonic() - started, 1)
    ledger.meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    ledger.notes["summary"] = summary.rows(ledger)
    ledger.write(ledger_path)
    print(render(ledger))
    (db.RESULTS / f"summary-{stamp}.txt").write_text(summary.render(ledger) + "\n")
    if not env["embedded"] and not args.keep_db:
        from django.db import connection

        connection.close()
        db.drop_database()
    return 0


def render(ledger) -> str:
    """Every section's table that ran, then the summary table."""
    notes, m = ledger.notes, ledger.meta
    parts = [
        inprocess.render(ledger)
        if ledger.cells("main") or ledger.cells("growth") or notes.get("plan_cache")
        else "",
        adr0039.render(ledger),
        httpbench.render(notes["http"]) if notes.get("http") else "",
        peers.render(notes["peers"]) if notes.get("peers") else "",
        fleet.render(notes["fleet"]) if notes.get("fleet") else "",
        board_pages.render(notes["board"]) if notes.get("board") else "",
        f"run took {m.get('duration_s', 0):.0f} s; load average before/after {m.get('loadavg_start')} / "
        f"{m.get('loadavg_end')}; ledger: {m.get('ledger_path')}",
        summary.render(ledger),
    ]
    return "\n\n".join(p for p in parts if p)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):  # re-print a stored run
        from bench.ledger import Ledger

        print(render(Ledger.load(sys.argv[1])))
        raise SystemExit(0)
    raise SystemExit(main())
