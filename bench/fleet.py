"""Fleets (section ``fleet``, issue 12): N idle long-polls on one ``switchboard serve``, and
the hot path under the ASGI server against the threaded one.

**Idle fleet.** For each N (1,000, 2,000, 5,000 by default), a fresh ``switchboard serve``
(ASGI: uvicorn workers under gunicorn, the shipped settings) and one waiter process
(asyncio, one raw HTTP/1.1 connection per waiter) holding N ``claim_next`` long-polls
(``wait_seconds`` 30) spread over 10 endpoints; a waiter that is answered completes what it
got and polls again, as an agent does. The waiter caps are set as a deployment would size
them for this fleet: ``SWITCHBOARD_WAITERS_PER_ENDPOINT`` = 1.25 x N/10 (one endpoint's whole
fleet could land on one worker) and ``SWITCHBOARD_WAITERS_PER_PROCESS`` = 1.25 x N. While they
wait, from this process: the server's CPU over a quiet window and its RSS (per waiter: the
growth over the same server before the fleet, divided by N); p50/p95 of ``list_todos`` and
of the Board's queue page (signed in), with no fleet and with it; wake-up latency for todos
created one at a time (``create_todo`` over HTTP, from its answer to the waiter's reading the
claim, and from the moment it was sent); and every error (any status but 200, any exception,
the server log's).

**Hot path.** ``claim_next`` + ``complete`` drains (bench/httpbench.py's clients and drain)
at 1, 4 and 16 client processes, over HTTP and over MCP (tools/call, the 2026-07-28 stateless
protocol, one keep-alive connection per client), under ``SWITCHBOARD_SERVER=asgi`` and
``=wsgi`` (gthread), the order of the two servers swapped every other repetition; the ratio
is asgi/wsgi of the median todos/s, with the server's CPU per todo beside it.

The open-files limit of this process is raised to its hard limit (each waiter is a socket
here and one in the server; the server's workers raise their own, switchboard/workers.py).
"""

from __future__ import annotations

import asyncio
import http.client
import importlib
import json
import math
import multiprocessing as mp
import os
import resource
import statistics
import time

from bench import db, httpbench, seed
from bench.inprocess import log
from bench.ledger import ms, percentile
from bench.table import f, f2, table
from bench.workers import DrainFailed, Pool, serve

RESULTS = db.RESULTS
ENDPOINTS = 10
WAIT_SECONDS = 30
TARGET = {"waiters": 2000, "p95_ms": 100.0, "wake_p95_ms": 100.0, "ratio": 1.0}
MCP_PROTOCOL = "2026-07-28"
# Waiters come up at this rate (a fleet starting over N/200 s); each arrival is two
# statements (the token, a claim that finds nothing), like every re-poll after a 30 s wait,
# so a fleet of N asks about N/30 claims a second in its steady state.
RAMP_PER_S = 200.0
# "Parked": the server's processes, summed, under this share of one core over a second.
SETTLED_CPU = 0.2
SETTLE_MAX_S = 30.0


def settle(pids: list[int]) -> float:
    """Wait until the server has taken in the waiters' requests (its CPU falls quiet), at most
    SETTLE_MAX_S; returns the time it did."""
    deadline = time.monotonic() + SETTLE_MAX_S
    while time.monotonic() < deadline:
        before, t = db.cpu_of(pids), time.monotonic()
        time.sleep(1)
        if db.cpu_delta(before, db.cpu_of(pids)) / (time.monotonic() - t) < SETTLED_CPU:
            break
    return time.monotonic()


def add_arguments(p, ints) -> None:
    p.add_argument(
        "--fleet-waiters",
        type=ints,
        default=None,
        help="idle long-polls per server [1000,2000,5000; quick 500,2000]",
    )
    p.add_argument(
        "--fleet-probes", type=int, default=None, help="requests per probe [60; quick 30]"
    )
    p.add_argument(
        "--fleet-wakes", type=int, default=None, help="todos created one at a time [40; quick 20]"
    )
    p.add_argument(
        "--fleet-todos", type=int, default=None, help="todos per hot-path drain [1000; quick 300]"
    )
    p.add_argument(
        "--fleet-clients", type=ints, default=[1, 4, 16], help="hot-path clients [1,4,16]"
    )
    p.add_argument("--fleet-reps", type=int, default=None, help="hot-path repetitions [2; quick 1]")


