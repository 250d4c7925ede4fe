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
from collections import Counter
from pathlib import Path

from bench import db, seed
from bench.ledger import latency, paired, per_todo
from bench.table import all_of, f, f2, ints, log, pp, spread, table, verdict
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what: str, predicate, seconds: float = 60.0, proc=None) -> float:
    """Seconds until ``predicate()`` holds; RuntimeError naming ``what`` when ``seconds`` pass
    first or ``proc`` exits."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > seconds or (proc is not None and proc.poll() is not None):
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def request(port: int, path: str, body: dict | None = None, token: str = "") -> tuple[int, dict]:
    """One request on a fresh connection (POST when there is a body): the status (0: no
    answer) and a 200's JSON."""
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        link.request("GET" if body is None else "POST", path, json.dumps(body), headers)
        response = link.getresponse()
        data = response.read()
        return response.status, json.loads(data) if response.status == 200 and body else {}
    except (OSError, http.client.HTTPException, ValueError):
        return 0, {}
    finally:
        link.close()


def healthy(port: int) -> bool:
    return request(port, "/healthz")[0] == 200


class Server:
    """``switchboard serve`` on a free port, ``env`` on top of the bench's environment; a
    subprocess of the bench, ended by its pid."""

    def __init__(self, log_path: Path, **env: str):
        from django.conf import settings

        from switchboard import gunicorn_conf

        self.port, self.log_path = free_port(), log_path
        self.base_url = f"http://127.0.0.1:{self.port}"
        pool, workers = settings.SWITCHBOARD_DB_POOL_SIZE, gunicorn_conf.workers
        self.settings = {"workers": workers, "db_pool": pool, **env}
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [switchboard_command(), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=db.ROOT,
            env=dict(os.environ, SWITCHBOARD_DEV="1", LOG_LEVEL="WARNING", **env),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(f"serve (see {log_path})", lambda: healthy(self.port), proc=self.proc)
        except RuntimeError:
            self.stop()
            raise

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
        """Access-log statuses, how many other lines (errors, warnings) it wrote, and both
        in a line."""
        statuses: Counter = Counter()
        other = 0
        for line in self.log_path.read_text(errors="replace").splitlines():
            if m := re.search(r'"[A-Z]+ \S+ HTTP/[\d.]+" (\d{3})\b', line):
                statuses[m.group(1)] += 1
            elif line.strip() and "[INFO]" not in line:
                other += 1
        said = ", ".join(f"{k}: {v:,}" for k, v in sorted(statuses.items()))
        line = f"server log {self.log_path.name}: {said}; {other} other lines"
        return {"statuses": dict(statuses), "other_lines": other, "line": line}


def mcp_caller(base_url: str, token: str):
    """call(verb, **arguments) as an MCP tools/call on one keep-alive connection."""
    link = http.client.HTTPConnection("127.0.0.1", int(base_url.rsplit(":", 1)[1]), timeout=60)
    mcp = "io.modelcontextprotocol/"
    meta = {f"{mcp}protocolVersion": MCP_PROTOCOL, f"{mcp}clientCapabilities": {}}
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    headers |= {"Accept": "application/json, text/event-stream", "Mcp-Method": "tools/call"}
    headers |= {"MCP-Protocol-Version": MCP_PROTOCOL}

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
        http_ = protocol.startswith("HTTP")
        call = Client(base_url, token, timeout=30).call if http_ else mcp_caller(base_url, token)
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
            out = {"n": n, "claim": claim, "complete": complete}
            return out | {"lat": complete if then else claim}

        return run

    serve(conn, prepare)


def http_drain(clients: Pool, n: int, server: Server, protocol: str, token: str) -> dict:
    """One drain by ``n`` client processes: Pool.drain's figures, each verb's latencies, and
    the server's CPU."""
    d = clients.drain(n, protocol, server.base_url, token, probe=lambda: db.cpu_of(server.pids()))
    rs = d["results"]
    return d | {
        "claim": [x for r in rs for x in r["claim"]],
        "complete": [x for r in rs for x in r["complete"]],
        "server_cpu": db.cpu_delta(d["before"], d["after"]),
    }


def run_section(ctx) -> dict:
    args = ctx.args
    endpoint_id, token = seed.vend("bench-http")
    scenario = seed.Scenario(endpoint_id, args.http_todos)
    scenario.build()
    clients = Pool(client_main, max(args.http_clients))
    drains = []
    try:
        with Server(db.RESULTS / f"http-server-{ctx.stamp}.log") as server:
            for protocol in PROTOCOLS:  # warm-up: imports, pools, prepared plans
                for c in sorted(set(args.http_clients)):
                    scenario.reset(max(50, args.http_todos // 10))
                    http_drain(clients, c, server, protocol, token)
            for rep in range(args.http_reps):
                order = [(p, c) for p in PROTOCOLS for c in args.http_clients]
                for protocol, c in order if rep % 2 == 0 else order[::-1]:
                    after = scenario.reset(args.http_todos)
                    s = http_drain(clients, c, server, protocol, token)
                    if s["n"] != args.http_todos or seed.unfinished(after):
                        raise DrainFailed(f"{protocol} {c} clients: {s['n']} of {args.http_todos}")
                    del s["results"], s["lat"]
                    drains.append({"protocol": protocol, "clients": c, "rep": rep, **s})
                    log(f"http: {protocol} {c:2d} clients: {s['n'] / s['wall']:.0f} todos/s")
    finally:
        clients.close()
    note = {"todos": args.http_todos, "reps": args.http_reps, "cpus": os.cpu_count()}
    note |= {"server_settings": server.settings, "server_log": server.log_summary()["line"]}
    return note | {"cells": cells(drains), "target": TARGET}


# Issue 31: MCP at the HTTP path's speed, each MCP loop against HTTP's same loop.
MCP_VS_HTTP = {"MCP": "HTTP", "MCP then": "HTTP then"}


def cells(drains: list[dict]) -> list[dict]:
    out = []
    for protocol, c in dict.fromkeys((d["protocol"], d["clients"]) for d in drains):
        mine = [d for d in drains if d["protocol"] == protocol and d["clients"] == c]
        http = [
            d for d in drains if (d["protocol"], d["clients"]) == (MCP_VS_HTTP.get(protocol), c)
        ]
        cpu = {}
        for part in ("client", "server", "pg"):
            cpu[part] = statistics.median(per_todo(d[f"{part}_cpu"] or 0.0, d["n"]) for d in mine)
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


def judge(cell: dict, target: dict) -> tuple[float, bool, bool]:
    """The worst verb's p95, and whether throughput and p95 meet the target."""
    p95 = max(cell["claim_next"]["p95_ms"] or 0, cell["complete"]["p95_ms"] or 0)
    return p95, cell["todos_per_s"] >= target["todos_per_s"], p95 < target["p95_ms"]


def render(note: dict) -> str:
    ss, cores, t, rows = note["server_settings"], note["cpus"] or 1, note["target"], []
    for c in note["cells"]:
        cpu = c["cpu_ms_per_todo"]
        ceiling = f(cores * 1000 / cpu["total"] if cpu["total"] else None)
        cpu = f"{f2(cpu['client'])}+{f2(cpu['server'])}+{f2(cpu['pg'])} = {f2(cpu['total'])}"
        latencies = [pp(c["claim_next"]), pp(c["complete"])]
        vs_http = spread(c["vs_http"]) if c.get("vs_http") else ""
        rows.append(
            [
                c["protocol"],
                c["clients"],
                all_of(c["todos_per_s_all"]),
                *latencies,
                cpu,
                ceiling,
                vs_http,
            ]
        )
    headers = "protocol|clients|todos/s|claim_next p50/p95 ms|complete p50/p95 ms|CPU ms/todo client+server+pg = total|CPU ceiling todos/s|x HTTP's loop"
    out = [
        f"The hot path through switchboard serve ({ss['workers']} workers, DB pool "
        f"{ss['db_pool']}): claim_next + complete, {note['todos']} todos per drain on as many "
        f"done, {note['reps']} drain(s) per cell; {db.code_line(note['git'])}",
        "",
        *table(headers.split("|"), rows),
    ]
    for c in note["cells"]:
        if c["clients"] == t["clients"]:
            p95, fast, quick = judge(c, t)
            out.append(
                f"Target at {t['clients']} clients over {c['protocol']}: >= "
                f"{t['todos_per_s']:.0f} todos/s with verb p95 < {t['p95_ms']:.0f} ms: "
                f"{c['todos_per_s']:.0f} todos/s, p95 {p95:.1f} ms => {verdict(fast and quick)}"
            )
    out.append(f"{note['server_log']}; section took {note['duration_s']:.0f} s")
    return "\n".join(out)
