"""The agent API through the real server (section ``http``): claim_next + complete over HTTP.

``switchboard serve`` (gunicorn, the shipped settings) runs as a subprocess against the bench
database; N todos on top of N done todos with history are drained by C client processes
(``switchboard.client.Client``, one keep-alive connection each) released at a barrier.
Recorded per drain: todos/s, client-side latency per verb, and CPU per todo of the clients,
gunicorn and PostgreSQL (/proc), whose sum gives the throughput ceiling on this machine. Then
where the time goes: the WSGI application called in this process, pair by pair alternating
with the same pair over HTTP (SQL timed by ``connection.execute_wrapper``), a cProfile of the
in-process requests.
"""

from __future__ import annotations

import cProfile
import http.client
import io
import json
import os
import pstats
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import db, seed
from bench.inprocess import log
from bench.ledger import ms, percentile
from bench.table import all_of, f, f2, table
from bench.workers import DrainFailed, Pool, serve

ROOT, RESULTS = db.ROOT, db.RESULTS
TARGET = {"clients": 4, "todos_per_s": 300.0, "p95_ms": 25.0}
RESULT = {"ok": True}


def add_arguments(p, ints) -> None:
    p.add_argument("--http-todos", type=int, default=None, help="todos per drain [3000; quick 600]")
    p.add_argument(
        "--http-clients", type=ints, default=[1, 4, 16], help="client processes [1,4,16]"
    )
    p.add_argument(
        "--http-reps", type=int, default=None, help="drains per client count [2; quick 1]"
    )
    p.add_argument(
        "--profile-requests", type=int, default=None, help="profiled pairs [400; quick 150]"
    )


def finish_arguments(args) -> None:
    args.http_todos = args.http_todos or (600 if args.quick else 3000)
    args.http_reps = args.http_reps or (1 if args.quick else 2)
    args.profile_requests = args.profile_requests or (150 if args.quick else 400)


# --- the server -------------------------------------------------------------------------


def switchboard_command() -> str:
    here = Path(sys.executable).parent / "switchboard"
    return str(here if here.exists() else ROOT / ".venv" / "bin" / "switchboard")


class Server:
    """``switchboard serve`` on a free port, a subprocess of the bench (ended by its pid)."""

    def __init__(self, log_path: Path):
        from django.conf import settings

        from switchboard import gunicorn_conf

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.settings = {
            "server": getattr(gunicorn_conf, "SERVER", "wsgi"),
            "worker_class": gunicorn_conf.worker_class,
            "workers": gunicorn_conf.workers,
            "threads": gunicorn_conf.threads,
            "db_pool": settings.SWITCHBOARD_DB_POOL_SIZE,
            "prepared": settings.SWITCHBOARD_PREPARED_STATEMENTS,
        }
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [switchboard_command(), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT,
            env=dict(os.environ, SWITCHBOARD_DEV="1", LOG_LEVEL="WARNING"),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"switchboard serve exited; see {log_path}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/api/v1/openapi.json")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"switchboard serve did not answer in 60 s; see {log_path}")

    def pids(self) -> list[int]:
        return [self.proc.pid, *db.children(self.proc.pid)]

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
        """Access-log statuses, and how many other lines (errors, warnings) the server wrote."""
        statuses: dict[str, int] = {}
        other: list[str] = []
        # gunicorn's access log and uvicorn's: '... "POST /api/v1/claim_next HTTP/1.1" 200 ...'
        status = re.compile(r'"(?:[A-Z]+) \S+ HTTP/[\d.]+" (\d{3})\b')
        for line in self.log_path.read_text(errors="replace").splitlines():
            if m := status.search(line):
                statuses[m.group(1)] = statuses.get(m.group(1), 0) + 1
            elif line.strip() and "[INFO]" not in line:
                other.append(line)
        return {
            "statuses": statuses,
            "other_lines": len(other),
            "other_sample": other[:8],
            "log": str(self.log_path.relative_to(ROOT)),
        }


# --- the clients ----------------------------------------------------------------------------


