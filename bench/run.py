"""Switchboard's benchmarks (``make bench``; ``make soak`` for ``--soak``). docs/benchmarks.md
says what each section measures and how to read it.

    .venv/bin/python -m bench.run                    # every section, then the summary table
    .venv/bin/python -m bench.run --quick            # small counts, one run per cell
    .venv/bin/python -m bench.run --sections http    # of main, growth, http, peers,
                                                     #   fleet, cluster, live, board
    .venv/bin/python -m bench.run --soak --minutes 1 --quick
    .venv/bin/python -m bench.run bench/results/ledger-<stamp>.json   # re-print a run

The database is always a dedicated ``switchboard_bench`` (bench/db.py). stdout gets the
tables, stderr the progress, bench/results/ everything measured.
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
    from bench import (
        board_pages,
        cluster,
        db,
        fleet,
        httpbench,
        inprocess,
        live,
        peers,
        soak,
        summary,
    )
    from bench.ledger import Ledger
    from bench.table import ints, log
except ModuleNotFoundError as exc:  # run as a script: the repository is not on sys.path
    raise SystemExit(f"{exc}: run the bench as .venv/bin/python -m bench.run") from None

SECTIONS = ("main", "growth", "http", "peers", "fleet", "cluster", "live", "board")
FLAGS = {
    "--quick": "small counts, one run per cell",
    "--no-heartbeat": "main: no heartbeat cells",
    "--keep-db": "keep the bench databases on a DATABASE_URL server",
    "--soak": "the soak (make soak) instead of the bench",
}
OPTIONS = [  # flag, type, default, --quick's, help
    ("--workers", ints, [1, 2, 4, 8], [1, 4], "main: worker processes"),
    ("--todos", int, 1500, 300, "main, growth: todos per drain"),
    ("--reps", int, 3, 1, "main, growth: runs per cell, the order reversed every other"),
    ("--history-sizes", ints, [10_000, 200_000], [10_000, 50_000], "growth: history rows"),
    ("--growth-workers", int, 4, 4, "growth: worker processes"),
]
MODULES = (httpbench, peers, fleet, cluster, live, board_pages, soak)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for flag, what in FLAGS.items():
        p.add_argument(flag, action="store_true", help=what)
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"of {','.join(SECTIONS)}")
    p.add_argument("--scenarios", default="empty,history", help="main: of empty,history")
    options = OPTIONS + [option for module in MODULES for option in module.OPTIONS]
    for flag, kind, full, quick, what in options:
        p.add_argument(
            flag,
            type=kind,
            help=f"{what} [{full}" + (f"; quick {quick}]" if quick != full else "]"),
        )
    args = p.parse_args(argv)
    for flag, _, full, quick, _ in options:
        if getattr(args, dest := flag[2:].replace("-", "_")) is None:
            setattr(args, dest, quick if args.quick else full)
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    args.sections = {s for s in args.sections.split(",") if s}
    if unknown := args.sections - set(SECTIONS):
        raise SystemExit(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
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

    from bench import seed
    from bench.workers import LedgerPool

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    ledger_path, git = db.RESULTS / f"ledger-{stamp}.json", db.git_state()
    meta = {"started_utc": stamp, "argv": sys.argv[1:], "quick": args.quick, "todos": args.todos}
    meta |= {"reps": args.reps, "cpus": os.cpu_count(), "platform": platform.platform()}
    meta |= {"python": platform.python_version(), "django": django.get_version(), **env}
    meta |= {"git": git, "code": db.code_line(git), "server": db.server_facts()}
    meta |= {"loadavg_start": [round(x, 2) for x in load0], "ledger_path": ledger_path.name}
    ledger = Ledger(meta)
    ctx = SimpleNamespace(args=args, ledger=ledger, stamp=stamp, pool=None)
    ctx.endpoint_id = seed.make_endpoint()  # and the user "bench", whose team every section uses
    if args.sections & {"main", "growth", "peers"}:  # they drain with the ledger's workers
        size = max([*args.workers, args.growth_workers, *args.peer_workers])
        log(
            f"{env['database']} ({'embedded' if env['embedded'] else 'DATABASE_URL'}); {size} workers"
        )
        ctx.pool = LedgerPool(size)
    try:
        if ctx.pool is not None:  # warm-up: both loops once at full width (not recorded)
            warm = seed.Scenario("warm-up", ctx.endpoint_id, None)
            for loop in ("bare", "ours"):
                warm.reset(loop, max(200, args.todos // 4))
                ctx.pool.run(loop, size, ctx.endpoint_id, False)
        if args.sections & {"main", "growth"}:
            inprocess.run_section(ctx)
        if "http" in args.sections:
            httpbench.run_section(ctx)
        if "peers" in args.sections and peers.available():
            peers.run_section(ctx)
        elif "peers" in args.sections:
            log("peers: procrastinate is not installed (make bench installs it); section skipped")
    finally:
        if ctx.pool is not None:
            ctx.pool.close()
    if "fleet" in args.sections:
        fleet.run_section(ctx)
    if "cluster" in args.sections:  # its own PostgreSQL pair, PgBouncer, HAProxy and nodes
        cluster.run_section(ctx)
    if "live" in args.sections:  # one served node, a Chromium and hundreds of Board streams
        live.run_section(ctx)
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


def render(ledger: Ledger) -> str:
    """Every section's table that ran, then the summary table."""
    notes, m = ledger.notes, ledger.meta
    parts = [
        inprocess.render(ledger) if ledger.all_cells else "",
        *(
            module.render(notes[key])
            for key, module in (
                ("http", httpbench),
                ("peers", peers),
                ("fleet", fleet),
                ("cluster", cluster),
                ("live", live),
                ("board", board_pages),
            )
            if notes.get(key)
        ),
        f"run took {m.get('duration_s', 0):.0f} s; load average before/after "
        f"{m.get('loadavg_start')} / {m.get('loadavg_end')}; ledger: {m.get('ledger_path')}",
        summary.render(ledger),
    ]
    return "\n\n".join(p for p in parts if p)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):  # re-print a stored run
        print(render(Ledger.load(sys.argv[1])))
        raise SystemExit(0)
    raise SystemExit(main())
