"""The peer in the same run: Procrastinate next to ours (``--sections peers``).

    .venv/bin/python bench/run.py --sections peers            # this section alone (~3 min)
    .venv/bin/python bench/run.py --sections peers --quick    # 300 jobs, one drain per cell

Procrastinate (https://procrastinate.readthedocs.io/) is a PostgreSQL task queue for Python
and Django: ``FOR UPDATE SKIP LOCKED`` in a PL/pgSQL function, a jobs table and an events
table written by triggers. It is installed by ``make bench`` only (the ``bench`` extra).

The same drain for three systems, on the same PostgreSQL server in the same run, at each
worker count (1 and 4 processes): N jobs are put in the queue first (not timed), then W
worker processes, started beforehand and released together at a barrier, take and finish
jobs until the queue is empty. Wall time runs from just before the first "go" to the last
worker's end; jobs/s = N / wall.

- **procrastinate**: its own database (``switchboard_bench_peer``, schema applied with
  ``app.schema_manager.apply_schema()``); N jobs of a no-op ``async def`` task deferred with
  ``batch_defer``; each worker process runs ``app.run_worker_async(queues=["bench"],
  concurrency=1, wait=False, listen_notify=False, install_signal_handlers=False)`` on a
  ``PsycopgConnector`` with its defaults (``procrastinate-ac``: the same with the pool's
  connections in autocommit, a tuning that drops the BEGIN/COMMIT procrastinate's default
  pool puts around each single-statement call). ``wait=False``: the worker takes jobs back to back
  and stops the first time the queue is empty, so it never sleeps on
  ``fetch_job_polling_interval`` (that timer only runs with ``wait=True``); ``listen_notify``
  is off because the jobs are all deferred before the workers start (LISTEN would only add a
  connection). Per-job INFO logs are off (no handler configured; the root level is WARNING),
  as ours are.
- **ours, in-process**: ``queues.transitions.claim_next`` + ``complete`` called directly in
  the worker processes of bench/pool.py (the ledger section's loop, no HTTP).
- **ours, HTTP client**: the same verbs through ``switchboard.client.Client`` against
  ``switchboard serve`` (gunicorn), one client process per worker (bench/httpbench.py's
  clients).

Each drain starts from the same kind of state for every system: a history of finished jobs
with their side rows (the warm-up drains' N jobs per system: procrastinate's jobs and events,
our todos and attempts), the previous drain's jobs deleted, VACUUM (ANALYZE), N jobs queued,
ANALYZE, CHECKPOINT: the ledger section's "history" scenario. (From freshly truncated tables
ours is slower: its "empty" rows in the ledger table.) Order alternated per run. Recorded per drain: jobs/s, the claim
latency seen by the worker (ours: the claim_next call, in-process or the HTTP request;
procrastinate: ``JobManager.fetch_job``, timed by wrapping it in the worker process), CPU
seconds of the worker processes, of gunicorn (HTTP only) and of every PostgreSQL server
process (from /proc, when the server is local), and WAL bytes, each per job.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
PEER_DB = "switchboard_bench_peer"
QUEUE = "bench"
TASK = "bench_noop"
SYSTEMS = ("procrastinate", "procrastinate-ac", "ours", "ours-http")
LABELS = {
    "procrastinate": "procrastinate",
    "procrastinate-ac": "procrastinate, autocommit",
    "ours": "ours, in-process",
    "ours-http": "ours, HTTP client",
}
PEERS = ("procrastinate", "procrastinate-ac")

from bench.pool import DrainFailed, stop_workers  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- options (hooked into bench/run.py's parser) ------------------------------------------


def add_arguments(p) -> None:
    p.add_argument("--peer-jobs", type=int, default=None, help="jobs per drain [2000; quick 300]")
    p.add_argument(
        "--peer-workers", type=_ints, default=None, help="worker processes per drain [1,4]"
    )
    p.add_argument(
        "--peer-reps", type=int, default=None, help="drains per cell, order alternated [3; quick 1]"
    )
    p.add_argument(
        "--peer-systems",
        default=",".join(SYSTEMS),
        help=f"which of {', '.join(SYSTEMS)} to drain [all]; procrastinate-ac is procrastinate "
        "with its pool's connections in autocommit (no BEGIN/COMMIT around each call)",
    )


def finish_arguments(args) -> None:
    args.peer_jobs = args.peer_jobs or (300 if args.quick else 2000)
    args.peer_workers = args.peer_workers or [1, 4]
    args.peer_reps = args.peer_reps or (1 if args.quick else 3)
    args.peer_systems = [x for x in args.peer_systems.split(",") if x]
    for name in args.peer_systems:
        if name not in SYSTEMS:
            raise SystemExit(f"unknown --peer-systems {name!r}; known: {', '.join(SYSTEMS)}")
    if "procrastinate" not in args.peer_systems:
        raise SystemExit("--peer-systems: procrastinate (the reference of every ratio) is needed")


# --- the peer's database and app ----------------------------------------------------------


def available() -> bool:
    """Whether procrastinate is installed (the ``bench`` extra; ``make bench`` installs it)."""
    import importlib.util

    return importlib.util.find_spec("procrastinate") is not None


def _server_settings() -> dict:
    from switchboard import dburl

    return dburl.parse(os.environ["DATABASE_URL"])


def peer_conninfo() -> str:
    """libpq connection string for the peer's database on the bench's server."""
    from bench import db

    return db.conninfo(_server_settings(), PEER_DB)


def _admin():
    from bench import db

    return db._connect(_server_settings(), "postgres")  # noqa: SLF001 - the bench's own helper


def create_peer_database() -> str:
    """(Re)create the peer's database and apply procrastinate's schema; returns its conninfo."""
    with _admin() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {PEER_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {PEER_DB}")
    conninfo = peer_conninfo()
    app = make_app(conninfo)
    app.open()
    try:
        app.schema_manager.apply_schema()
    finally:
        app.close()
    return conninfo


def drop_peer_database() -> None:
    try:
        with _admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PEER_DB} WITH (FORCE)")
    except Exception as exc:  # noqa: BLE001 - best effort at exit
        print(f"note: could not drop {PEER_DB}: {exc}", file=sys.stderr)


def make_app(conninfo: str, *, autocommit: bool = False):
    """A procrastinate App with the no-op task, on the connector procrastinate documents
    (PsycopgConnector: a psycopg_pool.AsyncConnectionPool with its defaults). ``autocommit``
    (the procrastinate-ac variant) passes ``kwargs={"autocommit": True}`` to the pool: each of
    procrastinate's calls is one statement, so this only drops the BEGIN and COMMIT."""
    import procrastinate

    extra = {"kwargs": {"autocommit": True}} if autocommit else {}
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=conninfo, **extra))

    @app.task(name=TASK, queue=QUEUE)
    async def bench_noop() -> None:
        return None

    return app


