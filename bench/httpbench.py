"""The agents' hot path through the real server (section ``http``): claim_next + complete over
HTTP (``switchboard.client``) and over MCP (``tools/call``), at 1, 4 and 16 client processes.

``switchboard serve`` (the shipped settings) runs as a subprocess against the bench database;
each drain empties N todos queued on top of N done todos with history, drained by C client
processes (one keep-alive connection each) released at a barrier. Recorded: todos/s,
client-side latency per verb, CPU per todo of the clients, the server and PostgreSQL (/proc).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import db, seed
from bench.ledger import latency, paired, per_todo
from bench.table import all_of, f, f2, ints, log, pp, spread, table
from bench.workers import DrainFailed, Pool, serve

TARGET = {"clients": 4, "todos_per_s": 300.0, "p95_ms": 25.0}
# "then": complete carries claim_next's arguments and answers the next claim (one request a
# todo, as switchboard.client's job() and work() do by default).
PROTOCOLS = ("HTTP", "HTTP then", "MCP", "MCP then")
MCP_PROTOCOL = "2026-07-28"


OPTIONS = [  # flag, type, default, --quick's, help
    ("--http-todos", int, 2000, 300, "todos per drain"),
    ("--http-clients", ints, [1, 4, 16], [1, 4, 16], "client processes"),
    ("--http-reps", int, 3, 1, "drains per cell"),
]


def switchboard_command() -> str:
    here = Path(sys.executable).parent / "switchboard"
    return str(here if here.exists() else db.ROOT / ".venv" / "bin" / "switchboard")


class Server:
    """``switchboard serve`` on a free port, ``env`` on top of the bench's environment; a
    subprocess of the bench, ended by its pid. ``command``: what stands for ``switchboard
    serve`` (bench/nohist.py's server, say), given the same arguments."""

    def __init__(self, log_path: Path, command: list[str] | None = None, **env: str):
        from django.conf import settings

        from switchboard import gunicorn_conf

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base_url, self.log_path = f"http://127.0.0.1:{self.port}", log_path
        pool, workers = settings.SWITCHBOARD_DB_POOL_SIZE, gunicorn_conf.workers
        self.settings = {"workers": workers, "db_pool": pool, **env}
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [
                *(command or [switchboard_command(), "serve"]),
                *("--host", "127.0.0.1", "--port", str(self.port)),
            ],
            cwd=db.ROOT,
            env=dict(os.environ, SWITCHBOARD_DEV="1", LOG_LEVEL="WARNING", **env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/api/v1/openapi.json")
                if conn.getresponse().status == 200:
                    conn.close()
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"switchboard serve did not come up; see {log_path}")

    def pids(self) -> list[int]:
        return [self.proc.pid, *db.children(self.proc.pid)]

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

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
        """Access-log statuses, and how many other lines (errors, warnings) it wrote."""
        statuses: dict[str, int] = {}
        other = 0
        for line in self.log_path.read_text(errors="replace").splitlines():
            if m := re.search(r'"[A-Z]+ \S+ HTTP/[\d.]+" (\d{3})\b', line):
                statuses[m.group(1)] = statuses.get(m.group(1), 0) + 1
            elif line.strip() and "[INFO]" not in line:
                other += 1
        return {"statuses": statuses, "other_lines": other, "log": self.log_path.name}

    def log_line(self) -> str:
        s = self.log_summary()
        statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(s["statuses"].items()))
        return f"server log {s['log']}: {statuses}; {s['other_lines']} other lines"


def mcp_caller(base_url: str, token: str):
    """call(verb, **arguments) as an MCP tools/call on one keep-alive connection."""
    link = http.client.HTTPConnection("127.0.0.1", int(base_url.rsplit(":", 1)[1]), timeout=60)
    meta = {
        "io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MCP_PROTOCOL,
        "Mcp-Method": "tools/call",
    }

    def call(name: str, **arguments) -> dict:
        params = {"name": name, "arguments": arguments, "_meta": meta}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        link.request("POST", "/mcp", json.dumps(body), {**headers, "Mcp-Name": name})
        response = link.getresponse()
        result = json.loads(response.read()).get("result") or {}
        if response.status != 200 or result.get("isError"):
            raise RuntimeError(f"{name}: {response.status} {str(result)[:200]}")
        return result["structuredContent"]

    return call


