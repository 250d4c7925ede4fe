"""The agent API through the real server: claim_next + complete over HTTP (``--sections http``).

    .venv/bin/python bench/run.py --sections http             # this section alone (~2 min)
    .venv/bin/python bench/run.py --sections http --http-whatif auth-sql,auth-cache
    .venv/bin/python bench/httpbench.py bench/results/ledger-<timestamp>.json   # re-print it

``switchboard serve`` (gunicorn, gthread workers, the settings of switchboard/gunicorn_conf.py
and the environment, unchanged) is started as a subprocess on a free port against the bench
database. N todos are seeded on one endpoint vended for the purpose, on top of N done todos
with closed attempts (the ledger's "history" scenario), and C client processes
(multiprocessing 'spawn', standard library only: ``switchboard.client.Client``, one persistent
keep-alive connection each) loop ``claim_next`` -> ``complete`` until the queue is empty. They
start at a barrier; wall time runs from just before the first "go" to the last client's end.
The clients share the machine's cores with gunicorn and PostgreSQL, as they would in a
one-box deployment.

Recorded per drain: todos/s, requests/s, the client-side latency of each claim_next and
complete (the empty claim that ends a client's loop is not counted), and CPU seconds of the
clients, of gunicorn (master and workers) and of PostgreSQL (this database's backends and the
server's background processes, from /proc when the server is local), per todo. CPU per todo
gives the throughput ceiling on this machine, which other load cannot fake:
cores x 1000 / (CPU ms per todo).

Where the time goes, three ways:
- one request at a time: the WSGI application gunicorn serves (switchboard.wsgi) is called
  in this process with the same requests (a WSGI environ; the response closed, so the
  connection goes back to the pool as under gunicorn), alternating pair by pair with the
  same pair over HTTP to the server; time inside SQL
  statements by ``connection.execute_wrapper``, COMMITs timed apart. gunicorn + HTTP + the
  client = HTTP minus in-process.
- cProfile of those in-process requests (the .pstats go to bench/results/).
- py-spy (when installed in the venv: ``.venv/bin/pip install py-spy``; not a project
  dependency) sampling the gunicorn workers' GIL-holding threads during an extra drain at 4
  clients, which is not in the table.

``--http-whatif`` measures proposed server-side changes (bench/serve_variant.py, patched into
the server process before gunicorn forks) next to a fresh baseline server.

gunicorn's access log cannot be switched off without editing switchboard/gunicorn_conf.py
(``serve`` reads no GUNICORN_CMD_ARGS); it stays on, as in production, and the server's
output goes to bench/results/http-server-<timestamp>.log, which is checked for non-2xx
responses and errors.
"""

from __future__ import annotations

import cProfile
import http.client
import io
import json
import multiprocessing as mp
import os
import pstats
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results"
TARGET_CLIENTS = 4
TARGET_TODOS_PER_S = 300.0
TARGET_P95_MS = 25.0
RESULT = {"ok": True}

from bench.pool import DrainFailed, _is_postgres, _proc_cpu, stop_workers  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- options (hooked into bench/run.py's parser) ------------------------------------------


def add_arguments(p) -> None:
    p.add_argument(
        "--http-todos", type=int, default=None, help="todos per HTTP drain [3000; quick 600]"
    )
    p.add_argument(
        "--http-clients", type=_ints, default=None, help="client processes per HTTP drain [1,4,16]"
    )
    p.add_argument(
        "--http-reps",
        type=int,
        default=None,
        help="HTTP drains per client count, order alternated [2; quick 1]",
    )
    p.add_argument(
        "--profile-requests",
        type=int,
        default=None,
        help="claim_next+complete pairs in the in-process profile [400; quick 150]",
    )
    p.add_argument(
        "--http-whatif",
        default="",
        help="comma list of server-side changes to measure next to the baseline, each on "
        "its own server (see bench/serve_variant.py; join with '+'), e.g. "
        "auth-sql,auth-cache,no-access-log [none]",
    )
    p.add_argument(
        "--http-whatif-clients",
        type=_ints,
        default=[TARGET_CLIENTS],
        help=f"client counts for the what-if servers [{TARGET_CLIENTS}]",
    )
    p.add_argument(
        "--no-py-spy",
        action="store_true",
        help="skip sampling the gunicorn workers with py-spy (used when installed; "
        "an extra drain, not in the table)",
    )


def finish_arguments(args) -> None:
    args.http_todos = args.http_todos or (600 if args.quick else 3000)
    args.http_clients = args.http_clients or [1, 4, 16]
    args.http_reps = args.http_reps or (1 if args.quick else 2)
    args.profile_requests = args.profile_requests or (150 if args.quick else 400)
    from bench.serve_variant import VARIANTS

    args.http_whatif = [v for v in args.http_whatif.split(",") if v]
    for name in args.http_whatif:
        for part in name.split("+"):
            if part not in VARIANTS:
                raise SystemExit(f"unknown --http-whatif {part!r}; known: {', '.join(VARIANTS)}")


# --- CPU from /proc -----------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append(int(entry))
    return out


def _cpu_of(pids) -> dict[int, float]:
    values = {}
    for pid in pids:
        v = _proc_cpu(pid)
        if v is not None:
            values[pid] = v
    return values


def _delta(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU spent between two snapshots; a process that appeared in between counts whole."""
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


# --- the server -------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _switchboard_command() -> str:
    here = Path(sys.executable).parent / "switchboard"
    return str(here if here.exists() else ROOT / ".venv" / "bin" / "switchboard")


def _server_settings() -> dict:
    """What the server runs with: gunicorn's and Django's values for this environment (the
    server's environment is this process's, plus the bench's fixed keys)."""
    from django.conf import settings

    from switchboard import gunicorn_conf

    return {
        "SWITCHBOARD_WEB_WORKERS": gunicorn_conf.workers,
        "SWITCHBOARD_WEB_THREADS": gunicorn_conf.threads,
        "SWITCHBOARD_DB_POOL_SIZE": getattr(settings, "SWITCHBOARD_DB_POOL_SIZE", "?"),
        "SWITCHBOARD_PREPARED_STATEMENTS": getattr(
            settings, "SWITCHBOARD_PREPARED_STATEMENTS", "?"
        ),
    }


class Server:
    """``switchboard serve`` on a free port, as a subprocess of the bench (ended by its pid)."""

    def __init__(self, log_path: Path, variant: str | None = None):
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            {
                "SWITCHBOARD_DEV": "1",
                "LOG_LEVEL": "WARNING",
                "DATABASE_URL": os.environ["DATABASE_URL"],
            }
        )
        self.settings = _server_settings()
        address = ["--host", "127.0.0.1", "--port", str(self.port)]
        if variant:  # proposed changes, patched in before gunicorn forks (bench/serve_variant.py)
            env["SWITCHBOARD_BENCH_SERVER_VARIANT"] = variant
            command = [sys.executable, "-m", "bench.serve_variant", *address]
        else:
            command = [_switchboard_command(), "serve", *address]
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_up()

    def _wait_until_up(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"switchboard serve exited ({self.proc.returncode}); "
                    f"see {self.log_path}:\n{self.log_tail()}"
                )
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/api/v1/openapi.json")
                status = conn.getresponse().status
                conn.close()
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"switchboard serve did not answer in {timeout:.0f}s; see {self.log_path}"
        )

    def pids(self) -> list[int]:
        return [self.proc.pid, *_children(self.proc.pid)]

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM to gunicorn's master, which stops its workers
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()

    def log_summary(self) -> dict:
        """Access-log statuses and anything else the server wrote (errors, warnings)."""
        statuses: dict[str, int] = {}
        other: list[str] = []
        line_re = re.compile(r'^\S+ "(?:[A-Z]+) \S+ HTTP/[\d.]+" (\d{3}) ')
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            m = line_re.match(line)
            if m:
                statuses[m.group(1)] = statuses.get(m.group(1), 0) + 1
            elif line.strip() and "[INFO]" not in line:
                other.append(line)
        return {
            "statuses": statuses,
            "other_lines": len(other),
            "other_sample": other[:15],
            "log": str(self.log_path.relative_to(ROOT)),
        }


# --- the client processes -----------------------------------------------------------------


def client_main(conn, index: int) -> None:
    """Entry point of a client process (multiprocessing 'spawn'; standard library only).

    parent -> ("prepare", base_url, token)   client -> ("ready",) after one warm-up request
    parent -> ("go",)                         client -> ("done", stats)
    parent -> ("stop",)
    """
    from switchboard.client import Client

    conn.send(("hello", os.getpid()))
    clock = time.perf_counter
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            conn.send(("stopped",))
            return
        _, base_url, token = msg
        try:
            sb = Client(base_url, token, timeout=30)
            sb.list_todos(limit=1)  # opens this drain's persistent connection before "go"
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("ready",))
        go = conn.recv()
        assert go[0] == "go", go
        claim_lat: list[float] = []
        complete_lat: list[float] = []
        n = requests = 0
        error = None
        cpu0 = time.process_time()
        start = clock()
        try:
            while True:
                t = clock()
                claimed = sb.claim_next()
                t1 = clock()
                requests += 1
                todo = claimed.get("todo")
                if todo is None:
                    break  # the empty claim that ends the loop is not a claim
                claim_lat.append(t1 - t)
                t = clock()
                sb.complete(todo_id=todo["id"], attempt_seq=claimed["attempt_seq"], result=RESULT)
                complete_lat.append(clock() - t)
                requests += 1
                n += 1
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
            error = f"{type(exc).__name__}: {exc}"
        end = clock()
        cpu = time.process_time() - cpu0
        sb._drop_connection()  # noqa: SLF001 - the next drain opens a fresh one
        conn.send(
            (
                "done",
                {
                    "n": n,
                    "requests": requests,
                    "start": start,
                    "end": end,
                    "claim": claim_lat,
                    "complete": complete_lat,
                    "cpu": cpu,
                    "error": error,
                },
            )
        )