# --- procrastinate's worker processes -----------------------------------------------------


def peer_main(conn, index: int, conninfo: str) -> None:
    """Entry point of a procrastinate worker process (multiprocessing 'spawn').

    parent -> ("prepare",)   worker -> ("ready",)
    parent -> ("go",)        worker -> ("done", stats)
    parent -> ("stop",)
    """
    asyncio.run(_peer_loop(conn, index, conninfo))


async def _peer_loop(conn, index: int, conninfo: str) -> None:
    clock = time.perf_counter
    lat: list[float] = []
    finish_lat: list[float] = []
    apps = {}
    for system in PEERS:
        app = apps[system] = make_app(conninfo, autocommit=system == "procrastinate-ac")
        manager = app.job_manager

        # The claim latency, as ours is timed: the call that takes the next job, seen by
        # the worker (pool checkout, the statement, its transaction).
        async def timed_fetch(*args, _fetch=manager.fetch_job, **kwargs):
            t = clock()
            job = await _fetch(*args, **kwargs)
            if job is not None:
                lat.append(clock() - t)
            return job

        async def timed_finish(*args, _finish=manager.finish_job, **kwargs):
            t = clock()
            try:
                return await _finish(*args, **kwargs)
            finally:
                finish_lat.append(clock() - t)

        manager.fetch_job = timed_fetch
        manager.finish_job = timed_finish
        await app.open_async()
    try:
        for app in apps.values():
            await app.check_connection_async()
        conn.send(("hello", os.getpid()))
        while True:
            msg = conn.recv()  # blocks the loop between drains: nothing of ours runs then
            if msg[0] == "stop":
                conn.send(("stopped",))
                return
            assert msg[0] == "prepare", msg
            app = apps[msg[1]]
            lat.clear()
            finish_lat.clear()
            await app.check_connection_async()  # a live pool before the barrier
            conn.send(("ready",))
            go = conn.recv()
            assert go[0] == "go", go
            cpu0 = time.process_time()
            start = clock()
            error = None
            try:
                await app.run_worker_async(
                    queues=[QUEUE],
                    name=f"bench-{index}",
                    concurrency=1,
                    wait=False,
                    listen_notify=False,
                    install_signal_handlers=False,
                )
            except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
                error = f"{type(exc).__name__}: {exc}"
            end = clock()
            conn.send(
                (
                    "done",
                    {
                        "n": len(lat),
                        "start": start,
                        "end": end,
                        "lat": list(lat),
                        "finish_lat": list(finish_lat),
                        "cpu": time.process_time() - cpu0,
                        "error": error,
                    },
                )
            )
    finally:
        for app in apps.values():
            await app.close_async()


