"""The peer in the same run (section ``peers``): Procrastinate next to ours.

Procrastinate (https://procrastinate.readthedocs.io/) is a PostgreSQL task queue for Python
and Django (``FOR UPDATE SKIP LOCKED`` in a PL/pgSQL function, a jobs table, an events table
written by triggers), installed by ``make bench`` only (the ``bench`` extra). The same drain
for each system on the same server in the same run, at each worker count: N no-op jobs
queued first, then W worker processes released at a barrier take and finish jobs until the
queue is empty; jobs/s = N / wall. Procrastinate runs in its own database with its defaults
(and, as ``procrastinate-ac``, with its pool's connections in autocommit: a tuning), each
worker ``run_worker_async(concurrency=1, wait=False, listen_notify=False)``; ours in-process
(the ledger's workers) and over the Python client against ``switchboard serve``. Every drain
starts from the history the warm-up drains finished, VACUUM (ANALYZE), N jobs queued,
ANALYZE, CHECKPOINT; order reversed every other run. CPU counts the workers (or clients),
gunicorn, and every process of the PostgreSQL server.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from bench import db, httpbench, seed
from bench.inprocess import log
from bench.ledger import ms, percentile, ratio_summary
from bench.table import all_of, f, f2, spread, table
from bench.workers import DrainFailed, Pool, serve

PEER_DB = "switchboard_bench_peer"
QUEUE, TASK = "bench", "bench_noop"
SYSTEMS = ("procrastinate", "procrastinate-ac", "ours", "ours-http")
LABELS = {
    "procrastinate": "procrastinate",
    "procrastinate-ac": "procrastinate, autocommit",
    "ours": "ours, in-process",
    "ours-http": "ours, HTTP client",
}
PEERS = ("procrastinate", "procrastinate-ac")


def add_arguments(p, ints) -> None:
    p.add_argument("--peer-jobs", type=int, default=None, help="jobs per drain [2000; quick 300]")
    p.add_argument("--peer-workers", type=ints, default=[1, 4], help="worker processes [1,4]")
    p.add_argument("--peer-reps", type=int, default=None, help="drains per cell [3; quick 1]")
    p.add_argument("--peer-systems", default=",".join(SYSTEMS), help="which systems [all]")


def finish_arguments(args) -> None:
    args.peer_jobs = args.peer_jobs or (300 if args.quick else 2000)
    args.peer_reps = args.peer_reps or (1 if args.quick else 3)
    args.peer_systems = [x for x in SYSTEMS if x in args.peer_systems.split(",")]
    if "procrastinate" not in args.peer_systems:
        raise SystemExit("--peer-systems: procrastinate (the reference of every ratio) is needed")


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("procrastinate") is not None


def make_app(conninfo: str, *, autocommit: bool = False):
    """A procrastinate App with the no-op task, on PsycopgConnector with its defaults (or its
    pool's connections in autocommit: each call is one statement, so that drops BEGIN/COMMIT)."""
    import procrastinate

    extra = {"kwargs": {"autocommit": True}} if autocommit else {}
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo, **extra))

    @app.task(name=TASK, queue=QUEUE)
    async def bench_noop() -> None:
        return None

    return app


def peer_main(conn, index: int, conninfo: str) -> None:
    """A procrastinate worker process: its claim latency is ``JobManager.fetch_job`` as the
    worker sees it (wrapped here), as ours is the claim_next call."""
    loop = asyncio.new_event_loop()
    lat: list[float] = []
    apps = {s: make_app(conninfo, autocommit=s == "procrastinate-ac") for s in PEERS}
    for app in apps.values():
        manager = app.job_manager

        async def timed_fetch(*args, _fetch=manager.fetch_job, **kwargs):
            t = time.perf_counter()
            job = await _fetch(*args, **kwargs)
            if job is not None:
                lat.append(time.perf_counter() - t)
            return job

        manager.fetch_job = timed_fetch
        loop.run_until_complete(app.open_async())

    def prepare(system: str):
        app = apps[system]
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
        for app in apps.values():
            loop.run_until_complete(app.close_async())


