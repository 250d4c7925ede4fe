"""The peer in the same run (section ``peers``): Procrastinate next to ours in-process, with then
and over the Python client, and ADR-0039's reference ``nohist-then``: docs/benchmarks.md, "The
peer"."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import statistics
import time

from bench import db, httpbench, seed
from bench.ledger import latency, paired, per_todo
from bench.table import all_of, f, f2, ints, log, pp, spread, table
from bench.workers import DrainFailed, Pool, serve

PEER_DB = "switchboard_bench_peer"
QUEUE, TASK = "bench", "bench_noop"
SYSTEMS = {
    "procrastinate": "procrastinate",
    "ours": "ours, in-process",
    "ours-then": "ours, in-process then",
    "ours-http": "ours, HTTP then",
    "nohist-then": "no history, in-process then",
}
NOHIST = {"ours-then": "nohist-then"}  # ADR-0039's ratio: ours against its twin
# A round's order (reversed every other round): Procrastinate between the two drains a bar
# reads against it, each ratio of drains side by side (docs/benchmarks.md, "Keys, a fourth time").
ORDER = ["ours-then", "procrastinate", "ours-http", "ours", "nohist-then"]
assert sorted(ORDER) == sorted(SYSTEMS)
OPTIONS = [  # flag, type, default, --quick's, help
    ("--peer-jobs", int, 2000, 300, "jobs per drain"),
    ("--peer-workers", ints, [1, 4], [1, 4], "worker processes"),
    ("--peer-reps", int, 3, 1, "drains per cell"),
]


def available() -> bool:
    return importlib.util.find_spec("procrastinate") is not None


def make_app(conninfo: str):
    """A procrastinate App with the no-op task, on PsycopgConnector with its defaults."""
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo))

    @app.task(name=TASK, queue=QUEUE)
    async def bench_noop() -> None:
        return None

    return app


def peer_main(conn, index: int, conninfo: str) -> None:
    """A procrastinate worker process; its claim latency is its app's ``fetch_job`` (wrapped
    on this process's own app object), as ours is the call whose answer is the claim."""
    loop, lat, app = asyncio.new_event_loop(), [], make_app(conninfo)
    fetch = app.job_manager.fetch_job

    async def timed_fetch(*args, **kwargs):
        t = time.perf_counter()
        if (job := await fetch(*args, **kwargs)) is not None:
            lat.append(time.perf_counter() - t)
        return job

    app.job_manager.fetch_job = timed_fetch
    loop.run_until_complete(app.open_async())

    def prepare(_system: str):
        loop.run_until_complete(app.check_connection_async())  # a live pool before the barrier
        lat.clear()

        def run() -> dict:
            quiet = {"wait": False, "listen_notify": False, "install_signal_handlers": False}
            worker = app.run_worker_async(
                queues=[QUEUE], name=f"bench-{index}", concurrency=1, **quiet
            )
            loop.run_until_complete(worker)
            return {"n": len(lat), "lat": list(lat)}

        return run

    try:
        serve(conn, prepare)
    finally:
        loop.run_until_complete(app.close_async())


def run_section(ctx) -> dict | None:
    if not available():
        log("peers: procrastinate is not installed (make bench installs it); section skipped")
        return None
    import procrastinate

    args, size = ctx.args, max(ctx.args.peer_workers)
    db.recreate(PEER_DB)
    conninfo = db.conninfo(PEER_DB)
    with make_app(conninfo).open() as app:
        app.schema_manager.apply_schema()
    endpoint_id, token = seed.vend("bench-peer")
    ours = seed.Scenario(endpoint_id, 2 * args.peer_jobs)  # as much history as theirs
    ours.build()
    peer, app, base = db.connect(PEER_DB), make_app(conninfo).open(), 0
    peers = Pool(peer_main, size, conninfo)
    clients = Pool(httpbench.client_main, size)
    server = httpbench.Server(db.RESULTS / f"peers-server-{ctx.stamp}.log")

    def run(system: str, workers: int, jobs: int) -> dict:
        if system == "procrastinate":
            peer.execute(f"DELETE FROM procrastinate_jobs WHERE id > {int(base)}")
            peer.execute("DELETE FROM procrastinate_workers")
            peer.execute("VACUUM (ANALYZE) procrastinate_jobs, procrastinate_events")
            app.tasks[TASK].batch_defer(*({} for _ in range(jobs)))
            peer.execute("ANALYZE procrastinate_jobs, procrastinate_events")
            seed.checkpoint()
            s = peers.drain(workers, system)
            left = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            left = peer.execute(left).fetchone()[0]
        else:
            after = ours.reset(jobs)
            if system == "ours-http":
                s = httpbench.http_drain(clients, workers, server, "HTTP then", token)
            else:
                s = ctx.pool.drain(workers, system, endpoint_id)
            left, want = seed.unfinished(after), 0 if system.startswith("nohist") else jobs
            if (attempts := seed.attempts_after(after)) != want:  # the statements it names ran
                raise DrainFailed(f"{system}: {attempts} attempt rows for {jobs} todos")
        if s["n"] != jobs or left:
            raise DrainFailed(f"{system} at {workers} workers: {s['n']} of {jobs} done")
        cpu = {"workers": s["client_cpu"], "server": s.get("server_cpu"), "postgres": s["pg_cpu"]}
        return {
            "jobs_per_s": round(s["n"] / s["wall"], 1),
            "lat": s["lat"],
            "cpu_ms_per_job": {k: per_todo(v, s["n"]) for k, v in cpu.items()},
            "wal_bytes_per_job": round(s["wal_bytes"] / s["n"], 1),
        }

    drains = []
    try:
        for system in SYSTEMS:  # warm-up, not recorded: procrastinate's jobs are its history
            run(system, size, args.peer_jobs)
        base = peer.execute("SELECT max(id) FROM procrastinate_jobs").fetchone()[0]
        history = {"procrastinate jobs": base, "our done todos": ours.baseline}
        for workers in args.peer_workers:
            for rep in range(args.peer_reps):
                for system in ORDER if rep % 2 == 0 else ORDER[::-1]:
                    d = run(system, workers, args.peer_jobs)
                    drains.append({"system": system, "workers": workers, "rep": rep, **d})
                    log(f"peers: {SYSTEMS[system]:27s} w={workers}: {d['jobs_per_s']:.0f} jobs/s")
    finally:
        server.stop()
        clients.close()
        peers.close()
        app.close()
        peer.close()
        if not args.keep_db:
            db.recreate(PEER_DB, drop_only=True)
    note = {"jobs": args.peer_jobs, "reps": args.peer_reps, "history": history}
    note |= {"procrastinate_version": procrastinate.__version__, "cpus": os.cpu_count()}
    return note | {"cells": cells(drains), "server_log": server.log_summary()["line"]}