class Clients:
    def __init__(self, size: int):
        ctx = mp.get_context("spawn")
        self.pipes, self.procs = [], []
        for i in range(size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=client_main, args=(child, i), daemon=True, name=f"bench-http-client-{i}"
            )
            proc.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(proc)
        for pipe in self.pipes:
            msg = pipe.recv()
            assert msg[0] == "hello", msg

    def drain(self, clients: int, base_url: str, token: str, cpu_probe) -> dict:
        pipes = self.pipes[:clients]
        for pipe in pipes:
            pipe.send(("prepare", base_url, token))
        problems = [m[1] for m in (pipe.recv() for pipe in pipes) if m[0] == "error"]
        if problems:
            raise DrainFailed(f"client warm-up failed: {problems[0]}")
        cpu0 = cpu_probe()
        t0 = time.perf_counter()
        for pipe in pipes:
            pipe.send(("go",))
        results = [pipe.recv()[1] for pipe in pipes]
        cpu1 = cpu_probe()
        errors = [r["error"] for r in results if r["error"]]
        if errors:
            raise DrainFailed(f"HTTP drain at {clients} clients failed: {errors[0]}")
        wall = max(r["end"] for r in results) - t0
        n = sum(r["n"] for r in results)
        requests = sum(r["requests"] for r in results)
        server = {
            k: (None if cpu0[k] is None or cpu1[k] is None else _delta(cpu0[k], cpu1[k]))
            for k in ("gunicorn", "postgres")
        }
        # How busy each gunicorn process was (CPU seconds per wall second): a gthread worker
        # runs Python on one core at a time (the GIL), and keep-alive connections stay with
        # the worker that accepted them.
        busy = []
        if cpu0["gunicorn"] is not None and cpu1["gunicorn"] is not None and wall > 0:
            busy = sorted(
                (
                    round((v - cpu0["gunicorn"].get(pid, 0.0)) / wall, 2)
                    for pid, v in cpu1["gunicorn"].items()
                ),
                reverse=True,
            )
        return {
            "gunicorn_busy": busy,
            "n": n,
            "requests": requests,
            "wall": wall,
            "claim": [x for r in results for x in r["claim"]],
            "complete": [x for r in results for x in r["complete"]],
            "per_client": [r["n"] for r in results],
            "client_cpu": sum(r["cpu"] for r in results),
            "gunicorn_cpu": server["gunicorn"],
            "postgres_cpu": server["postgres"],
        }

    def close(self) -> None:
        stop_workers(self.pipes, self.procs)


# --- the section --------------------------------------------------------------------------


def _git_state() -> dict:
    """Which code the server started by this section loads (bench.run.git_state)."""
    from bench.run import git_state

    return git_state(
        ("queues/sql.py", "queues/transitions.py", "queues/endpoints.py", "queues/api.py")
    )


def _vend_http_endpoint() -> tuple[int, str]:
    from django.contrib.auth import get_user_model

    from queues import endpoints

    user = get_user_model().objects.get(username="bench")  # made by seed.make_endpoint
    endpoint, token = endpoints.vend(user.teams.get(), "bench-http", verbs="all")
    return endpoint.pk, token


