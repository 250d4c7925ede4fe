"""The peer in the same run (section ``peers``): Procrastinate next to ours.

Procrastinate (https://procrastinate.readthedocs.io/) is a PostgreSQL task queue for Python
and Django, installed by ``make bench`` only (the ``bench`` extra). The same drain for each
system on the same server in the same run: N no-op jobs queued first, then W worker processes
released at a barrier take and finish jobs until the queue is empty. Procrastinate runs in its
own database with its defaults, each worker ``run_worker_async(concurrency=1, wait=False,
listen_notify=False)``; ours in-process (the ledger's workers) and over the Python client
against ``switchboard serve``. Every drain starts from history (the jobs procrastinate's
warm-up finished; twice as many done todos of ours), VACUUM (ANALYZE), N jobs queued,
ANALYZE, CHECKPOINT. CPU counts the workers (or clients), the server, and every process of
the PostgreSQL server.

ADR-0039's ratio, in the same drains: ours with ``then`` in-process and over HTTP, each
against the same loop on the same statements without attempt history (bench/nohist.py; over
HTTP a second server, ``python -m bench.nohist``, runs them). Each drain is checked to have
written one attempt a todo, or none on the twins.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
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
    "ours-http": "ours, HTTP",
    "nohist-then": "no history, in-process then",
    "nohist-http": "no history, HTTP",
}
# ADR-0039's ratio: each of ours against the same loop on the same statements without attempt
# history (bench/nohist.py), in-process and over HTTP.
NOHIST = {"ours-then": "nohist-then", "ours-http": "nohist-http"}
# Ours over HTTP as switchboard.client's job() and work() drain a queue: each complete carries
# ``then`` and its answer is the next claim, one request a todo (bench/httpbench.py).
HTTP_PROTOCOL = "HTTP then"


OPTIONS = [  # flag, type, default, --quick's, help
    ("--peer-jobs", int, 2000, 300, "jobs per drain"),
    ("--peer-workers", ints, [1, 4], [1, 4], "worker processes"),
    ("--peer-reps", int, 3, 1, "drains per cell"),
]


def available() -> bool:
    import importlib.util

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
    """A procrastinate worker process; its claim latency is ``JobManager.fetch_job`` as the
    worker sees it (wrapped here), as ours is the claim_next call."""
    loop, lat, app = asyncio.new_event_loop(), [], make_app(conninfo)
    fetch = app.job_manager.fetch_job

    async def timed_fetch(*args, **kwargs):
        t = time.perf_counter()
        job = await fetch(*args, **kwargs)
        if job is not None:
            lat.append(time.perf_counter() - t)
        return job

    app.job_manager.fetch_job = timed_fetch
    loop.run_until_complete(app.open_async())

    def prepare(_system: str):
        loop.run_until_complete(app.check_connection_async())  # a live pool before the barrier
        lat.clear()

        def run() -> dict:
            worker = app.run_worker_async(
                queues=[QUEUE],
                name=f"bench-{index}",
                concurrency=1,
                wait=False,
                listen_notify=False,
                install_signal_handlers=False,
            )
            loop.run_until_complete(worker)
            return {"n": len(lat), "lat": list(lat)}

        return run

    try:
        serve(conn, os.getpid(), prepare)
    finally:
        loop.run_until_complete(app.close_async())


def reset(peer, app, base: int, jobs: int) -> None:
    """Procrastinate back to the history its warm-up finished: the jobs after ``base`` deleted
    (their events with them), VACUUM (ANALYZE), ``jobs`` queued, ANALYZE, CHECKPOINT."""
    peer.execute(f"DELETE FROM procrastinate_jobs WHERE id > {int(base)}")
    peer.execute("DELETE FROM procrastinate_workers")
    peer.execute("VACUUM (ANALYZE) procrastinate_jobs, procrastinate_events")
    app.tasks[TASK].batch_defer(*({} for _ in range(jobs)))
    peer.execute("ANALYZE procrastinate_jobs, procrastinate_events")
    seed.checkpoint()


def run_section(ctx) -> None:
    import procrastinate

    args, started = ctx.args, time.monotonic()
    db.recreate(PEER_DB)
    conninfo = db.conninfo(PEER_DB)
    with make_app(conninfo).open() as app:
        app.schema_manager.apply_schema()
    endpoint_id, token = httpbench.vend("bench-peer")
    ours = seed.Scenario("peers", endpoint_id, 2 * args.peer_jobs)  # as much history as theirs
    ours.build(["ours"])
    peer, app, base = db.connect(PEER_DB), make_app(conninfo).open(), 0
    postmaster, size = db.postmaster_pid(), max(args.peer_workers)
    peers = Pool(peer_main, size, conninfo, name="bench-peer")
    clients = Pool(httpbench.client_main, size, name="bench-peer-client")
    servers = {
        "ours-http": httpbench.Server(db.RESULTS / f"peers-server-{ctx.stamp}.log"),
        "nohist-http": httpbench.Server(
            db.RESULTS / f"peers-nohist-server-{ctx.stamp}.log",
            command=[sys.executable, "-m", "bench.nohist"],
        ),
    }

    def run(system: str, workers: int, jobs: int) -> dict:
        if system == "procrastinate":
            reset(peer, app, base, jobs)
        else:
            after = ours.reset("ours", jobs)
        wal0, pg0 = db.wal_lsn(), db.server_cpu(postmaster)
        if system == "procrastinate":
            d = peers.drain(workers, system)
            s = {"n": sum(r["n"] for r in d["results"]), "wall": d["wall"], "server_cpu": None}
            s["lat"] = [x for r in d["results"] for x in r["lat"]]
            s["client_cpu"] = sum(r["cpu"] for r in d["results"])
            left = "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            left = peer.execute(left).fetchone()[0]
        elif system in ("ours", "ours-then", "nohist-then"):
            s = {**ctx.pool.run(system, workers, endpoint_id, False), "server_cpu": None}
        else:
            s = httpbench.http_drain(clients, workers, servers[system], HTTP_PROTOCOL, token)
            s["lat"] = s["complete"]  # with then, a claim is a complete's answer: its time
        pg = db.cpu_delta(pg0, db.server_cpu(postmaster))
        if system != "procrastinate":
            left = seed.unfinished("ours", after)
            # one attempt a todo, or none on the statements without history: a drain that
            # did not run the statements it names cannot pass
            want = 0 if system.startswith("nohist") else jobs
            if (attempts := seed.attempts_after(after)) != want:
                raise DrainFailed(f"{system}: {attempts} attempt rows for {jobs} todos")
        if s["n"] != jobs or left:
            raise DrainFailed(f"{system} at {workers} workers: {s['n']} of {jobs} done")
        cpu = {"workers": s["client_cpu"], "server": s["server_cpu"], "postgres": pg}
        return {
            "jobs_per_s": round(s["n"] / s["wall"], 1),
            "lat": s["lat"],
            "cpu_ms_per_job": {k: per_todo(v, s["n"]) for k, v in cpu.items()},
            "wal_bytes_per_job": round((db.wal_lsn() - wal0) / s["n"], 1),
        }

    drains = []
    try:
        for system in SYSTEMS:  # warm-up, not recorded: procrastinate's jobs are its history
            run(system, size, args.peer_jobs)
        base = peer.execute("SELECT max(id) FROM procrastinate_jobs").fetchone()[0]
        history = {"procrastinate jobs": base, "our done todos": ours.baseline["ours"]}
        for workers in args.peer_workers:
            for rep in range(args.peer_reps):
                for system in list(SYSTEMS) if rep % 2 == 0 else list(SYSTEMS)[::-1]:
                    d = run(system, workers, args.peer_jobs)
                    drains.append({"system": system, "workers": workers, "rep": rep, **d})
                    log(f"peers: {SYSTEMS[system]:17s} w={workers}: {d['jobs_per_s']:.0f} jobs/s")
    finally:
        for server in servers.values():
            server.stop()
        clients.close()
        peers.close()
        app.close()
        peer.close()
        if not args.keep_db:
            db.drop_database(PEER_DB)
    ctx.ledger.notes["peers"] = note = {
        "jobs": args.peer_jobs,
        "workers": args.peer_workers,
        "reps": args.peer_reps,
        "history": history,
        "procrastinate_version": procrastinate.__version__,
        "cpus": os.cpu_count(),
        "cells": cells(drains),
        "server_log": "; ".join(server.log_line() for server in servers.values()),
        "git": db.git_state(),
        "duration_s": round(time.monotonic() - started, 1),
    }
    (db.RESULTS / f"peers-{ctx.stamp}.txt").write_text(render(note) + "\n")


def cells(drains: list[dict]) -> list[dict]:
    def of(system: str | None, workers: int) -> list[dict]:
        return [d for d in drains if d["system"] == system and d["workers"] == workers]

    def rate(drain: dict) -> float:
        return drain["jobs_per_s"]

    out = []
    for workers, system in dict.fromkeys((d["workers"], d["system"]) for d in drains):
        mine = of(system, workers)
        cpu = {}
        for part in ("workers", "server", "postgres"):
            values = [d["cpu_ms_per_job"][part] for d in mine]
            cpu[part] = None if None in values else round(statistics.median(values), 3)
        cpu["total"] = (
            None if cpu["postgres"] is None else round(sum(v or 0 for v in cpu.values()), 3)
        )
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
                # ADR-0039's ratio (ours against the same loop without attempt history)
                "vs_nohist": paired(mine, of(NOHIST.get(system), workers), rate),
            }
        )

    def cpu_of(system: str | None, workers: int) -> float | None:
        """That system's CPU per job (of this many workers), or None."""
        for c in out:
            if c["system"] == system and c["workers"] == workers:
                return c["cpu_ms_per_job"]["total"]
        return None

    for c in out:  # the reference's CPU per job / this system's
        b = c["cpu_ms_per_job"]["total"]
        for key, reference in (
            ("cpu_vs_procrastinate", "procrastinate"),
            ("cpu_vs_nohist", NOHIST.get(c["system"])),
        ):
            a = cpu_of(reference, c["workers"])
            c[key] = round(a / b, 3) if a and b else None
    return out