def cells(drains: list[dict]) -> list[dict]:
    def of(system: str | None, workers: int) -> list[dict]:
        return [d for d in drains if d["system"] == system and d["workers"] == workers]

    def rate(drain: dict) -> float:
        return drain["jobs_per_s"]

    out, cpus = [], {}
    rows = dict.fromkeys((d["workers"], d["system"]) for d in drains)
    for workers, system in sorted(rows, key=lambda row: (row[0], list(SYSTEMS).index(row[1]))):
        mine, cpu = of(system, workers), {}
        for part in ("workers", "server", "postgres"):
            values = [d["cpu_ms_per_job"][part] for d in mine]
            cpu[part] = None if None in values else round(statistics.median(values), 3)
        total = None if cpu["postgres"] is None else sum(v or 0 for v in cpu.values())
        cpus[system, workers] = cpu = cpu | {"total": total and round(total, 3)}
        out.append(
            {
                "system": system,
                "workers": workers,
                "jobs_per_s": statistics.median(rate(d) for d in mine),
                "jobs_per_s_all": [rate(d) for d in mine],
                "claim": latency([x for d in mine for x in d["lat"]]),
                "cpu_ms_per_job": cpu,
                "wal_bytes_per_job": statistics.median(d["wal_bytes_per_job"] for d in mine),
                "vs_procrastinate": paired(mine, of("procrastinate", workers), rate),
                "vs_nohist": paired(mine, of(NOHIST.get(system), workers), rate),
            }
        )
    for c in out:  # the reference's CPU per job / this system's (ADR-0039's: PostgreSQL's)
        mine, nohist = c["cpu_ms_per_job"], NOHIST.get(c["system"])
        a = cpus.get(("procrastinate", c["workers"]), {}).get("total")
        c["cpu_vs_procrastinate"] = round(a / mine["total"], 3) if a and mine["total"] else None
        a = cpus.get((nohist, c["workers"]), {}).get("postgres")
        c["pg_cpu_vs_nohist"] = round(a / mine["postgres"], 3) if a and mine["postgres"] else None
    return out


def render(note: dict) -> str:
    rows = []
    for c in note["cells"]:
        cpu, adr = c["cpu_ms_per_job"], c["vs_nohist"] and spread(c["vs_nohist"])
        split = f"{f2(cpu['workers'])}+{f2(cpu['server'])}+{f2(cpu['postgres'])}"
        row = [SYSTEMS[c["system"]], c["workers"], all_of(c["jobs_per_s_all"])]
        row += [spread(c["vs_procrastinate"]), pp(c["claim"]), f"{split} = {f2(cpu['total'])}"]
        adr = adr and f"{adr}, PG CPU {f2(c['pg_cpu_vs_nohist'])}"
        rows.append([*row, f2(c["cpu_vs_procrastinate"]), f(c["wal_bytes_per_job"]), adr or ""])
    headers = "system|wk|jobs/s|x procrastinate|claim p50/p95 ms|CPU ms/job workers+server+pg = total|CPU x procr.|WAL B/job|x no history (ADR-0039)"
    history = ", ".join(f"{k} {v:,}" for k, v in note["history"].items())
    return "\n".join(
        [
            f"The peer: Procrastinate {note['procrastinate_version']} next to ours, "
            f"{note['jobs']:,} no-op jobs per drain, {note['reps']} drain(s) per cell, the same "
            f"PostgreSQL server; history: {history}; {db.code_line(note['git'])}",
            "",
            *table(headers.split("|"), rows),
            f"{note['server_log']}; section took {note['duration_s']:.0f} s",
        ]
    )