def _postgres_pids() -> list[int]:
    """This database's backends and the server's background processes (autovacuum, WAL
    writer, checkpointer); other databases' sessions are left out."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() OR datname IS NULL"
        )
        return [row[0] for row in cursor.fetchall()]


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _stats(values: list[float]) -> dict:
    from bench.ledger import percentile

    return {
        "p50_ms": _ms(percentile(values, 50)),
        "p95_ms": _ms(percentile(values, 95)),
        "p99_ms": _ms(percentile(values, 99)),
        "mean_ms": _ms(statistics.fmean(values)) if values else None,
        "count": len(values),
    }


def run_section(args, *, ledger, pool, endpoint_id: int, stamp: str) -> dict:
    """Run the HTTP drains, take the in-process figure and the profile (and the what-if
    servers, if asked); store everything in ``ledger.notes["http"]`` and return it."""
    from bench import seed

    started = time.monotonic()
    load0 = [round(x, 2) for x in os.getloadavg()]
    git = _git_state()  # others may commit while the bench runs: the server loads this code
    http_ep, token = _vend_http_endpoint()
    scenario = seed.Scenario("http", http_ep, args.http_todos)
    t = time.monotonic()
    scenario.build(["ours"])
    _log(f"http: history of {args.http_todos:,} done todos built in {time.monotonic() - t:.1f}s")
    local_pg = all(_is_postgres(p) for p in _postgres_pids()[:1])
    clients = Clients(max([*args.http_clients, *args.http_whatif_clients]))
    runner = _Runner(scenario, clients, token, local_pg, args.http_todos)
    spy = None
    whatif: list[dict] = []
    try:
        server = runner.start(RESULTS / f"http-server-{stamp}.log")
        try:
            runner.warm_up(server, args.http_clients)
            drains = runner.measure(server, args.http_clients, args.http_reps)
            if not args.no_py_spy and _py_spy():
                spy = sample_server(server, clients, scenario, token, args.http_todos, stamp)
            elif not args.no_py_spy:
                _log(
                    "http: py-spy not installed; the gunicorn workers are not sampled "
                    "(.venv/bin/pip install py-spy, bench only)"
                )
            _log("http: in-process (the WSGI app) vs HTTP, one request at a time; profile")
            profile = profile_verbs(scenario, token, args.profile_requests, stamp, server.base_url)
        finally:
            server.stop()
        server_log = server.log_summary()
        if args.http_whatif:
            whatif = runner.whatif(args, stamp)
    finally:
        clients.close()

    cells = _cells(drains)
    inproc = _inprocess(ledger, pool, scenario, http_ep, args)
    load1 = [round(x, 2) for x in os.getloadavg()]
    note = {
        "todos": args.http_todos,
        "clients": args.http_clients,
        "reps": args.http_reps,
        "server_settings": server.settings,
        "cpus": os.cpu_count(),
        "local_postgres": local_pg,
        "drains": drains,
        "cells": cells,
        "inprocess": inproc,
        "profile": profile,
        "py_spy": spy,
        "whatif": whatif,
        "server_log": server_log,
        "target": {
            "clients": TARGET_CLIENTS,
            "todos_per_s": TARGET_TODOS_PER_S,
            "p95_ms": TARGET_P95_MS,
        },
        "git": git,
        "duration_s": round(time.monotonic() - started, 1),
        "loadavg_start": load0,
        "loadavg_end": load1,
    }
    ledger.notes["http"] = note
    text = render(note)
    out = RESULTS / f"http-{stamp}.txt"
    out.write_text(text + "\n")
    _log(f"http: section took {note['duration_s']:.0f}s; table in {out.relative_to(ROOT)}")
    return note


class _Runner:
    """Servers and drains of one section: the same scenario, clients and token throughout."""

    def __init__(self, scenario, clients: Clients, token: str, local_pg: bool, todos: int):
        self.scenario, self.clients, self.token = scenario, clients, token
        self.local_pg, self.todos = local_pg, todos

    def start(self, log_path: Path, variant: str | None = None) -> Server:
        t = time.monotonic()
        server = Server(log_path, variant=variant)
        _log(
            f"http: {'switchboard serve' + (f' [{variant}]' if variant else '')} up on "
            f"{server.base_url} in {time.monotonic() - t:.1f}s (log {log_path.relative_to(ROOT)})"
        )
        return server

    def _probe(self, server: Server):
        def cpu_probe() -> dict:
            return {
                "gunicorn": _cpu_of(server.pids()),
                "postgres": _cpu_of(_postgres_pids()) if self.local_pg else None,
            }

        return cpu_probe

    def warm_up(self, server: Server, client_counts: list[int]) -> None:
        """Not recorded: both gunicorn workers import, fill their pools and prepare their
        statements; every client count once."""
        for c in sorted(set(client_counts)):
            self.scenario.reset("ours", max(100, self.todos // 5))
            self.clients.drain(c, server.base_url, self.token, self._probe(server))

    def drain(self, server: Server, c: int, rep: int, label: str = "") -> dict:
        from bench import seed

        after = self.scenario.reset("ours", self.todos)
        stats = self.clients.drain(c, server.base_url, self.token, self._probe(server))
        left = seed.unfinished("ours", after)
        if stats["n"] != self.todos or left:
            raise DrainFailed(f"{c} clients drained {stats['n']} of {self.todos}, {left} left")
        d = _drain_record(c, rep, stats)
        _log(
            f"http{label}: {c:2d} clients rep {rep}: {d['todos_per_s']:.0f} todos/s, "
            f"{d['requests_per_s']:.0f} req/s, claim_next p50/p95 "
            f"{d['claim_next']['p50_ms']:.1f}/{d['claim_next']['p95_ms']:.1f} ms, "
            f"complete {d['complete']['p50_ms']:.1f}/{d['complete']['p95_ms']:.1f} ms"
        )
        return d

    def measure(self, server: Server, client_counts: list[int], reps: int) -> list[dict]:
        drains = []
        for rep in range(reps):
            order = client_counts if rep % 2 == 0 else client_counts[::-1]
            for c in order:
                drains.append(self.drain(server, c, rep))
        return drains

    def whatif(self, args, stamp: str) -> list[dict]:
        """Each variant (and the baseline again) on a fresh server per run, order alternated
        per run; the same drains at the what-if client counts."""
        names = ["baseline", *args.http_whatif]
        drains: dict[str, list[dict]] = {n: [] for n in names}
        logs: dict[str, dict] = {}
        for rep in range(args.http_reps):
            for name in names if rep % 2 == 0 else names[::-1]:
                variant = None if name == "baseline" else name
                log_path = RESULTS / f"http-server-{stamp}-whatif-{name}-{rep}.log"
                server = self.start(log_path, variant=variant)
                try:
                    self.warm_up(server, args.http_whatif_clients)
                    for c in args.http_whatif_clients:
                        drains[name].append(self.drain(server, c, rep, f" [{name}]"))
                finally:
                    server.stop()
                summary = server.log_summary()
                seen = logs.setdefault(name, {"statuses": {}, "other_lines": 0})
                for k, v in summary["statuses"].items():
                    seen["statuses"][k] = seen["statuses"].get(k, 0) + v
                seen["other_lines"] += summary["other_lines"]
        return [
            {"variant": name, "cells": _cells(drains[name]), "server_log": logs[name]}
            for name in names
        ]


def _drain_record(clients: int, rep: int, s: dict) -> dict:
    n = s["n"] or 1
    return {
        "clients": clients,
        "rep": rep,
        "todos": s["n"],
        "requests": s["requests"],
        "wall_s": round(s["wall"], 3),
        "todos_per_s": round(s["n"] / s["wall"], 1),
        "requests_per_s": round(s["requests"] / s["wall"], 1),
        "claim_next": _stats(s["claim"]),
        "complete": _stats(s["complete"]),
        "per_client": s["per_client"],
        "gunicorn_busy": s.get("gunicorn_busy", []),
        "cpu_ms_per_todo": {
            "client": round(s["client_cpu"] * 1000 / n, 3),
            "gunicorn": None
            if s["gunicorn_cpu"] is None
            else round(s["gunicorn_cpu"] * 1000 / n, 3),
            "postgres": None
            if s["postgres_cpu"] is None
            else round(s["postgres_cpu"] * 1000 / n, 3),
        },
        "_raw": {"claim": s["claim"], "complete": s["complete"]},
    }


def _cells(drains: list[dict]) -> list[dict]:
    out = []
    for c in dict.fromkeys(d["clients"] for d in drains):
        mine = [d for d in drains if d["clients"] == c]
        cpu = {}
        for part in ("client", "gunicorn", "postgres"):
            vals = [
                d["cpu_ms_per_todo"][part] for d in mine if d["cpu_ms_per_todo"][part] is not None
            ]
            cpu[part] = round(statistics.median(vals), 3) if vals else None
        cpu["total"] = round(sum(v for v in cpu.values() if v is not None), 3)
        out.append(
            {
                "clients": c,
                "runs": len(mine),
                "todos_per_s": statistics.median(d["todos_per_s"] for d in mine),
                "todos_per_s_all": [d["todos_per_s"] for d in mine],
                "requests_per_s": statistics.median(d["requests_per_s"] for d in mine),
                "claim_next": _stats([x for d in mine for x in d["_raw"]["claim"]]),
                "complete": _stats([x for d in mine for x in d["_raw"]["complete"]]),
                "cpu_ms_per_todo": cpu,
                "gunicorn_busy": [d.get("gunicorn_busy", []) for d in mine],
                "per_client_min_max": [
                    min(min(d["per_client"]) for d in mine),
                    max(max(d["per_client"]) for d in mine),
                ],
            }
        )
    for d in drains:
        d.pop("_raw", None)  # pooled into the cells; keeps the ledger small
    return out


def _inprocess(ledger, pool, scenario, endpoint_id: int, args) -> dict:
    """ours (queues.transitions in worker processes, no HTTP) at 1 and 4 workers: from this
    run's main section when it ran, else a drain of the same scenario now."""
    rows = []
    main = [
        c
        for c in ledger.cells()
        if c["section"] == "main"
        and not c["heartbeat"]
        and c["workers"] in (1, 4)
        and "ours" in c["systems"]
    ]
    for scen in ("history", "empty"):
        picked = [c for c in main if c["scenario"] == scen]
        if picked:
            for c in picked:
                o = c["systems"]["ours"]
                rows.append(
                    {
                        "workers": c["workers"],
                        "todos_per_s": o["todos_per_s"],
                        "todos_per_s_all": o["todos_per_s_all"],
                        "claim_p50_ms": o["claim_p50_ms"],
                        "claim_p95_ms": o["claim_p95_ms"],
                        "cpu_ms_per_todo": o["cpu_ms_per_todo"],
                        "source": f"this run's main section ({scen}, history "
                        f"{c['history']:,}, {ledger.meta.get('todos')} todos, "
                        f"{o['runs']} runs)",
                    }
                )
            return {"rows": rows}
    from bench import seed
    from bench.ledger import percentile

    for workers in (1, 4):
        if workers > len(pool.pipes):
            continue
        after = scenario.reset("ours", args.http_todos)
        s = pool.drain("ours", workers, endpoint_id, False)
        if s["n"] != args.http_todos or seed.unfinished("ours", after):
            raise DrainFailed(f"in-process drain at {workers} workers incomplete")
        cpu = None
        if s["server_cpu"] is not None:
            cpu = round((s["client_cpu"] + s["server_cpu"]) * 1000 / s["n"], 3)
        rows.append(
            {
                "workers": workers,
                "todos_per_s": round(s["per_s"], 1),
                "todos_per_s_all": [round(s["per_s"], 1)],
                "claim_p50_ms": _ms(percentile(s["lat"], 50)),
                "claim_p95_ms": _ms(percentile(s["lat"], 95)),
                "cpu_ms_per_todo": cpu,
                "source": f"drained now (same scenario as the HTTP drains, "
                f"{args.http_todos} todos, 1 run)",
            }
        )
        _log(f"http: in-process ours at {workers} workers: {s['per_s']:.0f} todos/s")
    return {"rows": rows}