def client_main(conn, index: int) -> None:
    """A client process (standard library only): claim_next -> complete until empty."""
    from switchboard.client import Client

    def prepare(base_url: str, token: str):
        sb = Client(base_url, token, timeout=30)
        sb.list_todos(limit=1)  # opens this drain's keep-alive connection before "go"

        def run() -> dict:
            claim, complete, clock, n, requests = [], [], time.perf_counter, 0, 0
            try:
                while True:
                    t = clock()
                    claimed = sb.claim_next()
                    requests += 1
                    if claimed.get("todo") is None:
                        break  # the empty claim that ends the loop is not a claim
                    claim.append(clock() - t)
                    t = clock()
                    sb.complete(
                        todo_id=claimed["todo"]["id"],
                        attempt_seq=claimed["attempt_seq"],
                        result=RESULT,
                    )
                    complete.append(clock() - t)
                    requests += 1
                    n += 1
            finally:
                sb._drop_connection()  # noqa: SLF001 - the next drain opens a fresh one
            return {"n": n, "requests": requests, "claim": claim, "complete": complete}

        return run

    serve(conn, os.getpid(), prepare)


def http_drain(clients: Pool, n: int, server: Server, token: str, local_pg: bool) -> dict:
    def probe():
        return {
            "gunicorn": db.cpu_of(server.pids()),
            "postgres": db.cpu_of(postgres_pids()) if local_pg else None,
        }

    d = clients.drain(n, server.base_url, token, probe=probe)
    rs, wall = d["results"], d["wall"]
    g0, g1 = d["before"]["gunicorn"], d["after"]["gunicorn"]
    return {
        "n": sum(r["n"] for r in rs),
        "requests": sum(r["requests"] for r in rs),
        "wall": wall,
        "claim": [x for r in rs for x in r["claim"]],
        "complete": [x for r in rs for x in r["complete"]],
        "per_client": [r["n"] for r in rs],
        "client_cpu": sum(r["cpu"] for r in rs),
        "gunicorn_cpu": db.cpu_delta(g0, g1),
        "postgres_cpu": db.cpu_delta(d["before"]["postgres"], d["after"]["postgres"]),
        # CPU s per wall s of each gunicorn process: a gthread worker runs Python on one core
        # at a time (the GIL), and keep-alive connections stay with the worker that took them
        "gunicorn_busy": sorted(
            (round((v - g0.get(p, 0.0)) / wall, 2) for p, v in g1.items()), reverse=True
        ),
    }