class PeerWorkers:
    def __init__(self, size: int, conninfo: str):
        ctx = mp.get_context("spawn")
        self.pipes, self.procs = [], []
        for i in range(size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=peer_main, args=(child, i, conninfo), daemon=True, name=f"bench-peer-{i}"
            )
            proc.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(proc)
        for pipe in self.pipes:
            msg = pipe.recv()
            assert msg[0] == "hello", msg

    def drain(self, system: str, workers: int) -> dict:
        pipes = self.pipes[:workers]
        for pipe in pipes:
            pipe.send(("prepare", system))
        for pipe in pipes:
            msg = pipe.recv()
            assert msg[0] == "ready", msg
        t0 = time.perf_counter()
        for pipe in pipes:
            pipe.send(("go",))
        results = [pipe.recv()[1] for pipe in pipes]
        errors = [r["error"] for r in results if r["error"]]
        if errors:
            raise DrainFailed(f"{system} drain failed: {errors[0]}")
        return {
            "n": sum(r["n"] for r in results),
            "wall": max(r["end"] for r in results) - t0,
            "lat": [x for r in results for x in r["lat"]],
            "finish_lat": [x for r in results for x in r["finish_lat"]],
            "per_worker": [r["n"] for r in results],
            "worker_cpu": sum(r["cpu"] for r in results),
        }

    def close(self) -> None:
        stop_workers(self.pipes, self.procs)


# --- the tables: each drain from the same state -------------------------------------------