# --- py-spy on the gunicorn workers --------------------------------------------------------


SPY_RATE = 250  # samples per second per process


def _py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


# Each sample (a running thread's stack in a gunicorn process) goes to the first bucket with a
# frame that matches, tried in this order: inner layers first.
SPY_BUCKETS = [
    ("auth: Endpoint by token (authenticate)", re.compile(r"queues/endpoints\.py:authenticate$")),
    ("gunicorn access log", re.compile(r"gunicorn/glogging\.py:(?:\w+\.)?access$")),
    ("psycopg + pool (the verb's statements)", re.compile(r"/psycopg(_pool)?/")),
    ("Django db layer (cursor wrapper, connect/close)", re.compile(r"/django/db/")),
    ("queues (verbs, transitions, records, encode)", re.compile(r"/queues/")),
    (
        "Django handler, middleware, request/response",
        re.compile(r"/django/|/whitenoise/|/django_htmx/"),
    ),
    ("gunicorn HTTP (parse, WSGI environ, response write)", re.compile(r"/gunicorn/http/")),
    ("gunicorn gthread (poller, keep-alive, thread hand-off)", re.compile(r"/gunicorn/")),
]


def _frame_file_func(frame: str) -> str:
    # py-spy raw frames: "function (path/to/file.py:line)" or "function (path/to/file.py)"
    m = re.match(r"^(.*?) \((.*?)(?::\d+)?\)$", frame)
    return f"{m.group(2)}:{m.group(1)}" if m else frame


