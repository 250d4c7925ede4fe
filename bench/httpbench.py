"""The agents' hot path through a real ``switchboard serve`` (section ``http``; docs/benchmarks.md,
"The agent API through gunicorn"): claim_next + complete over HTTP and over MCP, with and
without then, at 1, 4 and 16 client processes; and the served node every section uses."""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import statistics
import time
from collections import Counter
from pathlib import Path

from bench import db, seed
from bench.ledger import latency, paired, per_todo
from bench.table import all_of, f, f2, ints, log, pp, spread, table, verdict
from bench.workers import DrainFailed, Pool, serve

TARGET = {"clients": 4, "todos_per_s": 300.0, "p95_ms": 25.0}
# "then": complete carries claim_next's arguments and answers the next claim.
PROTOCOLS = ("HTTP", "HTTP then", "MCP", "MCP then")
MCP_VS_HTTP = {"MCP": "HTTP", "MCP then": "HTTP then"}  # issue 31: MCP at HTTP's speed
MCP_PROTOCOL = "2026-07-28"
OPTIONS = [  # flag, type, default, --quick's, help
    ("--http-todos", int, 2000, 300, "todos per drain"),
    ("--http-clients", ints, [1, 4, 16], [1, 4, 16], "client processes"),
    ("--http-reps", int, 3, 1, "drains per cell"),
]


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


def lines(link, stop=lambda: False):
    """Each line of a raw HTTP/1.0 response (unchunked: no chunk size splits an event), status
    line first, as ``(time.time(), line)`` when read; until it closes or ``stop()``."""
    buffer = b""
    while not stop():
        try:
            chunk = link.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return
        at, (*done, buffer) = time.time(), (buffer + chunk).split(b"\n")
        for line in done:
            yield at, line.rstrip(b"\r")


class Server(db.Spawned):
    """``switchboard serve`` on a free port, ``env`` on top of the bench's environment."""

    def __init__(self, log_path: Path, **env: str):
        from django.conf import settings

        from switchboard import gunicorn_conf

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        pool, workers = settings.SWITCHBOARD_DB_POOL_SIZE, gunicorn_conf.workers
        self.settings = {"workers": workers, "db_pool": pool, **env}
        super().__init__(log_path, "serve", "--host", "127.0.0.1", "--port", str(self.port), **env)
        started = time.monotonic()
        while request(self.port, "/healthz")[0] != 200:
            if time.monotonic() - started > 60 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"gave up waiting for serve (see {log_path})")
            time.sleep(0.05)

    def log_summary(self) -> dict:
        """Access-log statuses, how many other lines (errors, warnings) it wrote, and both
        in a line."""
        statuses, other = Counter(), 0
        for line in self.log_path.read_text(errors="replace").splitlines():
            if m := re.search(r'"[A-Z]+ \S+ HTTP/[\d.]+" (\d{3})\b', line):
                statuses[m.group(1)] += 1
            else:
                other += bool(line.strip()) and "[INFO]" not in line
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
        then = {"then": {}} if protocol.endswith(" then") else {}

        def run() -> dict:
            claim, complete, clock, claimed, n = [], [], time.perf_counter, None, 0
            while True:
                if claimed is None:
                    t = clock()
                    if (claimed := call("claim_next")).get("todo") is None:
                        break  # the empty claim that ends the loop is not a claim
                    claim.append(clock() - t)
                t = clock()
                ids = {"todo_id": claimed["todo"]["id"], "attempt_seq": claimed["attempt_seq"]}
                ended = call("complete", **ids, result={"ok": True}, **then)
                # with then, the next claim; none: asked again once (the queue may only look empty)
                claimed = (ended.get("next") or {}) if then else None
                claimed = claimed if claimed and claimed.get("todo") else None
                complete.append(clock() - t)
                n += 1
            return {
                "n": n,
                "claim": claim,
                "complete": complete,
                "lat": complete if then else claim,
            }

        return run

    serve(conn, prepare)


def http_drain(clients: Pool, n: int, server: Server, protocol: str, token: str) -> dict:
    """One drain by ``n`` client processes: Pool.drain's figures, each verb's latencies, and
    the server's CPU."""
    d = clients.drain(n, protocol, server.base_url, token, probe=lambda: db.cpu_of(server.pids()))
    rs, cpu = d["results"], db.cpu_delta(d["before"], d["after"])
    verbs = {v: [x for r in rs for x in r[v]] for v in ("claim", "complete")}
    return d | verbs | {"server_cpu": cpu}


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


def cells(drains: list[dict]) -> list[dict]:
    out = []
    for protocol, c in dict.fromkeys((d["protocol"], d["clients"]) for d in drains):
        mine = [d for d in drains if d["protocol"] == protocol and d["clients"] == c]
        http = [
            d for d in drains if (d["protocol"], d["clients"]) == (MCP_VS_HTTP.get(protocol), c)
        ]
        cpu = {
            part: statistics.median(per_todo(d[f"{part}_cpu"] or 0.0, d["n"]) for d in mine)
            for part in ("client", "server", "pg")
        }
        rates = [d["n"] / d["wall"] for d in mine]
        out.append(
            {
                "protocol": protocol,
                "clients": c,
                "todos_per_s": statistics.median(rates),
                "todos_per_s_all": [round(r, 1) for r in rates],
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
        split = f"{f2(cpu['client'])}+{f2(cpu['server'])}+{f2(cpu['pg'])} = {f2(cpu['total'])}"
        row = [c["protocol"], c["clients"], all_of(c["todos_per_s_all"]), pp(c["claim_next"])]
        rows.append([*row, pp(c["complete"]), split, ceiling, spread(c.get("vs_http")) or ""])
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