class Queues:
    """The tables each drain starts from, alike for both systems: the history the warm-up
    drains left (finished jobs with their side rows: procrastinate's events, our attempts),
    then per drain: the previous drain's jobs deleted, VACUUM (ANALYZE), N jobs queued,
    ANALYZE, CHECKPOINT (bench/seed.py's "history" scenario, for both)."""

    def __init__(self, conninfo: str, endpoint_id: int):
        import psycopg

        self.endpoint_id = endpoint_id
        self.peer = psycopg.connect(conninfo, autocommit=True)
        self.app = make_app(conninfo)
        self.app.open()
        self.baseline = {"peer": None, "ours": None}

    def _peer_sql(self, *statements: str) -> None:
        for statement in statements:
            self.peer.execute(statement)

    def queue(self, system: str, jobs: int) -> None:
        """N more jobs, without touching what is there (the warm-up)."""
        from bench import seed

        if system in PEERS:
            self.app.tasks[TASK].batch_defer(*({} for _ in range(jobs)))
        else:
            seed.add_pending("ours", self.endpoint_id, jobs)

    def mark_baseline(self) -> None:
        """What is in the tables now (the warm-up drains' finished jobs) is the history."""
        from bench import seed

        self.baseline["peer"] = self.peer.execute(
            "SELECT coalesce(max(id), 0) FROM procrastinate_jobs"
        ).fetchone()[0]
        self.baseline["ours"] = seed.max_id("ours")

    def reset(self, system: str, jobs: int) -> None:
        from bench import seed

        if system in PEERS:
            self._peer_sql(
                # events go with their jobs (ON DELETE CASCADE)
                f"DELETE FROM procrastinate_jobs WHERE id > {int(self.baseline['peer'])}",
                "DELETE FROM procrastinate_workers",
                "VACUUM (ANALYZE) procrastinate_jobs",
                "VACUUM (ANALYZE) procrastinate_events",
            )
            self.queue(system, jobs)
            self._peer_sql("ANALYZE procrastinate_jobs", "ANALYZE procrastinate_events")
        else:
            seed.delete_after("ours", self.baseline["ours"])
            seed.vacuum_analyze("ours")
            self.queue(system, jobs)
            seed.analyze("ours")
        seed.checkpoint()

    def history(self) -> dict:
        from bench import seed

        ours = seed.counts("ours")
        return {
            "procrastinate jobs": self.baseline["peer"],
            "events": self.peer.execute(
                f"SELECT count(*) FROM procrastinate_events WHERE job_id <= "
                f"{int(self.baseline['peer'])}"
            ).fetchone()[0],
            "our todos": ours["todos"],
            "attempts": ours["todo_attempts"],
        }

    def unfinished(self, system: str) -> int:
        from bench import seed

        if system in PEERS:
            return self.peer.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status <> 'succeeded'"
            ).fetchone()[0]
        return seed.unfinished("ours", self.baseline["ours"] or 0)

    def writes(self, system: str) -> dict:
        """Rows the last drain left, as a check on what each system writes per job."""
        if system in PEERS:
            base = int(self.baseline["peer"] or 0)
            return {
                "jobs": self.peer.execute(
                    f"SELECT count(*) FROM procrastinate_jobs WHERE id > {base}"
                ).fetchone()[0],
                "events": dict(
                    self.peer.execute(
                        "SELECT type::text, count(*) FROM procrastinate_events "
                        f"WHERE job_id > {base} GROUP BY 1 ORDER BY 1"
                    ).fetchall()
                ),
            }
        from django.db import connection

        base = int(self.baseline["ours"] or 0)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT (SELECT count(*) FROM todos WHERE id > %s),"
                " (SELECT count(*) FROM todo_attempts WHERE todo_id > %s)",
                (base, base),
            )
            todos, attempts = cursor.fetchone()
        return {"todos": todos, "todo_attempts": attempts}

    def close(self) -> None:
        self.app.close()
        self.peer.close()


# --- CPU of the whole PostgreSQL server ----------------------------------------------------