def summarize_spy(path: Path, todos: int) -> dict:
    buckets: dict[str, int] = {}
    leaf: dict[str, int] = {}
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame_file_func(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith("process ")]
        if not frames:
            continue
        total += n
        name = "other (stdlib, threads)"
        for label, rx in SPY_BUCKETS:
            if any(rx.search(f) for f in frames):
                name = label
                break
        buckets[name] = buckets.get(name, 0) + n
        short = re.sub(r"^.*?/site-packages/", "", frames[-1]).replace(str(ROOT) + "/", "")
        leaf[short] = leaf.get(short, 0) + n
    return {
        "samples": total,
        "buckets": {
            k: round(v / total, 3) for k, v in sorted(buckets.items(), key=lambda kv: -kv[1])
        }
        if total
        else {},
        "top_leaves": [
            (k, round(v / total, 3)) for k, v in sorted(leaf.items(), key=lambda kv: -kv[1])[:10]
        ]
        if total
        else [],
    }


def sample_server(
    server: Server, clients: Clients, scenario, token: str, todos: int, stamp: str
) -> dict | None:
    """An extra drain at 4 clients (not in the table: py-spy takes CPU from the same cores)
    while py-spy samples the gunicorn master and workers: only threads holding the GIL, so the
    samples are the workers' Python CPU (not threads parked on a lock, a socket or a query)."""
    path = RESULTS / f"http-pyspy-{stamp}.txt"
    todos = min(max(todos, 600), 1500)  # enough samples for a stable split
    scenario.reset("ours", todos)
    cmd = [
        _py_spy(),
        "record",
        "--pid",
        str(server.proc.pid),
        "--subprocesses",
        "--format",
        "raw",
        "--full-filenames",
        "--function",
        "--rate",
        str(SPY_RATE),
        "--gil",
        "--nonblocking",
        "--output",
        str(path),
    ]
    spy = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    time.sleep(1.0)  # attach to every process before the drain starts
    if spy.poll() is not None:
        _log(f"http: py-spy failed: {spy.stderr.read().decode(errors='replace')[:300]}")
        return None
    try:
        stats = clients.drain(
            TARGET_CLIENTS, server.base_url, token, lambda: {"gunicorn": None, "postgres": None}
        )
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait(timeout=10)
    if not path.exists():
        _log("http: py-spy wrote nothing")
        return None
    out = summarize_spy(path, stats["n"])
    out["raw"] = str(path.relative_to(ROOT))
    out["gil_ms_per_todo"] = round(out["samples"] * 1000 / SPY_RATE / max(1, stats["n"]), 2)
    out["todos_per_s_while_sampled"] = round(stats["n"] / stats["wall"], 1)
    _log(
        f"http: py-spy: {out['samples']} samples of the gunicorn workers at "
        f"{TARGET_CLIENTS} clients"
    )
    return out


# --- the profile ------------------------------------------------------------------------


AREAS = [  # (label, test on "filename:function"), first match wins
    ("PostgreSQL round trips (psycopg waiting)", re.compile(r"/psycopg/.*:wait$|wait_c")),
    ("psycopg driver (Python)", re.compile(r"/psycopg(_pool)?/|psycopg")),
    ("Django db layer (cursor wrappers, atomic, pool)", re.compile(r"/django/db/")),
    ("Django request/response, middleware, urls", re.compile(r"/django/")),
    ("queues: records, verbs, transitions, api", re.compile(r"/queues/")),
    ("json / msgspec encode+decode", re.compile(r"json|msgspec")),
    ("whitenoise, django_htmx", re.compile(r"whitenoise|django_htmx")),
]


KEY_FUNCTIONS = [  # (label, test on "filename:function"); cumulative ms per request
    ("Django handler", re.compile(r"django/core/handlers/base\.py:get_response$")),
    ("verb_view", re.compile(r"queues/api\.py:verb_view$")),
    ("authenticate", re.compile(r"queues/endpoints\.py:authenticate$")),
    ("transition", re.compile(r"queues/transitions\.py:(claim_next|complete)$")),
    ("json_response", re.compile(r"queues/api\.py:json_response$")),
    ("request_finished", re.compile(r"django/db/__init__\.py:close_old_connections$")),
]


def _area_of(key) -> str:
    filename, _, func = key
    text = f"{filename}:{func}"
    for label, rx in AREAS:
        if rx.search(text):
            return label
    return "other (stdlib, builtins)"


# authenticate's statement (the ORM's or a raw one), not the attempts' lease_token_hash
_AUTH_SQL = re.compile(r'FROM\s+"?endpoints"?\s+WHERE\s+(?:"?endpoints"?\.)?"?token_hash\b')