class Queues:
    """The tables every drain starts from, alike for every system."""

    def __init__(self, conninfo: str, endpoint_id: int):
        self.endpoint_id = endpoint_id
        self.peer = db.connect(PEER_DB)
        self.app = make_app(conninfo)
        self.app.open()
        self.baseline = {"peer": 0, "ours": 0}

    def scalar(self, statement: str):
        return self.peer.execute(statement).fetchone()[0]

    def queue(self, system: str, jobs: int) -> None:
        if system in PEERS:
            self.app.tasks[TASK].batch_defer(*({} for _ in range(jobs)))
        else:
            seed.add_pending("ours", self.endpoint_id, jobs)

    def mark_baseline(self) -> dict:
        """What the warm-up drains finished is the history; returns its counts."""
        self.baseline = {
            "peer": self.scalar("SELECT coalesce(max(id), 0) FROM procrastinate_jobs"),
            "ours": seed.max_id("ours"),
        }
        ours = seed.counts("ours")
        return {
            "procrastinate jobs": self.baseline["peer"],
            "events": self.scalar(
                f"SELECT count(*) FROM procrastinate_events WHERE job_id <= {int(self.baseline['peer'])}"
            ),
            "our todos": ours["todos"],
            "attempts": ours["todo_attempts"],
        }

    def reset(self, system: str, jobs: int) -> None:
        if system in PEERS:
            for statement in (  # events go with their jobs (ON DELETE CASCADE)
                f"DELETE FROM procrastinate_jobs WHERE id > {int(self.baseline['peer'])}",
                "DELETE FROM procrastinate_workers",
                "VACUUM (ANALYZE) procrastinate_jobs",
                "VACUUM (ANALYZE) procrastinate_events",
            ):
                self.peer.execute(statement)
            self.queue(system, jobs)
            self.peer.execute("ANALYZE procrastinate_jobs")
            self.peer.execute("ANALYZE procrastinate_events")
        else:
            seed.delete_after("ours", self.baseline["ours"])
            seed.vacuum_analyze("ours")
            self.queue(system, jobs)
            seed.analyze("ours")
        seed.checkpoint()

    def unfinished(self, system: str) -> int:
        if system in PEERS:
            return self.scalar(
                "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            )
        return seed.unfinished("ours", self.baseline["ours"])

    def writes(self, system: str) -> dict:
        """Rows the last drain left: a check on what each system writes per job."""
        if system in PEERS:
            base = int(self.baseline["peer"])
            events = self.peer.execute(
                f"SELECT type::text, count(*) FROM procrastinate_events WHERE job_id > {base} GROUP BY 1 ORDER BY 1"
            )
            return {
                "jobs": self.scalar(f"SELECT count(*) FROM procrastinate_jobs WHERE id > {base}"),
                "events": dict(events.fetchall()),
            }
        base = int(self.baseline["ours"])
        todos, attempts = db.with_cursor(
            "SELECT (SELECT count(*) FROM todos WHERE id > %s), (SELECT count(*) FROM todo_attempts WHERE todo_id > %s)",
            (base, base),
        )
        return {"todos": todos, "todo_attempts": attempts}

    def close(self) -> None:
        self.app.close()
        self.peer.close()


def run_section(ctx) -> None:
    import procrastinate

    args = ctx.args
    started, load0 = time.monotonic(), [round(x, 2) for x in os.getloadavg()]
    db.recreate(db.server_settings(), "postgres", PEER_DB)
    conninfo = db.conninfo(PEER_DB)
    app = make_app(conninfo)
    app.open()
    try:
        app.schema_manager.apply_schema()
    finally:
        app.close()
    endpoint_id, token = httpbench.vend("bench-peer")
    queues = Queues(conninfo, endpoint_id)
    postmaster = db.postmaster_pid()
    size = max(args.peer_workers)
    peers = Pool(peer_main, size, conninfo, name="bench-peer")
    clients = Pool(httpbench.client_main, size, name="bench-peer-client")
    server = httpbench.Server(db.RESULTS / f"peers-server-{ctx.stamp}.log")
    log(f"peers: switchboard serve up on {server.base_url}; {size} procrastinate workers")

    def run(system: str, workers: int, jobs: int, warm_up: bool = False) -> dict:
        queues.queue(system, jobs) if warm_up else queues.reset(system, jobs)
        wal0, pg0 = db.wal_lsn(), db.server_cpu(postmaster)
        gunicorn = None
        if system in PEERS:
            d = peers.drain(workers, system)
            rs = d["results"]
            s = {
                "n": sum(r["n"] for r in rs),
                "wall": d["wall"],
                "lat": [x for r in rs for x in r["lat"]],
                "worker_cpu": sum(r["cpu"] for r in rs),
            }
        elif system == "ours":
            s = ctx.pool.run("ours", workers, endpoint_id, False)
            s["worker_cpu"] = s["client_cpu"]
        else:
            g0 = db.cpu_of(server.pids())
            s = httpbench.http_drain(clients, workers, server, token, False)
            gunicorn = db.cpu_delta(g0, db.cpu_of(server.pids()))
            s["lat"], s["worker_cpu"] = s["claim"], s["client_cpu"]
        pg = db.cpu_delta(pg0, db.server_cpu(postmaster))
        if s["n"] != jobs or queues.unfinished(system):
            raise DrainFailed(f"{system} at {workers} workers: {s['n']} of {jobs} done")
        n = s["n"]
        return {
            "jobs_per_s": round(n / s["wall"], 1),
            "lat": s["lat"],
            "cpu_ms_per_job": {
                "workers": round(s["worker_cpu"] * 1000 / n, 3),
                "gunicorn": None if gunicorn is None else round(gunicorn * 1000 / n, 3),
                "postgres": None if pg is None else round(pg * 1000 / n, 3),
            },
            "wal_bytes_per_job": round((db.wal_lsn() - wal0) / n, 1),
        }

    drains, writes = [], {}
    try:
        # Warm-up, not recorded: every system once at full width; the jobs it finishes are
        # the history every drain starts from (N per system).
        seed.truncate("ours")
        for system in args.peer_systems:
            run(system, size, args.peer_jobs, warm_up=True)
        history = queues.mark_baseline()
        log(f"peers: warm-up done; history {history}")
        for workers in args.peer_workers:
            for rep in range(args.peer_reps):
                for system in args.peer_systems if rep % 2 == 0 else args.peer_systems[::-1]:
                    d = {
                        "system": system,
                        "workers": workers,
                        "rep": rep,
                        **run(system, workers, args.peer_jobs),
                    }
                    writes.setdefault(system, queues.writes(system))
                    drains.append(d)
                    log(
                        f"peers: {LABELS[system]:26s} w={workers} rep {rep}: {d['jobs_per_s']:.0f} jobs/s"
                    )
    finally:
        server.stop()
        clients.close()
        peers.close()
        queues.close()
        if not args.keep_db:
            db.drop_database(PEER_DB)
    note = {
        "jobs": args.peer_jobs,
        "workers": args.peer_workers,
        "reps": args.peer_reps,
        "history": history,
        "procrastinate_version": procrastinate.__version__,
        "cpus": os.cpu_count(),
        "cells": cells(drains, args.peer_workers),
        "writes": writes,
        "server_log": server.log_summary(),
        "git": db.git_state(),
        "duration_s": round(time.monotonic() - started, 1),
        "loadavg": [load0, [round(x, 2) for x in os.getloadavg()]],
    }
    ctx.ledger.notes["peers"] = note
    (db.RESULTS / f"peers-{ctx.stamp}.txt").write_text(render(note) + "\n")


def cells(drains: list[dict], worker_counts: list[int]) -> list[dict]:
    out = []
    for workers in worker_counts:
        by_rep: dict[int, dict] = {}
        for d in drains:
            if d["workers"] == workers:
                by_rep.setdefault(d["rep"], {})[d["system"]] = d["jobs_per_s"]
        for system in SYSTEMS:
            mine = [d for d in drains if d["workers"] == workers and d["system"] == system]
            if not mine:
                continue
            lat = [x for d in mine for x in d["lat"]]
            cpu = {}
            for part in ("workers", "gunicorn", "postgres"):
                vals = [d["cpu_ms_per_job"][part] for d in mine]
                cpu[part] = None if None in vals else round(statistics.median(vals), 3)
            cpu["total"] = (
                None if cpu["postgres"] is None else round(sum(v or 0 for v in cpu.values()), 3)
            )
            out.append(
                {
                    "system": system,
                    "workers": workers,
                    "jobs_per_s": statistics.median(d["jobs_per_s"] for d in mine),
                    "jobs_per_s_all": [d["jobs_per_s"] for d in mine],
                    "claim_p50_ms": ms(percentile(lat, 50)),
                    "claim_p95_ms": ms(percentile(lat, 95)),
                    "cpu_ms_per_job": cpu,
                    "wal_bytes_per_job": statistics.median(d["wal_bytes_per_job"] for d in mine),
                    "vs_procrastinate": ratio_summary(
                        [r[system] / r["procrastinate"] for r in by_rep.values() if system in r]
                    ),
                }
            )
    for c in out:  # procrastinate's CPU per job / this system's
        p = next(x for x in out if x["system"] == "procrastinate" and x["workers"] == c["workers"])
        a, b = p["cpu_ms_per_job"]["total"], c["cpu_ms_per_job"]["total"]
        c["cpu_vs_procrastinate"] = round(a / b, 3) if a and b else None
    return out


PER_JOB = """Per job, what each writes (the rows a drain left are checked after the first drain of each):
  procrastinate: fetch = procrastinate_fetch_job_v2() (SKIP LOCKED pick, UPDATE the job to doing, trigger INSERTs a 'started' event); finish = procrastinate_finish_job_v1()
    (UPDATE to succeeded, trigger INSERTs a 'succeeded' event). Each call is its own transaction on a pooled connection: pool check (an empty query), BEGIN, the call, COMMIT.
    Plus per worker: register/unregister, a heartbeat every 10 s, an abort poll every 5 s while a job runs. No lease, no attempt history, nothing returned but the job row.
  procrastinate, autocommit: the same, its pool's connections in autocommit (PsycopgConnector(kwargs={'autocommit': True})): pool check + the call, no BEGIN/COMMIT (a tuning, not its default).
  ours: claim_next = one autocommit statement (SKIP LOCKED pick, UPDATE the todo with lease and counters, INSERT a 29-column
    attempt row, return the todo; a lapsed lease or history over the cap re-runs it with the takeover and prune arms, and a todo with earlier attempts reads back up to
    5 of them after it); complete = one statement (UPDATE the todo to done with its result, close the attempt with outcome and result).
  ours over HTTP adds, per request: the client's HTTP/1.1 keep-alive round trip, gunicorn, Django, the endpoint's token lookup (one SELECT), JSON in and out, the access log line."""


def render(note: dict) -> str:
    cores = note["cpus"] or 1
    out = [
        f"The peer: Procrastinate {note['procrastinate_version']} next to ours, {note['jobs']:,} "
        f"no-op jobs per drain, queued first then drained by {' and '.join(map(str, note['workers']))} "
        "worker processes, on the same PostgreSQL server in the same run",
        f"(procrastinate in its own database {PEER_DB}); {note['reps']} drain(s) per cell, order "
        "reversed every other run; jobs/s = median over drains (all drains in brackets); claim "
        "latency pooled over the drains.",
        "Every drain starts from the same kind of state for both: the history the warm-up drains "
        "finished (" + ", ".join(f"{k} {v:,}" for k, v in note["history"].items()) + "), VACUUM "
        "(ANALYZE), N jobs queued, ANALYZE, CHECKPOINT.",
        db.code_line(note["git"]),
        "",
    ]
    rows = []
    for c in note["cells"]:
        cpu = c["cpu_ms_per_job"]
        rows.append(
            [
                LABELS[c["system"]],
                c["workers"],
                all_of(c["jobs_per_s_all"]),
                "1.00" if c["system"] == "procrastinate" else spread(c["vs_procrastinate"]),
                f"{f2(c['claim_p50_ms'])}/{f2(c['claim_p95_ms'])}",
                f"{f2(cpu['workers'])}+{f2(cpu['gunicorn'])}+{f2(cpu['postgres'])} = {f2(cpu['total'])}",
                f2(c["cpu_vs_procrastinate"]),
                f(cores * 1000 / cpu["total"] if cpu["total"] else None),
                f(c["wal_bytes_per_job"]),
            ]
        )
    headers = "system|wk|jobs/s|x procrastinate|claim p50/p95 ms|CPU ms/job workers+gunicorn+pg = total|CPU x procr.|CPU ceiling jobs/s|WAL B/job"
    out += table(headers.split("|"), rows)
    w, sl = note["writes"], note["server_log"]
    p, o = w.get("procrastinate") or {}, w.get("ours") or {}
    out += [
        "",
        "x procrastinate = this system's jobs/s / procrastinate's, per run (median, lowest-highest); "
        "CPU x procr. = procrastinate's CPU per job / this system's (the throughput ratio",
        "when both are CPU-bound on the same cores, barely moved by other load). CPU = the worker "
        "(or client) processes + gunicorn (HTTP) + every PostgreSQL server process; ceiling = "
        f"{cores} cores x 1000 / total.",
        "claim = ours: claim_next (in-process call, or the HTTP request seen by the client); "
        "procrastinate: JobManager.fetch_job seen by its worker.",
        "",
        PER_JOB,
        f"  rows after a drain of {note['jobs']:,}: procrastinate jobs {p.get('jobs', '-')}, events "
        f"{p.get('events', '-')}; ours todos {o.get('todos', '-')}, todo_attempts {o.get('todo_attempts', '-')}",
        f"server log {sl['log']}: access-log statuses "
        + ", ".join(f"{k}: {v}" for k, v in sorted(sl["statuses"].items()))
        + f"; {sl['other_lines']} other lines",
        f"peers section took {note['duration_s']:.0f} s; load average before/after "
        f"{note['loadavg'][0]} / {note['loadavg'][1]}",
    ]
    return "\n".join(out)