def client_main(conn, index: int) -> None:
    """A client process: claim_next -> complete until the queue is empty, over HTTP
    (switchboard.client) or MCP."""
    from switchboard.client import Client

    def prepare(protocol: str, base_url: str, token: str):
        if protocol.startswith("HTTP"):
            call = Client(base_url, token, timeout=30).call
        else:
            call = mcp_caller(base_url, token)
        call("list_todos", limit=1)  # opens this drain's keep-alive connection before "go"

        then = protocol.endswith(" then")  # complete's then: the next claim in its answer

        def run() -> dict:
            claim, complete, clock = [], [], time.perf_counter
            claimed, n = None, 0
            while True:
                if claimed is None:
                    t = clock()
                    claimed = call("claim_next")
                    if claimed.get("todo") is None:
                        break  # the empty claim that ends the loop is not a claim
                    claim.append(clock() - t)
                t = clock()
                ids = {"todo_id": claimed["todo"]["id"], "attempt_seq": claimed["attempt_seq"]}
                if then:
                    ended = call("complete", **ids, result={"ok": True}, then={})
                    claimed = ended.get("next") or {}
                    if claimed.get("todo") is None:
                        claimed = None  # asked again once: the queue may only look empty
                else:
                    call("complete", **ids, result={"ok": True})
                    claimed = None
                complete.append(clock() - t)
                n += 1
            return {"n": n, "claim": claim, "complete": complete}

        return run

    serve(conn, os.getpid(), prepare)


def http_drain(clients: Pool, n: int, server: Server, protocol: str, token: str) -> dict:
    def probe():
        return {"server": db.cpu_of(server.pids()), "pg": db.cpu_of(db.postgres_pids())}

    d = clients.drain(n, protocol, server.base_url, token, probe=probe)
    rs, (before, after) = d["results"], (d["before"], d["after"])
    return {
        "n": sum(r["n"] for r in rs),
        "wall": d["wall"],
        "claim": [x for r in rs for x in r["claim"]],
        "complete": [x for r in rs for x in r["complete"]],
        "client_cpu": sum(r["cpu"] for r in rs),
        "server_cpu": db.cpu_delta(before["server"], after["server"]),
        "pg_cpu": db.cpu_delta(before["pg"], after["pg"]),
    }


def vend(agent_id: str) -> tuple[int, str]:
    from django.contrib.auth import get_user_model

    from queues import endpoints

    user = get_user_model().objects.get(username="bench")  # made by seed.make_endpoint
    endpoint, token = endpoints.vend(user.teams.get(), agent_id, verbs="all")
    return endpoint.pk, token