def profile_verbs(scenario, token: str, requests: int, stamp: str, base_url: str) -> dict:
    """claim_next + complete through the WSGI application gunicorn serves, called in this
    process (no socket, no HTTP parsing), timed, alternating pair by pair with the same pair
    over HTTP to the running server from this process (one keep-alive connection), so both
    see the same moment's load; then the in-process pairs again under cProfile."""
    from django.db import connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    from switchboard.client import Client as HttpClient
    from switchboard.wsgi import application  # what gunicorn_conf's wsgi_app names

    http = HttpClient(base_url, token, timeout=30)
    clock = time.perf_counter
    acc = {"sql": 0.0, "stmts": 0, "commit": 0.0, "commits": 0, "auth": 0.0}

    def wrapper(execute, sql, params, many, context):
        t = clock()
        try:
            return execute(sql, params, many, context)
        finally:
            spent = clock() - t
            acc["sql"] += spent
            acc["stmts"] += 1
            if _AUTH_SQL.search(sql):  # authenticate's lookup by token digest
                acc["auth"] += spent

    original_commit = DatabaseWrapper._commit

    def timed_commit(self):
        t = clock()
        try:
            return original_commit(self)
        finally:
            acc["commit"] += clock() - t
            acc["commits"] += 1

    def post(verb: str, body: dict) -> dict:
        """One request as gunicorn hands it to the application: a WSGI environ, the response
        iterated and closed (which sends request_finished: the connection goes back to the
        pool)."""
        data = json.dumps(body).encode()
        environ = {
            "REQUEST_METHOD": "POST",
            "SCRIPT_NAME": "",
            "PATH_INFO": f"/api/v1/{verb}",
            "QUERY_STRING": "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "HTTP_HOST": "127.0.0.1",
            "HTTP_AUTHORIZATION": f"Bearer {token}",
            "HTTP_CONNECTION": "keep-alive",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(data)),
            "wsgi.input": io.BytesIO(data),
            "wsgi.errors": sys.stderr,
            "wsgi.url_scheme": "http",
            "wsgi.version": (1, 0),
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
        }
        status = []
        result = application(environ, lambda s, headers, exc_info=None: status.append(s))
        try:
            content = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
        if not status or not status[0].startswith("200"):
            raise DrainFailed(f"in-process {verb}: {status} {content[:200]!r}")
        return json.loads(content)

    def one(verb: str, body: dict, rec: dict | None, prof: cProfile.Profile | None):
        for k in acc:
            acc[k] = 0 if isinstance(acc[k], int) else 0.0
        if prof:
            prof.enable()
        t = clock()
        data = post(verb, body)
        total = clock() - t
        if prof:
            prof.disable()
        if rec is not None:
            rec["total"].append(total)
            rec["sql"].append(acc["sql"])
            rec["commit"].append(acc["commit"])
            rec["stmts"].append(acc["stmts"])
            rec["commits"].append(acc["commits"])
            rec["auth"].append(acc["auth"])
        return data

    def http_pair(recs: dict | None) -> None:
        t = clock()
        claimed = http.claim_next()
        t1 = clock()
        if claimed.get("todo") is None:
            raise DrainFailed("the profile ran out of todos")
        http.complete(
            todo_id=claimed["todo"]["id"], attempt_seq=claimed["attempt_seq"], result=RESULT
        )
        if recs is not None:
            recs["claim_next"]["http"].append(t1 - t)
            recs["complete"]["http"].append(clock() - t1)

    def loop(n: int, recs: dict | None, profs: dict | None, paired: bool = False) -> None:
        for _ in range(n):
            if paired:
                http_pair(recs)
            claimed = one(
                "claim_next", {}, recs and recs["claim_next"], profs and profs["claim_next"]
            )
            if claimed.get("todo") is None:
                raise DrainFailed("in-process profile ran out of todos")
            one(
                "complete",
                {
                    "todo_id": claimed["todo"]["id"],
                    "attempt_seq": claimed["attempt_seq"],
                    "result": RESULT,
                },
                recs and recs["complete"],
                profs and profs["complete"],
            )

    warm = 30
    scenario.reset("ours", 2 * warm + 3 * requests)
    recs = {
        v: {
            "total": [],
            "sql": [],
            "commit": [],
            "stmts": [],
            "commits": [],
            "http": [],
            "auth": [],
        }
        for v in ("claim_next", "complete")
    }
    profs = {v: cProfile.Profile() for v in ("claim_next", "complete")}
    DatabaseWrapper._commit = timed_commit
    try:
        with connection.execute_wrapper(wrapper):
            loop(warm, None, None, paired=True)
            loop(requests, recs, None, paired=True)
            loop(requests, None, profs)
    finally:
        DatabaseWrapper._commit = original_commit
    connection.close()
    http._drop_connection()  # noqa: SLF001
    from agents.doorbell import doorbell

    doorbell.stop()  # the LISTEN thread claim_next started in this process

    timed = {}
    for verb, r in recs.items():
        timed[verb] = {
            "requests": len(r["total"]),
            "total_p50_ms": _ms(statistics.median(r["total"])),
            "total_mean_ms": _ms(statistics.fmean(r["total"])),
            "sql_mean_ms": _ms(statistics.fmean(r["sql"])),
            "auth_sql_mean_ms": _ms(statistics.fmean(r["auth"])),
            "commit_mean_ms": _ms(statistics.fmean(r["commit"])),
            "statements": statistics.median(r["stmts"]),
            "commits": statistics.median(r["commits"]),
            "http_c1_p50_ms": _ms(statistics.median(r["http"])),
            "http_c1_mean_ms": _ms(statistics.fmean(r["http"])),
        }
    out = {"timed": timed, "top": {}, "areas": {}, "keys": {}, "pstats": {}}
    for verb, prof in profs.items():
        path = RESULTS / f"http-profile-{stamp}-{verb}.pstats"
        prof.dump_stats(str(path))
        out["pstats"][verb] = str(path.relative_to(ROOT))
        st = pstats.Stats(prof)
        total_tt = sum(v[2] for v in st.stats.values()) or 1.0
        areas: dict[str, float] = {}
        for key, (_cc, _nc, tt, _ct, _callers) in st.stats.items():
            areas[_area_of(key)] = areas.get(_area_of(key), 0.0) + tt
        out["areas"][verb] = {
            "profiled_ms_per_request": round(total_tt * 1000 / requests, 3),
            "share": {
                k: round(v / total_tt, 3) for k, v in sorted(areas.items(), key=lambda kv: -kv[1])
            },
        }
        keys = {}
        for label, rx in KEY_FUNCTIONS:
            cums = [
                ct
                for key, (_cc, _nc, _tt, ct, _c) in st.stats.items()
                if rx.search(f"{key[0]}:{key[2]}")
            ]
            if cums:
                keys[label] = round(max(cums) * 1000 / requests, 3)
        out["keys"][verb] = keys
        # The top entries below the view: the chain around it (WSGI handler,
        # middleware) encloses everything and is summed up in "keys".
        view_ms = keys.get("verb_view")
        out["top"][verb] = _top_lines(st, requests, below_ms=view_ms)[:13]
    return out


def _top_lines(st: pstats.Stats, requests: int, below_ms: float | None = None) -> list[str]:
    """The entries with the most cumulative time, per request, paths shortened; with
    ``below_ms`` only those under it (the view itself and what it calls)."""
    rows = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in st.stats.items():
        cum_ms = ct * 1000 / requests
        if below_ms is not None and cum_ms > below_ms * 1.001:
            continue
        where = re.sub(r"^.*?/site-packages/", "", filename).replace(str(ROOT) + "/", "")
        name = f"{where}:{line}({func})" if filename != "~" else func
        rows.append((cum_ms, nc / requests, tt * 1000 / requests, name))
    rows.sort(key=lambda r: -r[0])
    lines = [f"{'calls/req':>9}  {'own ms/req':>10}  {'cum ms/req':>10}  function"]
    lines += [f"{c:9.2f}  {own:10.3f}  {cum:10.3f}  {name}" for cum, c, own, name in rows]
    return lines


# --- text ---------------------------------------------------------------------------------