def finish_arguments(args) -> None:
    args.fleet_waiters = args.fleet_waiters or ([500, 2000] if args.quick else [1000, 2000, 5000])
    args.fleet_probes = args.fleet_probes or (30 if args.quick else 60)
    args.fleet_wakes = args.fleet_wakes or (20 if args.quick else 40)
    args.fleet_todos = args.fleet_todos or (300 if args.quick else 1000)
    args.fleet_reps = args.fleet_reps or (1 if args.quick else 2)


def raise_open_files() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


class ServerUnder:
    """httpbench.Server (``switchboard serve``) with ``SWITCHBOARD_SERVER`` and other
    settings set for it alone; its recorded settings are the ones it ran with."""

    def __init__(self, kind: str, stamp: str, label: str, **env: str) -> None:
        from switchboard import gunicorn_conf

        saved = {k: os.environ.get(k) for k in ("SWITCHBOARD_SERVER", *env)}
        os.environ.update({"SWITCHBOARD_SERVER": kind, **env})
        try:
            importlib.reload(gunicorn_conf)  # the settings Server records, for this kind
            self.server = httpbench.Server(RESULTS / f"fleet-{label}-{stamp}.log")
            self.server.settings.update(env)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            importlib.reload(gunicorn_conf)

    def __enter__(self):
        return self.server

    def __exit__(self, *exc) -> None:
        self.server.stop()


# --- the waiters: one process, asyncio, raw HTTP/1.1 -----------------------------------------


async def _post(reader, writer, path: str, token: str, body: dict) -> tuple[int, dict]:
    data = json.dumps(body).encode()
    writer.write(
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        ).encode()
        + data
    )
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    payload = await reader.readexactly(length)
    return status, json.loads(payload) if payload else {}