def run_section(ctx) -> None:
    args, started = ctx.args, time.monotonic()
    endpoint_id, token = vend("bench-http")
    scenario = seed.Scenario("http", endpoint_id, args.http_todos)
    scenario.build(["ours"])
    clients = Pool(client_main, max(args.http_clients), name="bench-http-client")
    drains = []
    try:
        with Server(db.RESULTS / f"http-server-{ctx.stamp}.log") as server:
            for protocol in PROTOCOLS:  # warm-up: imports, pools, prepared plans
                for c in sorted(set(args.http_clients)):
                    scenario.reset("ours", max(50, args.http_todos // 10))
                    http_drain(clients, c, server, protocol, token)
            for rep in range(args.http_reps):
                order = [(p, c) for p in PROTOCOLS for c in args.http_clients]
                for protocol, c in order if rep % 2 == 0 else order[::-1]:
                    after = scenario.reset("ours", args.http_todos)
                    s = http_drain(clients, c, server, protocol, token)
                    if s["n"] != args.http_todos or seed.unfinished("ours", after):
                        raise DrainFailed(f"{protocol} {c} clients: {s['n']} of {args.http_todos}")
                    drains.append({"protocol": protocol, "clients": c, "rep": rep, **s})
                    log(f"http: {protocol} {c:2d} clients: {s['n'] / s['wall']:.0f} todos/s")
    finally:
        clients.close()
    ctx.ledger.notes["http"] = note = {
        "todos": args.http_todos,
        "reps": args.http_reps,
        "server_settings": server.settings,
        "cpus": os.cpu_count(),
        "cells": cells(drains),
        "server_log": server.log_line(),
        "target": TARGET,
        "git": db.git_state(),
        "duration_s": round(time.monotonic() - started, 1),
    }
    (db.RESULTS / f"http-{ctx.stamp}.txt").write_text(render(note) + "\n")


# Issue 31: MCP at the HTTP path's speed, each MCP loop against HTTP's same loop.
MCP_VS_HTTP = {"MCP": "HTTP", "MCP then": "HTTP then"}


def cells(drains: list[dict]) -> list[dict]:
    out = []
    for protocol, c in dict.fromkeys((d["protocol"], d["clients"]) for d in drains):
        mine = [d for d in drains if d["protocol"] == protocol and d["clients"] == c]
        http = [
            d for d in drains if d["protocol"] == MCP_VS_HTTP.get(protocol) and d["clients"] == c
        ]
        cpu = {
            part: statistics.median(per_todo(d[f"{part}_cpu"] or 0.0, d["n"]) for d in mine)
            for part in ("client", "server", "pg")
        }
        out.append(
            {
                "protocol": protocol,
                "clients": c,
                "todos_per_s": statistics.median(d["n"] / d["wall"] for d in mine),
                "todos_per_s_all": [round(d["n"] / d["wall"], 1) for d in mine],
                "claim_next": latency([x for d in mine for x in d["claim"]]),
                "complete": latency([x for d in mine for x in d["complete"]]),
                "cpu_ms_per_todo": {**cpu, "total": round(sum(cpu.values()), 3)},
                # the median of the drains' ratios to HTTP's drain of the same round
                "vs_http": paired(mine, http, lambda d: d["n"] / d["wall"]),
            }
        )
    return out


def verdict(cell: dict, target: dict) -> tuple[float, bool, bool]:
    """The worst verb's p95, and whether throughput and p95 meet the target."""
    p95 = max(cell["claim_next"]["p95_ms"] or 0, cell["complete"]["p95_ms"] or 0)
    return p95, cell["todos_per_s"] >= target["todos_per_s"], p95 < target["p95_ms"]


def render(note: dict) -> str:
    ss, cores, t = note["server_settings"], note["cpus"] or 1, note["target"]
    out = [
        f"The hot path through switchboard serve ({ss['workers']} workers, DB pool "
        f"{ss['db_pool']}): claim_next + complete, {note['todos']} todos per drain on as many "
        f"done, {note['reps']} drain(s) per cell; {db.code_line(note['git'])}",
        "",
    ]
    rows = []
    for c in note["cells"]:
        cpu = c["cpu_ms_per_todo"]
        rows.append(
            [
                c["protocol"],
                c["clients"],
                all_of(c["todos_per_s_all"]),
                pp(c["claim_next"]),
                pp(c["complete"]),
                f"{f2(cpu['client'])}+{f2(cpu['server'])}+{f2(cpu['pg'])} = {f2(cpu['total'])}",
                f(cores * 1000 / cpu["total"] if cpu["total"] else None),
                spread(c.get("vs_http")) if c.get("vs_http") else "",
            ]
        )
    headers = "protocol|clients|todos/s|claim_next p50/p95 ms|complete p50/p95 ms|CPU ms/todo client+server+pg = total|CPU ceiling todos/s|x HTTP's loop"
    out += table(headers.split("|"), rows)
    for c in note["cells"]:
        if c["clients"] == t["clients"]:
            p95, fast, quick = verdict(c, t)
            out.append(
                f"Target at {t['clients']} clients over {c['protocol']}: >= "
                f"{t['todos_per_s']:.0f} todos/s with verb p95 < {t['p95_ms']:.0f} ms: "
                f"{c['todos_per_s']:.0f} todos/s, p95 {p95:.1f} ms => {'MET' if fast and quick else 'NOT MET'}"
            )
    out.append(f"{note['server_log']}; section took {note['duration_s']:.0f} s")
    return "\n".join(out)