def _postmaster_pid() -> int | None:
    """The server's postmaster, as the parent of this session's backend (local servers)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    try:
        with open(f"/proc/{backend}/stat", "rb") as fh:
            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        with open(f"/proc/{ppid}/cmdline", "rb") as fh:
            return ppid if b"postgres" in fh.read() else None
    except (OSError, IndexError, ValueError):
        return None


def _server_cpu(postmaster: int | None) -> dict[int, float] | None:
    """utime+stime of every process of the server (backends of both databases, WAL writer,
    checkpointer, autovacuum): procrastinate's backends live in another database, so the
    whole server is the one measure that treats both alike."""
    if postmaster is None:
        return None
    from bench.httpbench import _children, _cpu_of

    return _cpu_of([postmaster, *_children(postmaster)])


def _delta(before, after) -> float | None:
    if before is None or after is None:
        return None
    from bench.httpbench import _delta as delta

    return delta(before, after)


# --- the section --------------------------------------------------------------------------


def _vend_endpoint() -> tuple[int, str]:
    from django.contrib.auth import get_user_model

    from queues import endpoints

    user = get_user_model().objects.get(username="bench")  # made by seed.make_endpoint
    endpoint, token = endpoints.vend(user.teams.get(), "bench-peer", verbs="all")
    return endpoint.pk, token


def run_section(args, *, ledger, pool, stamp: str) -> dict:
    """The three systems' drains at each worker count; stores ``ledger.notes["peers"]``."""
    import procrastinate

    from bench import httpbench, seed
    from bench.ledger import percentile

    started = time.monotonic()
    load0 = [round(x, 2) for x in os.getloadavg()]
    t = time.monotonic()
    conninfo = create_peer_database()
    _log(f"peers: database {PEER_DB} with procrastinate's schema in {time.monotonic() - t:.1f}s")
    endpoint_id, token = _vend_endpoint()
    queues = Queues(conninfo, endpoint_id)
    postmaster = _postmaster_pid()
    size = max(args.peer_workers)
    peers = PeerWorkers(size, conninfo)
    clients = httpbench.Clients(size)
    server = httpbench.Server(RESULTS / f"peers-server-{stamp}.log")
    _log(f"peers: switchboard serve up on {server.base_url}; {size} procrastinate workers")

    def wal() -> int:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
            return cursor.fetchone()[0]

    def run(system: str, workers: int, jobs: int, warm_up: bool = False) -> dict:
        if warm_up:
            queues.queue(system, jobs)
        else:
            queues.reset(system, jobs)
        wal0, pg0 = wal(), _server_cpu(postmaster)
        if system in PEERS:
            s = peers.drain(system, workers)
            gunicorn = None
        elif system == "ours":
            s = pool.drain("ours", workers, endpoint_id, False)
            s["worker_cpu"] = s["client_cpu"]
            gunicorn = None
        else:
            g0 = httpbench._cpu_of(server.pids())
            s = clients.drain(
                workers, server.base_url, token, lambda: {"gunicorn": None, "postgres": None}
            )
            gunicorn = httpbench._delta(g0, httpbench._cpu_of(server.pids()))
            s["lat"] = s["claim"]
            s["finish_lat"] = s["complete"]
            s["worker_cpu"] = s["client_cpu"]
            s["per_worker"] = s["per_client"]
        pg = _delta(pg0, _server_cpu(postmaster))
        wal1 = wal()
        left = queues.unfinished(system)
        if s["n"] != jobs or left:
            raise DrainFailed(
                f"{system} at {workers} workers: {s['n']} of {jobs} done, {left} left"
            )
        return {
            "s": s,
            "gunicorn_cpu": gunicorn,
            "postgres_cpu": pg,
            "wal_bytes": wal1 - wal0,
        }

    drains: list[dict] = []
    writes: dict = {}
    try:
        # Warm-up, not recorded: every system once at full width (imports, pools, plans);
        # the jobs it finishes are the history every drain starts from (N per system).
        systems = [x for x in SYSTEMS if x in args.peer_systems]
        seed.truncate("ours")  # what earlier sections left; procrastinate's tables are new
        for system in systems:
            run(system, size, args.peer_jobs, warm_up=True)
        queues.mark_baseline()
        history = queues.history()
        _log(f"peers: warm-up done; history {history}")
        for workers in args.peer_workers:
            for rep in range(args.peer_reps):
                order = systems if rep % 2 == 0 else systems[::-1]
                for pos, system in enumerate(order):
                    r = run(system, workers, args.peer_jobs)
                    s, n = r["s"], r["s"]["n"]
                    if system not in writes:
                        writes[system] = queues.writes(system)
                    d = {
                        "system": system,
                        "workers": workers,
                        "rep": rep,
                        "position": pos,
                        "jobs": n,
                        "wall_s": round(s["wall"], 4),
                        "jobs_per_s": round(n / s["wall"], 1),
                        "claim_p50_ms": _ms(percentile(s["lat"], 50)),
                        "claim_p95_ms": _ms(percentile(s["lat"], 95)),
                        "finish_p50_ms": _ms(percentile(s.get("finish_lat") or [], 50)),
                        "cpu_ms_per_job": {
                            "workers": round(s["worker_cpu"] * 1000 / n, 3),
                            "gunicorn": None
                            if r["gunicorn_cpu"] is None
                            else round(r["gunicorn_cpu"] * 1000 / n, 3),
                            "postgres": None
                            if r["postgres_cpu"] is None
                            else round(r["postgres_cpu"] * 1000 / n, 3),
                        },
                        "wal_bytes_per_job": round(r["wal_bytes"] / n, 1),
                        "per_worker": s["per_worker"],
                        "_lat": s["lat"],
                    }
                    drains.append(d)
                    _log(
                        f"peers: {LABELS[system]:18s} w={workers} rep {rep}: "
                        f"{d['jobs_per_s']:.0f} jobs/s, claim p50/p95 "
                        f"{d['claim_p50_ms']:.2f}/{d['claim_p95_ms']:.2f} ms"
                    )
    finally:
        server.stop()
        clients.close()
        peers.close()
        queues.close()
        if not getattr(args, "keep_db", False):
            drop_peer_database()

    note = {
        "jobs": args.peer_jobs,
        "workers": args.peer_workers,
        "reps": args.peer_reps,
        "systems": args.peer_systems,
        "history": history,
        "procrastinate_version": procrastinate.__version__,
        "cpus": os.cpu_count(),
        "server_cpu_measured": postmaster is not None,
        "cells": _cells(drains, args.peer_workers),
        "drains": drains,
        "writes": writes,
        "server_log": server.log_summary(),
        "git": _git(),
        "duration_s": round(time.monotonic() - started, 1),
        "loadavg_start": load0,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }
    ledger.notes["peers"] = note
    (RESULTS / f"peers-{stamp}.txt").write_text(render(note) + "\n")
    _log(f"peers: section took {note['duration_s']:.0f}s")
    return note