async def _waiter(port: int, token: str, state: dict, stop: asyncio.Event) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        state["errors"][f"connect {type(exc).__name__}"] = (
            state["errors"].get(f"connect {type(exc).__name__}", 0) + 1
        )
        return
    first = True
    try:
        while not stop.is_set():
            request = asyncio.ensure_future(
                _post(reader, writer, "/api/v1/claim_next", token, {"wait_seconds": WAIT_SECONDS})
            )
            if first:
                state["sent"] += 1
                first = False
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({request, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not request.done():
                request.cancel()
                return
            stopping.cancel()
            status, body = request.result()
            state["answers"] += 1
            if status != 200:
                state["errors"][str(status)] = state["errors"].get(str(status), 0) + 1
                await asyncio.sleep(2)  # as a client told to retry shortly would
                continue
            todo = body.get("todo")
            if todo is None:
                continue  # the wait ran out: poll again
            state["wakes"].append((todo["id"], time.monotonic()))
            status, _ = await _post(
                reader,
                writer,
                "/api/v1/complete",
                token,
                {"todo_id": todo["id"], "attempt_seq": body["attempt_seq"]},
            )
            if status != 200:
                state["errors"][f"complete {status}"] = (
                    state["errors"].get(f"complete {status}", 0) + 1
                )
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        if not stop.is_set():
            key = type(exc).__name__
            state["errors"][key] = state["errors"].get(key, 0) + 1
    finally:
        writer.close()


async def _fleet(conn, port: int, tokens: list[str], n: int, ramp_per_s: float) -> dict:
    loop = asyncio.get_running_loop()
    state: dict = {"sent": 0, "answers": 0, "wakes": [], "errors": {}}
    stop = asyncio.Event()
    tasks = []
    for i in range(n):
        tasks.append(loop.create_task(_waiter(port, tokens[i % len(tokens)], state, stop)))
        if i % 100 == 99:
            await asyncio.sleep(100 / ramp_per_s)
    while state["sent"] + sum(state["errors"].values()) < n:
        await asyncio.sleep(0.05)
    conn.send(("parked", state["sent"]))
    message = await loop.run_in_executor(None, conn.recv)
    assert message[0] == "stop", message
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return state


def waiters_main(conn) -> None:
    """The waiter process: ("start", port, tokens, n) -> ("parked", sent); ("stop",) ->
    ("done", state); ("exit",)."""
    limit = raise_open_files()
    conn.send(("hello", limit))
    while True:
        message = conn.recv()
        if message[0] == "exit":
            return
        _, port, tokens, n, ramp = message
        cpu0 = time.process_time()
        state = asyncio.run(_fleet(conn, port, tokens, n, ramp))
        state["cpu_s"] = round(time.process_time() - cpu0, 2)
        conn.send(("done", state))


# --- the other client: list_todos, the queue page, todos one at a time ------------------------


class Probe:
    def __init__(self, port: int, token: str, cookie: str) -> None:
        self.port, self.token, self.cookie = port, token, cookie
        self.errors: dict[str, int] = {}
        self.reopen()

    def reopen(self) -> None:
        """Fresh keep-alive connections (the server closes one idle past its keep-alive,
        SWITCHBOARD_WEB_KEEPALIVE); opened before each timed stretch, outside the timing."""
        for name in ("api", "board"):
            if hasattr(self, name):
                getattr(self, name).close()
            link = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
            link.connect()
            setattr(self, name, link)

    def _note(self, what: str, status: int) -> None:
        if status != 200:
            self.errors[f"{what} {status}"] = self.errors.get(f"{what} {status}", 0) + 1

    def _exchange(self, name: str, what: str, *request) -> tuple[float, int, bytes]:
        """One request, timed; a connection the server closed instead of answering counts as
        an error ("<what> dropped") and the request is sent again on a fresh connection,
        timed from the first try."""
        t = time.monotonic()
        for attempt in (1, 2):
            link = getattr(self, name)
            try:
                link.request(*request)
                response = link.getresponse()
                data = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionError):
                self.errors[f"{what} dropped"] = self.errors.get(f"{what} dropped", 0) + 1
                if attempt == 2:
                    raise
                link.close()
                setattr(self, name, http.client.HTTPConnection("127.0.0.1", self.port, timeout=60))
        self._note(what, response.status)
        return time.monotonic() - t, response.status, data

    def post(self, verb: str, body: dict, token: str | None = None) -> tuple[float, dict]:
        headers = {
            "Authorization": f"Bearer {token or self.token}",
            "Content-Type": "application/json",
        }
        took, status, data = self._exchange(
            "api", verb, "POST", f"/api/v1/{verb}", json.dumps(body), headers
        )
        return took, json.loads(data) if status == 200 else {}

    def queue_page(self) -> float:
        took, _, _ = self._exchange(
            "board", "queue page", "GET", "/", None, {"Cookie": self.cookie}
        )
        return took

    def latencies(self, count: int) -> dict:
        self.reopen()
        listed, page = [], []
        for _ in range(count):
            listed.append(self.post("list_todos", {})[0])
            page.append(self.queue_page())
        return {"list_todos": _lat(listed), "queue_page": _lat(page)}

    def close(self) -> None:
        self.api.close()
        self.board.close()


def _lat(values: list[float]) -> dict:
    return {
        "n": len(values),
        "p50_ms": ms(percentile(values, 50), 2),
        "p95_ms": ms(percentile(values, 95), 2),
        "max_ms": ms(max(values), 2) if values else None,
    }


def _session_cookie(username: str) -> str:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def _bench_user() -> None:
    from django.contrib.auth import get_user_model

    if not get_user_model().objects.filter(username="bench").exists():
        seed.make_endpoint()


def idle_fleet(ctx, n: int, waiters: mp.connection.Connection, tokens: list[str], cookie) -> dict:
    args = ctx.args
    caps = {
        "SWITCHBOARD_WAITERS_PER_ENDPOINT": str(math.ceil(1.25 * n / ENDPOINTS)),
        "SWITCHBOARD_WAITERS_PER_PROCESS": str(math.ceil(1.25 * n)),
    }
    load0 = [round(x, 2) for x in os.getloadavg()]
    with ServerUnder("asgi", ctx.stamp, f"idle-{n}", **caps) as server:
        port = server.port
        probe = Probe(port, tokens[0], cookie)
        probe.latencies(10)  # warm-up: imports, pools, templates
        rss0 = rss_mib(server.pids())
        alone = probe.latencies(args.fleet_probes)
        t0 = time.monotonic()
        waiters.send(("start", port, tokens, n, RAMP_PER_S))
        message = waiters.recv()
        assert message[0] == "parked", message
        parked_s = time.monotonic() - t0
        pids = server.pids()
        settled_s = settle(pids) - t0
        cpu0, quiet0 = db.cpu_of(pids), time.monotonic()
        time.sleep(5)
        idle_cpu = db.cpu_delta(cpu0, db.cpu_of(pids)) / (time.monotonic() - quiet0)
        rss1 = rss_mib(server.pids())
        loaded = probe.latencies(args.fleet_probes)
        created = []
        probe.reopen()
        for i in range(args.fleet_wakes):
            sent = time.monotonic()
            took, body = probe.post(
                "create_todo", {"title": f"wake {i}"}, token=tokens[i % len(tokens)]
            )
            created.append((body.get("todo", {}).get("id"), sent, sent + took))
            time.sleep(0.25)
        time.sleep(1)
        waiting_s = time.monotonic() - t0
        waiters.send(("stop",))
        message = waiters.recv()
        assert message[0] == "done", message
        state = message[1]
        probe.close()
    woke = dict(state["wakes"])
    from_answer = [woke[i] - answered for i, _, answered in created if i in woke]
    from_sent = [woke[i] - sent for i, sent, _ in created if i in woke]
    log_ = server.log_summary()
    server_errors = {k: v for k, v in log_["statuses"].items() if k != "200"}
    return {
        "waiters": n,
        "sent": state["sent"],
        "caps": caps,
        "server_settings": server.settings,
        "parked_s": round(parked_s, 1),
        "settled_s": round(settled_s, 1),
        "waiting_s": round(waiting_s, 1),
        "rss_mib": [rss0, rss1],
        "rss_kib_per_waiter": round((rss1 - rss0) * 1024 / n, 1),
        "idle_cpu_pct": round(100 * idle_cpu, 1),
        "alone": alone,
        "with_fleet": loaded,
        "wake": {
            "created": len(created),
            "woken": len(from_answer),
            "from_answer": {**_lat(from_answer)},
            "from_sent": {**_lat(from_sent)},
        },
        "errors": {
            "waiters": state["errors"],
            "probe": probe.errors,
            "server_statuses": server_errors,
            "server_other_lines": log_["other_lines"],
            "server_sample": log_["other_sample"],
            "unwoken": len(created) - len(from_answer),
        },
        "waiter_process_cpu_s": state["cpu_s"],
        "loadavg": [load0, [round(x, 2) for x in os.getloadavg()]],
    }


# --- the hot path: HTTP (httpbench's clients) and MCP -------------------------------------------


def mcp_client_main(conn, index: int) -> None:
    """A client process: claim_next -> complete as MCP tools/call until empty (the same
    stats as httpbench.client_main, so httpbench.http_drain aggregates both)."""

    def prepare(base_url: str, token: str):
        port = int(base_url.rsplit(":", 1)[1])
        link = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        ids = iter(range(1, 1 << 30))

        def call(name: str, arguments: dict) -> dict:
            body = {
                "jsonrpc": "2.0",
                "id": next(ids),
                "method": "tools/call",
                "params": {
                    "name": name,
                    "arguments": arguments,
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": MCP_PROTOCOL,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            }
            link.request(
                "POST",
                "/mcp",
                json.dumps(body),
                {
                    "Authorization": f"Bearer {token}",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": MCP_PROTOCOL,
                    "Mcp-Method": "tools/call",
                    "Mcp-Name": name,
                },
            )
            response = link.getresponse()
            data = json.loads(response.read())
            result = data.get("result") or {}
            if response.status != 200 or result.get("isError"):
                raise RuntimeError(f"{name}: {response.status} {str(data)[:200]}")
            return result["structuredContent"]

        call("list_todos", {"limit": 1})  # opens the keep-alive connection before "go"

        def run() -> dict:
            claim, complete, clock, n, requests = [], [], time.perf_counter, 0, 0
            try:
                while True:
                    t = clock()
                    claimed = call("claim_next", {})
                    requests += 1
                    if claimed.get("todo") is None:
                        break
                    claim.append(clock() - t)
                    t = clock()
                    call(
                        "complete",
                        {
                            "todo_id": claimed["todo"]["id"],
                            "attempt_seq": claimed["attempt_seq"],
                            "result": httpbench.RESULT,
                        },
                    )
                    complete.append(clock() - t)
                    requests += 1
                    n += 1
            finally:
                link.close()
            return {"n": n, "requests": requests, "claim": claim, "complete": complete}

        return run

    serve(conn, os.getpid(), prepare)


def hot_path(ctx, endpoint_id: int, token: str) -> list[dict]:
    args = ctx.args
    scenario = seed.Scenario("fleet", endpoint_id, args.fleet_todos)
    scenario.build(["ours"])
    local_pg = all(db.is_postgres(p) for p in httpbench.postgres_pids()[:1])
    size = max(args.fleet_clients)
    pools = {
        "HTTP": Pool(httpbench.client_main, size, name="fleet-http-client"),
        "MCP": Pool(mcp_client_main, size, name="fleet-mcp-client"),
    }
    drains = []
    try:
        for rep in range(args.fleet_reps):
            for kind in ("asgi", "wsgi") if rep % 2 == 0 else ("wsgi", "asgi"):
                with ServerUnder(kind, ctx.stamp, f"hot-{kind}-{rep}") as server:
                    for protocol, pool in pools.items():
                        for c in sorted(set(args.fleet_clients)):  # warm-up, not recorded
                            scenario.reset("ours", max(50, args.fleet_todos // 10))
                            httpbench.http_drain(pool, c, server, token, local_pg)
                        for c in args.fleet_clients:
                            after = scenario.reset("ours", args.fleet_todos)
                            s = httpbench.http_drain(pool, c, server, token, local_pg)
                            if s["n"] != args.fleet_todos or seed.unfinished("ours", after):
                                raise DrainFailed(
                                    f"{kind} {protocol} {c} clients drained {s['n']} of "
                                    f"{args.fleet_todos}"
                                )
                            s.pop("gunicorn_busy", None)
                            drains.append(
                                {
                                    "server": kind,
                                    "protocol": protocol,
                                    "clients": c,
                                    "rep": rep,
                                    "settings": server.settings,
                                    "loadavg": [round(x, 2) for x in os.getloadavg()],
                                    **s,
                                }
                            )
                            log(
                                f"fleet: {kind} {protocol} {c:2d} clients rep {rep}: "
                                f"{s['n'] / s['wall']:.0f} todos/s"
                            )
                    log_ = server.log_summary()
                    drains[-1]["server_log"] = log_
    finally:
        for pool in pools.values():
            pool.close()
    return drains


def hot_cells(drains: list[dict]) -> list[dict]:
    out = []
    keys = dict.fromkeys((d["protocol"], d["clients"]) for d in drains)
    for protocol, c in keys:
        row: dict = {"protocol": protocol, "clients": c}
        for kind in ("asgi", "wsgi"):
            mine = [
                d
                for d in drains
                if d["protocol"] == protocol and d["clients"] == c and d["server"] == kind
            ]
            if not mine:
                continue
            claim = [x for d in mine for x in d["claim"]]
            row[kind] = {
                "todos_per_s": round(statistics.median(d["n"] / d["wall"] for d in mine), 1),
                "todos_per_s_all": [round(d["n"] / d["wall"], 1) for d in mine],
                "claim_p95_ms": ms(percentile(claim, 95), 2),
                "server_cpu_ms_per_todo": round(
                    statistics.median(d["gunicorn_cpu"] * 1000 / d["n"] for d in mine), 3
                ),
                "pg_cpu_ms_per_todo": round(
                    statistics.median((d["postgres_cpu"] or 0.0) * 1000 / d["n"] for d in mine),
                    3,
                ),
                "client_cpu_ms_per_todo": round(
                    statistics.median(d["client_cpu"] * 1000 / d["n"] for d in mine), 3
                ),
            }
        if "asgi" in row and "wsgi" in row:
            row["ratio"] = round(row["asgi"]["todos_per_s"] / row["wsgi"]["todos_per_s"], 2)
            row["server_cpu_ratio"] = round(
                row["asgi"]["server_cpu_ms_per_todo"] / row["wsgi"]["server_cpu_ms_per_todo"], 2
            )
        out.append(row)
    return out


# --- the section ------------------------------------------------------------------------------


def run_section(ctx) -> None:
    args = ctx.args
    started, load0 = time.monotonic(), [round(x, 2) for x in os.getloadavg()]
    limit = raise_open_files()
    _bench_user()
    vended = [httpbench.vend(f"fleet-{i}") for i in range(ENDPOINTS)]
    tokens = [token for _, token in vended]
    cookie = _session_cookie("bench")
    git = db.git_state(("agents/asgi.py", "agents/waiting.py", "agents/doorbell.py"))
    context = mp.get_context("spawn")
    parent, child = context.Pipe()
    proc = context.Process(target=waiters_main, args=(child,), daemon=True, name="fleet-waiters")
    proc.start()
    child.close()
    message = parent.recv()
    assert message[0] == "hello", message
    waiter_limit = message[1]
    fleets = []
    try:
        for n in args.fleet_waiters:
            if n <= 0:  # --fleet-waiters 0: the hot path alone
                continue
            if 2 * n + 200 > min(limit, waiter_limit):
                log(f"fleet: {n} waiters skipped: the open-files limit is {waiter_limit}")
                continue
            try:
                fleets.append(idle_fleet(ctx, n, parent, tokens, cookie))
            except Exception as exc:  # noqa: BLE001 - recorded; the hot path still runs
                log(f"fleet: {n} waiters failed: {type(exc).__name__}: {exc}")
                fleets.append({"waiters": n, "failed": f"{type(exc).__name__}: {exc}"})
                break  # the waiter process is in an unknown state: no larger fleet
            r = fleets[-1]
            log(
                f"fleet: {n} waiters: list_todos p95 {r['with_fleet']['list_todos']['p95_ms']} "
                f"ms, queue page p95 {r['with_fleet']['queue_page']['p95_ms']} ms, wake p95 "
                f"{r['wake']['from_answer']['p95_ms']} ms, idle CPU {r['idle_cpu_pct']}%"
            )
    finally:
        parent.send(("exit",))
        proc.join(timeout=30)
        if proc.is_alive():
            proc.terminate()  # our own child, by its handle
    endpoint_id, token = vended[0]
    drains = hot_path(ctx, endpoint_id, token) if args.fleet_clients else []
    note = {
        "endpoints": ENDPOINTS,
        "wait_seconds": WAIT_SECONDS,
        "open_files": {"bench": limit, "waiters": waiter_limit},
        "fleets": fleets,
        "hot": hot_cells(drains),
        "hot_todos": args.fleet_todos,
        "hot_reps": args.fleet_reps,
        "hot_settings": {d["server"]: d["settings"] for d in drains},
        "hot_server_logs": [d["server_log"] for d in drains if "server_log" in d],
        "target": TARGET,
        "git": git,
        "cpus": os.cpu_count(),
        "duration_s": round(time.monotonic() - started, 1),
        "loadavg": [load0, [round(x, 2) for x in os.getloadavg()]],
    }
    ctx.ledger.notes["fleet"] = note
    # Kept apart too: `python -c 'import json, bench.fleet as f; print(f.render(json.load(open(P))))'`
    (RESULTS / f"fleet-{ctx.stamp}.json").write_text(json.dumps(note, indent=1, default=str))
    (RESULTS / f"fleet-{ctx.stamp}.txt").write_text(render(note) + "\n")


# --- text -------------------------------------------------------------------------------------


def _pp(s: dict) -> str:
    return f"{f2(s['p50_ms'])}/{f2(s['p95_ms'])}"


def _errors(e: dict) -> str:
    parts = [
        f"{k} {v}" for group in ("waiters", "probe", "server_statuses") for k, v in e[group].items()
    ]
    if e["unwoken"]:
        parts.append(f"unwoken {e['unwoken']}")
    if e["server_other_lines"]:
        parts.append(f"server log lines {e['server_other_lines']}")
    return ", ".join(parts) or "0"


def render(note: dict) -> str:
    out = [
        f"Fleet: idle long-polls (claim_next, wait_seconds {note['wait_seconds']}) over "
        f"{note['endpoints']} endpoints on one switchboard serve (asgi); caps per N: "
        "waiters per endpoint 1.25 x N/10, per process 1.25 x N; open files: bench "
        f"{note['open_files']['bench']}, waiter process {note['open_files']['waiters']}.",
        db.code_line(note["git"]),
        "",
    ]
    rows = []
    for r in note["fleets"]:
        if "failed" in r:
            rows.append([r["waiters"], "-", "-", "-", "-", "-", "-", "-", r["failed"][:60], "-"])
            continue
        ss = r["server_settings"]
        rows.append(
            [
                f"{r['waiters']} ({r['parked_s']:.0f}/{r['settled_s']:.0f} s)",
                f"{ss['workers']}x{ss['threads']}",
                _pp(r["alone"]["list_todos"]) + "; " + _pp(r["with_fleet"]["list_todos"]),
                _pp(r["alone"]["queue_page"]) + "; " + _pp(r["with_fleet"]["queue_page"]),
                f"{_pp(r['wake']['from_answer'])}/{f2(r['wake']['from_answer']['max_ms'])}",
                f"{_pp(r['wake']['from_sent'])}/{f2(r['wake']['from_sent']['max_ms'])}",
                f"{r['rss_mib'][0]:.0f}->{r['rss_mib'][1]:.0f} ({r['rss_kib_per_waiter']:.1f})",
                f"{r['idle_cpu_pct']:.1f}",
                _errors(r["errors"]),
                f"{r['loadavg'][0][0]}-{r['loadavg'][1][0]}",
            ]
        )
    headers = (
        "waiters (sent/settled s)|workers x threads|list_todos p50/p95 ms: none; fleet|queue page p50/p95 ms: "
        "none; fleet|wake p50/p95/max ms|wake from sent p50/p95/max|server RSS MiB (KiB/waiter)|"
        "idle CPU %|errors|load 1m"
    )
    out += table(headers.split("|"), rows)
    out += [
        "",
        "wake = from create_todo's answer (committed) to the waiter reading its claim; from sent "
        "= from the moment create_todo was sent. idle CPU = the server's processes (master + "
        "workers) over 5 s once the fleet settled (its CPU under 20% of a core, or 30 s after "
        "the last waiter was sent) with nothing else asked, % of one core; waiters come up at "
        f"{RAMP_PER_S:.0f}/s and re-poll every {WAIT_SECONDS} s, so a large fleet's re-polls "
        "are part of it.",
    ]
    t = note["target"]
    ok = [
        r
        for r in note["fleets"]
        if "failed" not in r
        and max(r["with_fleet"]["list_todos"]["p95_ms"], r["with_fleet"]["queue_page"]["p95_ms"])
        < t["p95_ms"]
        and (r["wake"]["from_answer"]["p95_ms"] or 1e9) < t["wake_p95_ms"]
        and _errors(r["errors"]) == "0"
    ]
    best = max((r["waiters"] for r in ok), default=0)
    out.append(
        f"Target: >= {t['waiters']} idle waiters with other requests' p95 < {t['p95_ms']:.0f} ms, "
        f"wake-up p95 < {t['wake_p95_ms']:.0f} ms, zero errors: largest fleet meeting all of it "
        f"{best} => {'MET' if best >= t['waiters'] else 'NOT MET'}"
    )
    out += ["", f"Hot path: claim_next + complete, {note['hot_todos']} todos per drain, "
            f"{note['hot_reps']} rep(s), asgi vs wsgi order swapped every other rep; "
            + "; ".join(
                f"{k}: {v['worker_class']} {v['workers']} workers x {v['threads']} threads"
                for k, v in note["hot_settings"].items()
            ), ""]  # fmt: skip
    rows = []
    for c in note["hot"]:
        a, w = c.get("asgi"), c.get("wsgi")
        rows.append(
            [
                c["protocol"],
                c["clients"],
                "/".join(f(x) for x in a["todos_per_s_all"]) if a else "-",
                "/".join(f(x) for x in w["todos_per_s_all"]) if w else "-",
                f2(c.get("ratio")),
                f"{f2(a['claim_p95_ms'])}; {f2(w['claim_p95_ms'])}" if a and w else "-",
                f"{f2(a['server_cpu_ms_per_todo'])}; {f2(w['server_cpu_ms_per_todo'])}"
                if a and w
                else "-",
                f2(c.get("server_cpu_ratio")),
                f"{f2(a['pg_cpu_ms_per_todo'])}; {f2(w['pg_cpu_ms_per_todo'])}" if a and w else "-",
            ]
        )
    headers = (
        "protocol|clients|asgi todos/s|wsgi todos/s|ratio asgi/wsgi|claim_next p95 ms asgi; wsgi|"
        "server CPU ms/todo asgi; wsgi|server CPU ratio|pg CPU ms/todo asgi; wsgi"
    )
    out += table(headers.split("|"), rows)
    ratios = [c["ratio"] for c in note["hot"] if c.get("ratio") is not None]
    out.append(
        f"Target: ratio >= {t['ratio']:.1f} at every cell: lowest {min(ratios, default=0):.2f} "
        f"=> {'MET' if ratios and min(ratios) >= t['ratio'] else 'NOT MET'}"
    )
    out.append(
        f"fleet section took {note['duration_s']:.0f} s; load average before/after "
        f"{note['loadavg'][0]} / {note['loadavg'][1]}"
    )
    return "\n".join(out)