def _f(x, fmt="{:.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def _pp(s: dict | None) -> str:
    if not s or s.get("p50_ms") is None:
        return "-"
    return f"{s['p50_ms']:.2f}/{s['p95_ms']:.2f}"


def render_whatif(note: dict) -> list[str]:
    from bench.ledger import _table

    cores = note["cpus"] or 1
    out = [
        "What-if: proposed server-side changes (bench/serve_variant.py, patched into a fresh "
        "server; nothing in queues/ or switchboard/ is edited), each run next to a fresh "
        "baseline server, order alternated:"
    ]
    base = {c["clients"]: c for c in note["whatif"][0]["cells"]}
    headers = [
        "variant",
        "conc",
        "todos/s",
        "vs baseline",
        "claim_next p50/p95 ms",
        "complete p50/p95 ms",
        "CPU ms/todo client+gunicorn+pg = total",
        "CPU ceiling todos/s",
        "non-2xx",
        "gunicorn busy per drain",
    ]
    rows = []
    for w in note["whatif"]:
        bad = sum(v for k, v in w["server_log"]["statuses"].items() if not k.startswith("2"))
        for c in w["cells"]:
            cpu = c["cpu_ms_per_todo"]
            b = base.get(c["clients"])
            rows.append(
                [
                    w["variant"],
                    str(c["clients"]),
                    f"{c['todos_per_s']:.0f} ({', '.join(f'{x:.0f}' for x in c['todos_per_s_all'])})",
                    "-"
                    if w["variant"] == "baseline" or not b
                    else f"{c['todos_per_s'] / b['todos_per_s']:.2f}x",
                    _pp(c["claim_next"]),
                    _pp(c["complete"]),
                    f"{_f(cpu['client'], '{:.2f}')}+{_f(cpu['gunicorn'], '{:.2f}')}+"
                    f"{_f(cpu['postgres'], '{:.2f}')} = {cpu['total']:.2f}",
                    _f(cores * 1000 / cpu["total"] if cpu["total"] else None),
                    str(bad),
                    " ".join("/".join(f"{x:.2f}" for x in b) for b in c.get("gunicorn_busy", [])),
                ]
            )
    out += _table(headers, rows, {1, 2, 3, 4, 5, 6, 7, 8})
    return out


def render(note: dict) -> str:
    from bench.ledger import _table

    out = []
    ss = note["server_settings"]
    out.append(
        "Through gunicorn: claim_next + complete over HTTP (switchboard serve, gthread; "
        f"workers {ss['SWITCHBOARD_WEB_WORKERS']}, threads {ss['SWITCHBOARD_WEB_THREADS']}, "
        f"DB pool {ss['SWITCHBOARD_DB_POOL_SIZE']}, prepared statements "
        f"{ss['SWITCHBOARD_PREPARED_STATEMENTS']}; access log on)"
    )
    out.append(
        f"{note['todos']} todos per drain on top of {note['todos']} done todos with history, "
        f"{note['reps']} drain(s) per client count, order alternated; clients are separate "
        f"processes (switchboard.client, one keep-alive connection each) on the same "
        f"{note['cpus']} cores as gunicorn and PostgreSQL."
    )
    g = note.get("git") or {}
    if g:
        out.append(
            f"code {g.get('head', '?')[:10]}"
            + (" + uncommitted changes in " + ", ".join(g["dirty"]) if g.get("dirty") else "")
            + "; "
            + ", ".join(f"{k} {v}" for k, v in (g.get("sha256_12") or {}).items())
        )
    out.append(
        "todos/s = median over drains (all drains in brackets); latency = client-side, "
        "pooled over the drains; req/s counts claim_next + complete (+ the final empty "
        "claim per client)."
    )
    out.append("")
    headers = [
        "path",
        "conc",
        "todos/s",
        "req/s",
        "claim_next p50/p95 ms",
        "complete p50/p95 ms",
        "CPU ms/todo client+gunicorn+pg = total",
        "CPU ceiling todos/s",
    ]
    rows = []
    cores = note["cpus"] or 1
    for c in note["cells"]:
        cpu = c["cpu_ms_per_todo"]
        rows.append(
            [
                "HTTP (gunicorn)",
                str(c["clients"]),
                f"{c['todos_per_s']:.0f} ({', '.join(f'{x:.0f}' for x in c['todos_per_s_all'])})"
                if len(c["todos_per_s_all"]) > 1
                else f"{c['todos_per_s']:.0f}",
                f"{c['requests_per_s']:.0f}",
                _pp(c["claim_next"]),
                _pp(c["complete"]),
                f"{_f(cpu['client'], '{:.2f}')}+{_f(cpu['gunicorn'], '{:.2f}')}+"
                f"{_f(cpu['postgres'], '{:.2f}')} = {cpu['total']:.2f}",
                _f(cores * 1000 / cpu["total"] if cpu["total"] else None),
            ]
        )
    for r in note["inprocess"]["rows"]:
        allv = r["todos_per_s_all"]
        rows.append(
            [
                "in-process transitions",
                str(r["workers"]),
                f"{r['todos_per_s']:.0f} ({', '.join(f'{x:.0f}' for x in allv)})"
                if len(allv) > 1
                else f"{r['todos_per_s']:.0f}",
                "-",
                f"{_f(r['claim_p50_ms'], '{:.2f}')}/{_f(r['claim_p95_ms'], '{:.2f}')}",
                "-",
                f"worker+pg = {_f(r['cpu_ms_per_todo'], '{:.2f}')}",
                _f(cores * 1000 / r["cpu_ms_per_todo"] if r["cpu_ms_per_todo"] else None),
            ]
        )
    out += _table(headers, rows, {1, 2, 3, 4, 5, 6, 7})
    out.append("")
    src = {r["source"] for r in note["inprocess"]["rows"]}
    out.append(
        "conc = client processes (HTTP) or worker processes (in-process: "
        "queues.transitions called directly, no HTTP, no Django request; "
        + "; ".join(sorted(src))
        + ")."
    )
    out.append(
        "CPU = user+system seconds per todo of the client processes, gunicorn (master + "
        "workers) and PostgreSQL (this database's backends + background processes); "
        "ceiling = cores x 1000 / total."
    )
    spread = [
        f"{c['clients']}: {c['per_client_min_max'][0]}-{c['per_client_min_max'][1]}"
        for c in note["cells"]
        if c["clients"] > 1
    ]
    if spread:
        out.append("todos per client (min-max over the drains): " + ", ".join(spread))
    busy = [
        f"{c['clients']}: "
        + " | ".join("/".join(f"{x:.2f}" for x in b) for b in c["gunicorn_busy"])
        for c in note["cells"]
        if c.get("gunicorn_busy")
    ]
    if busy:
        out.append(
            "gunicorn processes busy, CPU s per wall s, per drain (workers and master, busiest "
            "first; a worker's Python tops out near 1.00 by the GIL): " + "; ".join(busy)
        )
    for c in note["cells"]:
        runs = c.get("gunicorn_busy") or []
        workers = max((len(b) - 1 for b in runs), default=0)  # the master is the last, ~0
        if c["clients"] < max(2, workers) or not runs:
            continue
        idle = sum(1 for b in runs if any(x < 0.05 for x in b[:-1]))
        if idle:
            out.append(
                f"  at {c['clients']} clients, {idle} of {len(runs)} drain(s) left a gunicorn "
                "worker idle: every keep-alive connection had landed on the other worker(s)"
            )

    # the verdict
    t = note["target"]
    cell = next((c for c in note["cells"] if c["clients"] == t["clients"]), None)
    out.append("")
    if cell:
        p95 = max(cell["claim_next"]["p95_ms"], cell["complete"]["p95_ms"])
        ok_tp = cell["todos_per_s"] >= t["todos_per_s"]
        ok_p95 = p95 < t["p95_ms"]
        out.append(
            f"Target at {t['clients']} clients: >= {t['todos_per_s']:.0f} todos/s "
            f"({2 * t['todos_per_s']:.0f} requests/s) with verb p95 < {t['p95_ms']:.0f} ms: "
            f"{cell['todos_per_s']:.0f} todos/s ({cell['requests_per_s']:.0f} req/s; drains "
            f"{', '.join(f'{x:.0f}' for x in cell['todos_per_s_all'])}), worst verb p95 "
            f"{p95:.2f} ms => throughput {'MET' if ok_tp else 'NOT MET'}, p95 "
            f"{'MET' if ok_p95 else 'NOT MET'}"
            + (
                f" (throughput at {100 * cell['todos_per_s'] / t['todos_per_s']:.0f}% of the "
                f"target; CPU ceiling on this machine "
                f"{cores * 1000 / cell['cpu_ms_per_todo']['total']:.0f} todos/s)"
                if not ok_tp and cell["cpu_ms_per_todo"]["total"]
                else ""
            )
        )
    else:
        out.append(f"Target at {t['clients']} clients: not measured (--http-clients).")

    # where the time goes
    prof = note["profile"]
    out.append("")
    n_pairs = next(iter(prof["timed"].values()))["requests"]
    out.append(
        f"Where the time goes: one request at a time, {n_pairs} claim_next + complete pairs "
        "in-process (the WSGI application, called directly) alternating pair by pair with the "
        "same pair over HTTP "
        "(so both see the same moment's load):"
    )
    headers = [
        "verb",
        "in-proc p50/mean ms",
        "SQL ms (stmts; auth's)",
        "COMMIT ms",
        "Django+view+encode ms",
        "HTTP p50/mean ms",
        "gunicorn+HTTP+client ms",
    ]
    rows = []
    for verb, p in prof["timed"].items():
        sql = p["sql_mean_ms"] + p["commit_mean_ms"]
        rest = p["total_mean_ms"] - sql
        http_mean = p.get("http_c1_mean_ms")
        rows.append(
            [
                verb,
                f"{p['total_p50_ms']:.2f}/{p['total_mean_ms']:.2f}",
                f"{p['sql_mean_ms']:.2f} ({p['statements']:.0f}; "
                f"{_f(p.get('auth_sql_mean_ms'), '{:.2f}')})",
                f"{p['commit_mean_ms']:.2f} ({p['commits']:.0f})",
                f"{rest:.2f}",
                f"{_f(p.get('http_c1_p50_ms'), '{:.2f}')}/{_f(http_mean, '{:.2f}')}",
                _f(None if http_mean is None else http_mean - p["total_mean_ms"], "{:.2f}"),
            ]
        )
    out += _table(headers, rows, {1, 2, 3, 4, 5, 6})
    out.append(
        "(means; SQL = wall time inside cursor.execute seen by connection.execute_wrapper, "
        "round trip and the server's work included; COMMIT = explicit commits, timed apart "
        "(0: single statements in autocommit);"
    )
    out.append(
        " Django+view+encode = the in-process WSGI request minus SQL and COMMIT (handler, "
        "middleware, authenticate's Python side, pool checkout, records, encode);"
    )
    out.append(" gunicorn+HTTP+client = HTTP mean minus in-process mean.)")
    for verb in ("claim_next", "complete"):
        a = prof["areas"][verb]
        out.append("")
        out.append(
            f"cProfile of {verb} through the WSGI app in-process "
            f"({a['profiled_ms_per_request']:.2f} "
            f"ms/request under the profiler), own time by area:"
        )
        out.append(
            "  " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in a["share"].items() if v >= 0.01)
        )
        if prof.get("keys", {}).get(verb):
            out.append(
                "  cumulative ms/request: "
                + ", ".join(f"{k} {v:.2f}" for k, v in prof["keys"][verb].items())
            )
        if verb == "claim_next":
            out.append(
                f"top entries by cumulative time inside the view, per request "
                f"({prof['pstats'][verb]}):"
            )
            out += ["  " + line for line in prof["top"][verb]]
    if note.get("whatif"):
        out.append("")
        out += render_whatif(note)
    spy = note.get("py_spy")
    if spy and spy.get("samples"):
        out.append("")
        out.append(
            f"py-spy on the gunicorn workers during an extra drain at {TARGET_CLIENTS} "
            f"clients ({spy['samples']} samples of threads holding the GIL, ~"
            f"{spy['gil_ms_per_todo']:.1f} ms/todo; {spy['todos_per_s_while_sampled']:.0f}"
            f" todos/s while sampled; {spy['raw']}), by innermost layer:"
        )
        out.append(
            "  " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in spy["buckets"].items() if v >= 0.01)
        )
        out.append(
            "  hottest leaf functions: "
            + ", ".join(f"{k} {100 * v:.0f}%" for k, v in spy["top_leaves"][:6])
        )
    # the server's log
    log = note["server_log"]
    out.append("")
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(log["statuses"].items()))
    out.append(
        f"server log {log['log']}: access-log statuses {statuses or 'none'}; "
        f"{log['other_lines']} other lines (errors/warnings)"
    )
    for line in log["other_sample"][:8]:
        out.append(f"  | {line[:160]}")
    out.append(
        f"http section took {note['duration_s']:.0f} s; load average before/after "
        f"{note['loadavg_start']} / {note['loadavg_end']}"
    )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(
            "usage: python bench/httpbench.py bench/results/ledger-<timestamp>.json\n"
            "(to run: python bench/run.py --sections http)",
            file=sys.stderr,
        )
        return 2
    note = json.loads(Path(argv[1]).read_text()).get("notes", {}).get("http")
    if not note:
        print("no http section in that ledger", file=sys.stderr)
        return 1
    print(render(note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
