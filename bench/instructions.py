"""Instructions per todo in the PostgreSQL backend, ours against nohist (ADR-0039's bar without
the machine's noise).

CPU time on a shared machine drifts 20-40 % over minutes; callgrind counts the instructions
a backend executes, the same count for the same work whatever else runs. Each measurement is
one fresh session that drains N todos one at a time (claim_next + heartbeat + complete, the
``adr`` section's loop: ours, nohist, or once, bench/writeonce.py); two drains of different N
give the instructions per todo by their difference, so connecting, the first plans and the
session's exit cancel out.

Run it against the bench's database on a server started under callgrind, with
``--trace-children=yes`` so every backend is counted (docs/benchmarks.md, "Instructions per
todo", has the commands):

    valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=OUT/cg.%p \\
        postgres -D PGDATA -c autovacuum=off ...
    DATABASE_URL=postgresql://...@/switchboard_bench?host=... \\
        python -m bench.instructions --out OUT [--history 20000] [--small 20 --large 120] \\
        [--systems ours,nohist,once] [--strip-attempts]

The database must hold the bench's schema (a ``make bench`` run with ``--keep-db`` leaves
it); the history is rebuilt here.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path


def drain(system: str, todos: int) -> int:
    """In this process: reset to the history plus ``todos`` + 30 pending, then a fresh
    session drains 30 (warm-up) and ``todos``; returns that session's backend pid."""
    from django.db import connection

    from bench import adr0039, nohist, seed, writeonce
    from queues import db as ledger_db
    from queues.models import Endpoint

    endpoint = Endpoint.objects.order_by("id").first().pk
    twins = nohist.statements()
    if system == "once":
        twins = writeonce.statements(twins)
    claim, beat, done = adr0039._plans(endpoint)
    base = seed._scalar("SELECT coalesce(max(id), 0) FROM todos WHERE title LIKE 'history %%'")
    seed.delete_after("ours", base)
    seed.vacuum_analyze("ours")
    seed.add_pending("ours", endpoint, todos + 30)
    seed.analyze("ours")
    seed.checkpoint()
    connection.close()  # the drain's own session from here

    def run(plan):
        return ledger_db.run(plan if system == "ours" else nohist.swapped(plan, twins))

    for _ in range(todos + 30):
        claimed = run(claim())
        run(beat(claimed))
        run(done(claimed))
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _instructions(out: Path, pid: int) -> int:
    path = out / f"cg.{pid}"
    for _ in range(200):  # the backend writes its file when it exits
        if path.exists() and (m := re.search(r"^totals: (\d+)", path.read_text(), re.M)):
            return int(m.group(1))
        time.sleep(0.1)
    raise SystemExit(f"no callgrind totals in {path}: is the server running under callgrind?")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="callgrind's output directory")
    p.add_argument("--history", type=int, default=20_000, help="done todos before [20000]")
    p.add_argument("--small", type=int, default=20, help="todos of the short drain [20]")
    p.add_argument("--large", type=int, default=120, help="todos of the long drain [120]")
    p.add_argument(
        "--systems",
        default="ours,nohist",
        help="of ours, nohist and once (bench/writeonce.py: the attempt row written at close)",
    )
    p.add_argument(
        "--strip-attempts",
        action="store_true",
        help="first drop todo_attempts' foreign keys, row rules and indexes but two (the bench"
        " database keeps it so: migrate a new one after)",
    )
    p.add_argument("--drain", nargs=2, metavar=("SYSTEM", "TODOS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    from bench import db

    db.setup_django()
    if args.drain:  # a child: one drain, its backend's pid on stdout
        print(drain(args.drain[0], int(args.drain[1])))
        return 0
    from bench import seed
    from queues.models import Endpoint

    first = Endpoint.objects.order_by("id").first()
    endpoint = first.pk if first else seed.make_endpoint()
    seed.Scenario("instructions", endpoint, args.history).build(["ours"])
    systems = args.systems.split(",")
    from django.db import connection

    from bench import writeonce

    with connection.cursor() as cursor:
        if "once" in systems:  # before any drain: every system runs on the same table
            writeonce.add_lease_columns(cursor)
        if args.strip_attempts:
            print("stripped from todo_attempts:", ", ".join(writeonce.strip_attempts(cursor)))
    print(f"instructions per todo in the backend, history {args.history:,}", flush=True)
    per = {}
    for system in systems:
        counts = []
        for todos in (args.small, args.large):
            child = [sys.executable, "-m", "bench.instructions", "--out", str(args.out)]
            got = subprocess.run(
                [*child, "--drain", system, str(todos)],
                capture_output=True,
                text=True,
                check=True,
                env=os.environ,
            )
            counts.append(_instructions(args.out, int(got.stdout.split()[-1])))
        per[system] = (counts[1] - counts[0]) / (args.large - args.small)
        print(f"  {system:7s} {per[system] / 1e6:.3f} M", flush=True)
    for system in ("ours", "once"):
        if system in per and "nohist" in per:
            print(f"  nohist / {system} = {per['nohist'] / per[system]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