def postgres_pids() -> list[int]:
    """This database's backends and the server's background processes."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() OR datname IS NULL"
        )
        return [row[0] for row in cursor.fetchall()]


def vend(agent_id: str) -> tuple[int, str]:
    from django.contrib.auth import get_user_model

    from queues import endpoints

    user = get_user_model().objects.get(username="bench")  # made by seed.make_endpoint
    endpoint, token = endpoints.vend(user.teams.get(), agent_id, verbs="all")
    return endpoint.pk, token


def lat(values: list[float]) -> dict:
    return {
        "p50_ms": ms(percentile(values, 50)),
        "p95_ms": ms(percentile(values, 95)),
        "mean_ms": ms(statistics.fmean(values)) if values else None,
    }


# --- the section ----------------------------------------------------------------------------


def run_section(ctx) -> None:
    args, ledger = ctx.args, ctx.ledger
    started, load0 = time.monotonic(), [round(x, 2) for x in os.getloadavg()]
    git = db.git_state(("queues/sql/claim.py", "queues/sql/close.py", "agents/http.py"))
    endpoint_id, token = vend("bench-http")
    scenario = seed.Scenario("http", endpoint_id, args.http_todos)
    scenario.build(["ours"])
    local_pg = all(db.is_postgres(p) for p in postgres_pids()[:1])
    clients = Pool(client_main, max(args.http_clients), name="bench-http-client")
    drains = []
    try:
        server = Server(RESULTS / f"http-server-{ctx.stamp}.log")
        log(f"http: switchboard serve up on {server.base_url}")
        try:
            for c in sorted(set(args.http_clients)):  # warm-up: imports, pools, prepared plans
                scenario.reset("ours", max(100, args.http_todos // 5))
                http_drain(clients, c, server, token, local_pg)
            for rep in range(args.http_reps):
                for c in args.http_clients if rep % 2 == 0 else args.http_clients[::-1]:
                    after = scenario.reset("ours", args.http_todos)
                    s = http_drain(clients, c, server, token, local_pg)
                    if s["n"] != args.http_todos or seed.unfinished("ours", after):
                        raise DrainFailed(f"{c} clients drained {s['n']} of {args.http_todos}")
                    drains.append({"clients": c, "rep": rep, **s})
                    log(f"http: {c:2d} clients rep {rep}: {s['n'] / s['wall']:.0f} todos/s")
            profile = profile_verbs(
                scenario, token, args.profile_requests, ctx.stamp, server.base_url
            )
        finally:
            server.stop()
    finally:
        clients.close()
    note = {
        "todos": args.http_todos,
        "reps": args.http_reps,
        "server_settings": server.settings,
        "cpus": os.cpu_count(),
        "cells": cells(drains),
        "inprocess": inprocess_rows(ledger),
        "profile": profile,
        "server_log": server.log_summary(),
        "target": TARGET,
        "git": git,
        "duration_s": round(time.monotonic() - started, 1),
        "loadavg": [load0, [round(x, 2) for x in os.getloadavg()]],
    }
    ledger.notes["http"] = note
    (RESULTS / f"http-{ctx.stamp}.txt").write_text(render(note) + "\n")


def cells(drains: list[dict]) -> list[dict]:
    out = []
    for c in dict.fromkeys(d["clients"] for d in drains):
        mine = [d for d in drains if d["clients"] == c]
        n = [d["n"] for d in mine]
        cpu = {}
        for part in ("client", "gunicorn", "postgres"):
            vals = [
                d[f"{part}_cpu"] * 1000 / k
                for d, k in zip(mine, n, strict=True)
                if d[f"{part}_cpu"] is not None
            ]
            cpu[part] = round(statistics.median(vals), 3) if vals else None
        cpu["total"] = round(sum(v for v in cpu.values() if v is not None), 3)
        out.append(
            {
                "clients": c,
                "todos_per_s": statistics.median(d["n"] / d["wall"] for d in mine),
                "todos_per_s_all": [round(d["n"] / d["wall"], 1) for d in mine],
                "requests_per_s": statistics.median(d["requests"] / d["wall"] for d in mine),
                "claim_next": lat([x for d in mine for x in d["claim"]]),
                "complete": lat([x for d in mine for x in d["complete"]]),
                "cpu_ms_per_todo": cpu,
                "gunicorn_busy": [d["gunicorn_busy"] for d in mine],
                "per_client_min_max": [
                    min(min(d["per_client"]) for d in mine),
                    max(max(d["per_client"]) for d in mine),
                ],
            }
        )
    return out


def inprocess_rows(ledger) -> list[dict]:
    """ours in-process at 1 and 4 workers, from this run's main section (history, no heartbeat)."""
    rows = []
    for c in ledger.cells("main"):
        if c["scenario"] == "history" and not c["heartbeat"] and c["workers"] in (1, 4):
            o = c["systems"]["ours"]
            rows.append(
                {
                    "workers": c["workers"],
                    **{
                        k: o[k]
                        for k in (
                            "todos_per_s_all",
                            "claim_p50_ms",
                            "claim_p95_ms",
                            "cpu_ms_per_todo",
                        )
                    },
                }
            )
    return rows


# --- where the time goes: in-process vs HTTP, and a profile ---------------------------------

AREAS = [  # (label, test on "filename:function"), first match wins
    ("PostgreSQL round trips (psycopg waiting)", r"/psycopg/.*:wait$|wait_c"),
    ("psycopg driver (Python)", r"psycopg"),
    ("Django db layer (cursor wrappers, atomic, pool)", r"/django/db/"),
    ("Django request/response, middleware, urls", r"/django/"),
    ("queues + agents: records, verbs, transitions", r"/queues/|/agents/"),
    ("json / msgspec encode+decode", r"json|msgspec"),
    ("whitenoise, django_htmx", r"whitenoise|django_htmx"),
]
# authenticate's statement, not the attempts' lease_token_hash
_AUTH_SQL = re.compile(r'FROM\s+"?endpoints"?\s+WHERE\s+(?:"?endpoints"?\.)?"?token_hash\b')


