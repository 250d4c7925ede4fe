"""Switchboard's benchmarks (``make bench``): every section, or ``--sections``, then the summary
table; ``python -m bench.run ledger.json`` re-prints a run. docs/benchmarks.md, "Running them".
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from types import SimpleNamespace

from bench import a2a, ask, db, growth, httpbench, peers, schedules, summary, waits, workers
from bench.ledger import Ledger
from bench.table import log

SECTIONS = {
    "growth": growth,
    "http": httpbench,
    "peers": peers,
    "ask": ask,
    "a2a": a2a,
    "schedules": schedules,
    "waits": waits,
}
FLAGS = {"--quick": "small counts, one run per cell", "--keep-db": "keep the bench databases"}
MAY_BE_ZERO = {"--growth-history"}  # no history at all is a history to measure


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    for flag, what in FLAGS.items():
        p.add_argument(flag, action="store_true", help=what)
    p.add_argument("--sections", default=",".join(SECTIONS), help=f"of {','.join(SECTIONS)}")
    options = [option for module in SECTIONS.values() for option in module.OPTIONS]
    for flag, kind, full, quick, what in options:
        quick_ = f"; quick {quick}" if quick != full else ""
        p.add_argument(flag, type=kind, help=f"{what} [{full}{quick_}]")
    args = p.parse_args(argv)
    for flag, _, full, quick, _ in options:
        if getattr(args, dest := flag[2:].replace("-", "_")) is None:
            setattr(args, dest, quick if args.quick else full)
        # Every option counts something (todos, workers, drains, keys): none can be 0, which
        # had a section run for minutes and fail on an empty median; a history may be empty.
        given, least = getattr(args, dest), 0 if flag in MAY_BE_ZERO else 1
        counts = given if isinstance(given, list) else [given]
        if not counts or min(counts) < least:
            p.error(f"{flag} must be at least {least}, got {given!r}")
    args.sections = {s for s in args.sections.split(",") if s}
    if unknown := args.sections - set(SECTIONS):
        raise SystemExit(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started, load0 = time.monotonic(), os.getloadavg()
    env = db.prepare_environment()
    db.setup_django()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    workers.check_twin()  # ADR-0039's reference against the schema just migrated
    import django

    from bench import seed

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    ledger_path, git = db.RESULTS / f"ledger-{stamp}.json", db.git_state()
    meta = {"started_utc": stamp, "argv": sys.argv[1:], "quick": args.quick}
    meta |= {"cpus": os.cpu_count(), "platform": platform.platform()}
    meta |= {"python": platform.python_version(), "django": django.get_version(), **env}
    meta |= {"git": git, "code": db.code_line(git), "server": db.server_facts()}
    meta |= {"loadavg_start": [round(x, 2) for x in load0], "ledger_path": ledger_path.name}
    ctx = SimpleNamespace(args=args, ledger=Ledger(meta), stamp=stamp, pool=None)
    ctx.endpoint_id = seed.make_endpoint()  # and the user "bench", whose team every section uses
    if args.sections & {"growth", "peers"}:  # they drain with the ledger's workers
        size = max(args.growth_workers, *args.peer_workers)
        log(f"{env['database']} ({'embedded' if env['embedded'] else 'DATABASE_URL'}): {size}")
        ctx.pool = workers.Pool(workers.ledger_worker, size)
    try:
        for name, module in SECTIONS.items():
            if name in args.sections:
                t = time.monotonic()
                if (note := module.run_section(ctx)) is not None:
                    note |= {"git": db.git_state(), "duration_s": round(time.monotonic() - t, 1)}
                    ctx.ledger.notes[name] = note
                    (db.RESULTS / f"{name}-{stamp}.txt").write_text(module.render(note) + "\n")
    finally:
        if ctx.pool is not None:
            ctx.pool.close()
    ctx.ledger.meta["duration_s"] = round(time.monotonic() - started, 1)
    ctx.ledger.meta["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    ctx.ledger.notes["summary"] = summary.rows(ctx.ledger)
    ctx.ledger.write(ledger_path)
    print(render(ctx.ledger))
    (db.RESULTS / f"summary-{stamp}.txt").write_text(summary.render(ctx.ledger) + "\n")
    if not env["embedded"] and not args.keep_db:
        from django.db import connection

        connection.close()
        db.recreate(db.BENCH_DB, drop_only=True)
    return 0


def render(ledger: Ledger) -> str:
    """Every section's table that ran, then the summary table."""
    m = ledger.meta
    parts = [module.render(ledger.notes[n]) for n, module in SECTIONS.items() if n in ledger.notes]
    parts.append(
        f"run took {m.get('duration_s', 0):.0f} s; load average before/after "
        f"{m.get('loadavg_start')} / {m.get('loadavg_end')}; ledger: {m.get('ledger_path')}"
    )
    return "\n\n".join([*parts, summary.render(ledger)])


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):  # re-print a stored run
        print(render(Ledger.load(sys.argv[1])))
        raise SystemExit(0)
    raise SystemExit(main())