def _git() -> dict:
    from bench.run import git_state

    return git_state()


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _cells(drains: list[dict], worker_counts: list[int]) -> list[dict]:
    from bench.ledger import percentile

    cells = []
    for workers in worker_counts:
        by_rep = {}
        for d in drains:
            if d["workers"] == workers:
                by_rep.setdefault(d["rep"], {})[d["system"]] = d["jobs_per_s"]
        for system in SYSTEMS:
            mine = [d for d in drains if d["workers"] == workers and d["system"] == system]
            if not mine:
                continue
            lat = [x for d in mine for x in d["_lat"]]
            cpu = {}
            for part in ("workers", "gunicorn", "postgres"):
                vals = [d["cpu_ms_per_job"][part] for d in mine]
                cpu[part] = (
                    None if any(v is None for v in vals) else round(statistics.median(vals), 3)
                )
            cpu["total"] = (
                None
                if cpu["postgres"] is None
                else round(sum(v for v in cpu.values() if v is not None), 3)
            )
            per_rep = [
                reps[system] / reps["procrastinate"]
                for reps in by_rep.values()
                if system in reps and reps.get("procrastinate")
            ]
            cells.append(
                {
                    "system": system,
                    "workers": workers,
                    "runs": len(mine),
                    "jobs_per_s": statistics.median(d["jobs_per_s"] for d in mine),
                    "jobs_per_s_all": [d["jobs_per_s"] for d in mine],
                    "claim_p50_ms": _ms(percentile(lat, 50)),
                    "claim_p95_ms": _ms(percentile(lat, 95)),
                    "finish_p50_ms": statistics.median(
                        d["finish_p50_ms"] for d in mine if d["finish_p50_ms"] is not None
                    )
                    if any(d["finish_p50_ms"] is not None for d in mine)
                    else None,
                    "cpu_ms_per_job": cpu,
                    "wal_bytes_per_job": statistics.median(d["wal_bytes_per_job"] for d in mine),
                    "vs_procrastinate": None
                    if not per_rep
                    else {
                        "median": round(statistics.median(per_rep), 3),
                        "min": round(min(per_rep), 3),
                        "max": round(max(per_rep), 3),
                    },
                }
            )
    for d in drains:
        d.pop("_lat", None)
    # CPU ratio beside the wall-clock one: procrastinate's CPU per job / this system's.
    for c in cells:
        peer = next(
            (x for x in cells if x["system"] == "procrastinate" and x["workers"] == c["workers"]),
            None,
        )
        c["cpu_vs_procrastinate"] = (
            round(peer["cpu_ms_per_job"]["total"] / c["cpu_ms_per_job"]["total"], 3)
            if peer and peer["cpu_ms_per_job"]["total"] and c["cpu_ms_per_job"]["total"]
            else None
        )
    return cells