def _wsgi_post(verb: str, body: dict, token: str) -> dict:
    """One request as gunicorn hands it to the application; the response closed (which sends
    request_finished: the connection goes back to the pool)."""
    from switchboard.wsgi import application  # what gunicorn_conf's wsgi_app names

    data = json.dumps(body).encode()
    environ = {
        "REQUEST_METHOD": "POST", "SCRIPT_NAME": "", "PATH_INFO": f"/api/v1/{verb}",
        "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "HTTP_HOST": "127.0.0.1",
        "HTTP_AUTHORIZATION": f"Bearer {token}", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(data)), "wsgi.input": io.BytesIO(data), "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http", "wsgi.version": (1, 0), "wsgi.multithread": True,
        "wsgi.multiprocess": True, "wsgi.run_once": False,
    }  # fmt: skip
    status = []
    result = application(environ, lambda s, headers, exc_info=None: status.append(s))
    try:
        content = b"".join(result)
    finally:
        result.close()
    if not status[0].startswith("200"):
        raise DrainFailed(f"in-process {verb}: {status} {content[:200]!r}")
    return json.loads(content)


def profile_verbs(scenario, token: str, requests: int, stamp: str, base_url: str) -> dict:
    """claim_next + complete through the WSGI application in this process, timed (SQL and
    COMMITs apart), alternating pair by pair with the same pair over HTTP; then the in-process
    pairs again under cProfile."""
    from django.db import connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    from agents.doorbell import doorbell
    from switchboard.client import Client

    client, clock = Client(base_url, token, timeout=30), time.perf_counter
    acc = dict.fromkeys(("sql", "stmts", "commit", "commits", "auth"), 0.0)

    def wrapper(execute, sql, params, many, context):
        t = clock()
        try:
            return execute(sql, params, many, context)
        finally:
            acc["sql"] += clock() - t
            acc["stmts"] += 1
            acc["auth"] += (clock() - t) if _AUTH_SQL.search(sql) else 0.0

    original_commit = DatabaseWrapper._commit

    def timed_commit(self):
        t = clock()
        try:
            return original_commit(self)
        finally:
            acc["commit"] += clock() - t
            acc["commits"] += 1

    recs = {
        v: {k: [] for k in ("total", "sql", "commit", "stmts", "commits", "auth", "http")}
        for v in ("claim_next", "complete")
    }
    profs = {v: cProfile.Profile() for v in recs}

    def one(verb, body, record: bool, prof):
        acc.update(dict.fromkeys(acc, 0.0))
        prof and prof.enable()
        t = clock()
        data = _wsgi_post(verb, body, token)
        total = clock() - t
        prof and prof.disable()
        if record:
            recs[verb]["total"].append(total)
            for k in ("sql", "commit", "stmts", "commits", "auth"):
                recs[verb][k].append(acc[k])
        return data

    def pair(record: bool, paired: bool, profiled: bool) -> None:
        if paired:
            t = clock()
            claimed = client.claim_next()
            t1 = clock()
            client.complete(
                todo_id=claimed["todo"]["id"], attempt_seq=claimed["attempt_seq"], result=RESULT
            )
            if record:
                recs["claim_next"]["http"].append(t1 - t)
                recs["complete"]["http"].append(clock() - t1)
        claimed = one("claim_next", {}, record, profiled and profs["claim_next"])
        body = {
            "todo_id": claimed["todo"]["id"],
            "attempt_seq": claimed["attempt_seq"],
            "result": RESULT,
        }
        one("complete", body, record, profiled and profs["complete"])

    scenario.reset("ours", 60 + 3 * requests)
    DatabaseWrapper._commit = timed_commit
    try:
        with connection.execute_wrapper(wrapper):
            for i in range(30 + requests):
                pair(record=i >= 30, paired=True, profiled=False)
            for _ in range(requests):
                pair(record=False, paired=False, profiled=True)
    finally:
        DatabaseWrapper._commit = original_commit
    connection.close()
    client._drop_connection()  # noqa: SLF001
    doorbell.stop()  # the LISTEN thread claim_next started in this process
    out = {"timed": {}, "areas": {}, "pstats": {}}
    for verb, r in recs.items():
        mean = {k: ms(statistics.fmean(r[k])) for k in ("total", "sql", "commit", "auth", "http")}
        out["timed"][verb] = {
            "requests": len(r["total"]),
            "total_p50_ms": ms(statistics.median(r["total"])),
            "http_p50_ms": ms(statistics.median(r["http"])),
            **{f"{k}_mean_ms": v for k, v in mean.items()},
            "statements": statistics.median(r["stmts"]),
            "commits": statistics.median(r["commits"]),
        }
        path = RESULTS / f"http-profile-{stamp}-{verb}.pstats"
        profs[verb].dump_stats(str(path))
        out["pstats"][verb] = str(path.relative_to(ROOT))
        st = pstats.Stats(profs[verb])
        own = sum(v[2] for v in st.stats.values()) or 1.0
        areas: dict[str, float] = {}
        for (filename, _, func), (_cc, _nc, tt, _ct, _callers) in st.stats.items():
            area = next(
                (label for label, rx in AREAS if re.search(rx, f"{filename}:{func}")),
                "other (stdlib, builtins)",
            )
            areas[area] = areas.get(area, 0.0) + tt
        out["areas"][verb] = {
            "profiled_ms_per_request": round(own * 1000 / requests, 3),
            "share": {
                k: round(v / own, 3) for k, v in sorted(areas.items(), key=lambda kv: -kv[1])
            },
        }
    return out