def render(note: dict) -> str:
    cores = note["cpus"] or 1
    out = [
        f"The peer: Procrastinate {note['procrastinate_version']} next to ours, {note['jobs']:,} "
        f"no-op jobs per drain, {note['reps']} drain(s) per cell, the same PostgreSQL server; "
        "history: " + ", ".join(f"{k} {v:,}" for k, v in note["history"].items()),
        db.code_line(note["git"]),
        "",
    ]
    rows = []
    for c in note["cells"]:
        cpu = c["cpu_ms_per_job"]
        rows.append(
            [
                SYSTEMS[c["system"]],
                c["workers"],
                all_of(c["jobs_per_s_all"]),
                spread(c["vs_procrastinate"]),
                pp(c["claim"]),
                f"{f2(cpu['workers'])}+{f2(cpu['server'])}+{f2(cpu['postgres'])} = {f2(cpu['total'])}",
                f2(c["cpu_vs_procrastinate"]),
                f(cores * 1000 / cpu["total"] if cpu["total"] else None),
                f(c["wal_bytes_per_job"]),
                f"{spread(c['vs_nohist'])}, CPU {f2(c['cpu_vs_nohist'])}"
                if c.get("vs_nohist")
                else "",
            ]
        )
    headers = "system|wk|jobs/s|x procrastinate|claim p50/p95 ms|CPU ms/job workers+server+pg = total|CPU x procr.|CPU ceiling jobs/s|WAL B/job|x no history (ADR-0039)"
    out += table(headers.split("|"), rows)
    out.append(f"{note['server_log']}; section took {note['duration_s']:.0f} s")
    return "\n".join(out)