# --- the table ----------------------------------------------------------------------------


def _f(x, fmt: str = "{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def _ratio(r: dict | None) -> str:
    if not r:
        return "-"
    if r["min"] == r["max"]:
        return f"{r['median']:.2f}"
    return f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"


PER_JOB = [
    "Per job, what each writes (the rows a drain left are checked after the first drain of each):",
    "  procrastinate: fetch = procrastinate_fetch_job_v2() (SKIP LOCKED pick, UPDATE the job "
    "to doing, trigger INSERTs a 'started' event); finish = procrastinate_finish_job_v1()",
    "    (UPDATE to succeeded, trigger INSERTs a 'succeeded' event). Each call is its own "
    "transaction on a pooled connection: pool check (an empty query), BEGIN, the call, COMMIT.",
    "    Plus per worker: register/unregister, a heartbeat every 10 s, an abort poll every 5 s "
    "while a job runs. No lease, no attempt history, nothing returned but the job row.",
    "  procrastinate, autocommit: the same, its pool's connections in autocommit (PsycopgConnector("
    "kwargs={'autocommit': True})): pool check + the call, no BEGIN/COMMIT (a tuning, not its "
    "default).",
    "  ours: claim_next = one autocommit statement (SKIP LOCKED pick, UPDATE the todo with "
    "lease and counters, INSERT a 27-column attempt row, read back up to 5 prior attempts,",
    "    prune history over the cap, return the todo and attempts); complete = one statement "
    "(UPDATE the todo to done with its result, close the attempt with outcome and result).",
    "  ours over HTTP adds, per request: the client's HTTP/1.1 keep-alive round trip, gunicorn, "
    "Django, the endpoint's token lookup (one SELECT), JSON in and out, the access log line.",
]


def render(note: dict) -> str:
    from bench.ledger import _table

    cores = note["cpus"] or 1
    g = note.get("git") or {}
    out = [
        f"The peer: Procrastinate {note['procrastinate_version']} next to ours, "
        f"{note['jobs']:,} no-op jobs per drain, queued first then drained by "
        f"{' and '.join(map(str, note['workers']))} worker processes, on the same PostgreSQL "
        f"server in the same run",
        f"(procrastinate in its own database {PEER_DB}); {note['reps']} drain(s) per cell, "
        "order alternated per run; jobs/s = median over drains (all drains in brackets); "
        "claim latency pooled over the drains.",
        "Every drain starts from the same kind of state for both: the history the warm-up "
        "drains finished ("
        + ", ".join(f"{k} {v:,}" for k, v in (note.get("history") or {}).items())
        + "), VACUUM (ANALYZE), N jobs queued, ANALYZE, CHECKPOINT.",
        f"code {g.get('head', '?')[:10]}"
        + (" + uncommitted changes in " + ", ".join(g["dirty"]) if g.get("dirty") else ""),
        "",
    ]
    headers = [
        "system",
        "wk",
        "jobs/s",
        "x procrastinate",
        "claim p50/p95 ms",
        "CPU ms/job workers+gunicorn+pg = total",
        "CPU x procr.",
        "CPU ceiling jobs/s",
        "WAL B/job",
    ]
    rows = []
    for c in note["cells"]:
        cpu = c["cpu_ms_per_job"]
        allv = c["jobs_per_s_all"]
        rows.append(
            [
                LABELS[c["system"]],
                str(c["workers"]),
                f"{c['jobs_per_s']:.0f}"
                + (f" ({', '.join(f'{x:.0f}' for x in allv)})" if len(allv) > 1 else ""),
                "1.00" if c["system"] == "procrastinate" else _ratio(c["vs_procrastinate"]),
                f"{_f(c['claim_p50_ms'], '{:.2f}')}/{_f(c['claim_p95_ms'], '{:.2f}')}",
                f"{_f(cpu['workers'], '{:.2f}')}+{_f(cpu['gunicorn'], '{:.2f}')}+"
                f"{_f(cpu['postgres'], '{:.2f}')} = {_f(cpu['total'], '{:.2f}')}",
                _f(c["cpu_vs_procrastinate"], "{:.2f}"),
                _f(cores * 1000 / cpu["total"] if cpu["total"] else None),
                _f(c["wal_bytes_per_job"]),
            ]
        )
    out += _table(headers, rows, {1, 2, 4, 5, 6, 7, 8})
    out += [
        "",
        "x procrastinate = this system's jobs/s / procrastinate's, per run (median, lowest-"
        "highest); CPU x procr. = procrastinate's CPU per job / this system's (the throughput "
        "ratio",
        "when both are CPU-bound on the same cores, barely moved by other load). CPU = the "
        "worker (or client) processes + gunicorn (HTTP) + every PostgreSQL server process; "
        f"ceiling = {cores} cores x 1000 / total.",
        "claim = ours: claim_next (in-process call, or the HTTP request seen by the client); "
        "procrastinate: JobManager.fetch_job seen by its worker.",
        "",
    ]
    out += PER_JOB
    w = note.get("writes") or {}
    if w:
        p = w.get("procrastinate") or {}
        o = w.get("ours") or {}
        out.append(
            f"  rows after a drain of {note['jobs']:,}: procrastinate jobs {p.get('jobs', '-')}, "
            f"events {p.get('events', '-')}; ours todos {o.get('todos', '-')}, todo_attempts "
            f"{o.get('todo_attempts', '-')}"
        )
    sl = note.get("server_log") or {}
    out.append(
        f"server log {sl.get('log', '-')}: access-log statuses "
        + ", ".join(f"{k}: {v}" for k, v in sorted((sl.get("statuses") or {}).items()))
        + f"; {sl.get('other_lines', 0)} other lines"
    )
    out.append(
        f"peers section took {note['duration_s']:.0f} s; load average before/after "
        f"{note['loadavg_start']} / {note['loadavg_end']}"
    )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    import json

    if len(argv) != 2:
        print("usage: python bench/peers.py bench/results/ledger-<timestamp>.json", file=sys.stderr)
        return 2
    data = json.loads(Path(argv[1]).read_text())
    note = data.get("notes", {}).get("peers")
    if not note:
        print("that ledger has no peers section", file=sys.stderr)
        return 1
    print(render(note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