# --- text -----------------------------------------------------------------------------------


def _cpu(cpu: dict) -> str:
    return f"{f2(cpu['client'])}+{f2(cpu['gunicorn'])}+{f2(cpu['postgres'])} = {cpu['total']:.2f}"


def _pp(s: dict) -> str:
    return f"{f2(s['p50_ms'])}/{f2(s['p95_ms'])}"


def render(note: dict) -> str:
    ss, cores, g = note["server_settings"], note["cpus"] or 1, note["git"]
    out = [
        f"Through gunicorn: claim_next + complete over HTTP (switchboard serve, {ss['server']}, "
        f"{ss['worker_class']}; workers "
        f"{ss['workers']}, threads {ss['threads']}, DB pool {ss['db_pool']}, prepared statements "
        f"{ss['prepared']}; access log on)",
        f"{note['todos']} todos per drain on top of {note['todos']} done todos with history, "
        f"{note['reps']} drain(s) per client count, order reversed every other run; clients are "
        f"separate processes (switchboard.client, one keep-alive connection each) on the same "
        f"{cores} cores as gunicorn and PostgreSQL.",
        db.code_line(g) + "; " + ", ".join(f"{k} {v}" for k, v in g["sha256_12"].items()),
        "todos/s = median over drains (all drains in brackets); latency = client-side, pooled "
        "over the drains; req/s counts claim_next + complete (+ the final empty claim per client).",
        "",
    ]
    rows = [
        [
            "HTTP (gunicorn)",
            c["clients"],
            all_of(c["todos_per_s_all"]),
            f(c["requests_per_s"]),
            _pp(c["claim_next"]),
            _pp(c["complete"]),
            _cpu(c["cpu_ms_per_todo"]),
            f(cores * 1000 / c["cpu_ms_per_todo"]["total"]),
        ]
        for c in note["cells"]
    ]
    rows += [
        [
            "in-process transitions",
            r["workers"],
            all_of(r["todos_per_s_all"]),
            "-",
            f"{f2(r['claim_p50_ms'])}/{f2(r['claim_p95_ms'])}",
            "-",
            f"worker+pg = {f2(r['cpu_ms_per_todo'])}",
            f(cores * 1000 / r["cpu_ms_per_todo"] if r["cpu_ms_per_todo"] else None),
        ]
        for r in note["inprocess"]
    ]
    headers = "path|conc|todos/s|req/s|claim_next p50/p95 ms|complete p50/p95 ms|CPU ms/todo client+gunicorn+pg = total|CPU ceiling todos/s"
    out += table(headers.split("|"), rows)
    out += [
        "",
        "conc = client processes (HTTP) or worker processes (in-process: queues.transitions "
        "called directly, no HTTP; this run's main section, history, no heartbeat).",
        "CPU = user+system seconds per todo of the client processes, gunicorn (master + workers) "
        "and PostgreSQL (this database's backends + background processes); ceiling = cores x "
        "1000 / total.",
        "gunicorn processes busy, CPU s per wall s, per drain (busiest first; a worker's Python "
        "tops out near 1.00 by the GIL): "
        + "; ".join(
            f"{c['clients']}: "
            + " | ".join("/".join(f"{x:.2f}" for x in b) for b in c["gunicorn_busy"])
            for c in note["cells"]
        ),
    ]
    t = note["target"]
    cell = next((c for c in note["cells"] if c["clients"] == t["clients"]), None)
    if cell:
        p95 = max(cell["claim_next"]["p95_ms"], cell["complete"]["p95_ms"])
        ok = cell["todos_per_s"] >= t["todos_per_s"]
        out += [
            "",
            f"Target at {t['clients']} clients: >= {t['todos_per_s']:.0f} todos/s with verb p95 < "
            f"{t['p95_ms']:.0f} ms: {cell['todos_per_s']:.0f} todos/s, worst verb p95 {p95:.2f} ms "
            f"=> throughput {'MET' if ok else 'NOT MET'}, p95 {'MET' if p95 < t['p95_ms'] else 'NOT MET'}"
            + (
                ""
                if ok
                else f" (CPU ceiling on this machine {cores * 1000 / cell['cpu_ms_per_todo']['total']:.0f} todos/s)"
            ),
        ]
    prof = note["profile"]
    rows = []
    for verb, p in prof["timed"].items():
        rest = p["total_mean_ms"] - p["sql_mean_ms"] - p["commit_mean_ms"]
        rows.append(
            [
                verb,
                f"{p['total_p50_ms']:.2f}/{p['total_mean_ms']:.2f}",
                f"{p['sql_mean_ms']:.2f} ({p['statements']:.0f}; {p['auth_mean_ms']:.2f})",
                f"{p['commit_mean_ms']:.2f} ({p['commits']:.0f})",
                f"{rest:.2f}",
                f"{p['http_p50_ms']:.2f}/{p['http_mean_ms']:.2f}",
                f"{p['http_mean_ms'] - p['total_mean_ms']:.2f}",
            ]
        )
    n_pairs = next(iter(prof["timed"].values()))["requests"]
    out += [
        "",
        f"Where the time goes: one request at a time, {n_pairs} claim_next + complete pairs "
        "in-process (the WSGI application, called directly) alternating pair by pair with the same "
        "pair over HTTP:",
    ]
    headers = "verb|in-proc p50/mean ms|SQL ms (stmts; auth's)|COMMIT ms|Django+view+encode ms|HTTP p50/mean ms|gunicorn+HTTP+client ms"
    out += table(headers.split("|"), rows)
    out.append(
        "(means; SQL = time inside cursor.execute (round trip included); COMMIT = explicit "
        "commits; Django+view+encode = the rest of the in-process request; gunicorn+HTTP+client "
        "= HTTP mean minus in-process mean.)"
    )
    for verb, a in prof["areas"].items():
        out.append(
            f"cProfile of {verb} in-process ({a['profiled_ms_per_request']:.2f} ms/request profiled, "
            f"{prof['pstats'][verb]}), own time by area: "
            + ", ".join(f"{k} {100 * v:.0f}%" for k, v in a["share"].items() if v >= 0.01)
        )
    log_ = note["server_log"]
    out.append(
        f"server log {log_['log']}: access-log statuses "
        + ", ".join(f"{k}: {v}" for k, v in sorted(log_["statuses"].items()))
        + f"; {log_['other_lines']} other lines"
    )
    out += [f"  | {line[:160]}" for line in log_["other_sample"]]
    out.append(
        f"http section took {note['duration_s']:.0f} s; load average before/after "
        f"{note['loadavg'][0]} / {note['loadavg'][1]}"
    )
    return "\n".join(out)
