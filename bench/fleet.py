"""Idle fleets (section ``fleet``): N long-polls held by one ``switchboard serve``; and the
waiter processes the cluster section's fleet uses too.

For each N a fresh server (its caps sized for the fleet as a deployment would: waiters per
endpoint 1.25 x N/10, per process 1.25 x N) and waiter processes (asyncio, one raw HTTP/1.1
connection per waiter, at most PER_PROCESS each) holding N ``claim_next`` long-polls over 10
endpoints; an answered waiter completes what it got and polls again. While they wait, from
this process: the server's idle CPU and RSS per waiter, p50/p95 of ``list_todos`` and the
Board's queue page with no fleet and with it, wake-up latency of todos created one at a
time, and every error.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import resource
import time
from collections import Counter

from bench import db, httpbench, seed
from bench.ledger import latency
from bench.table import f2, ints, log, pp, table, verdict
from bench.workers import Child

ENDPOINTS = 10
WAIT_SECONDS = 30
TARGET = {"waiters": 10_000, "p95_ms": 100.0, "wake_p95_ms": 100.0}  # issue 31
RAMP_PER_S = 200.0  # waiters come up at this rate
RETRY_S = 1.0  # a waiter's pause after an error, before it connects again
# One waiter process holds at most this many: each of its connections is a file, and a
# process may open no more than its hard limit of them.
PER_PROCESS = 4000
OPTIONS = [  # flag, type, default, --quick's, help
    ("--fleet-waiters", ints, [2000, 5000, 10_000], [500, 2000], "idle long-polls per server"),
    ("--fleet-probes", int, 60, 30, "requests per probe"),
    ("--fleet-wakes", int, 40, 20, "todos created one at a time"),
]


def raise_open_files() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


# --- the waiters: processes of asyncio, raw HTTP/1.1 -----------------------------------------


async def post(reader, writer, path: str, token: str, body: dict) -> tuple[int, dict]:
    """One request on a kept connection: the status, and a 200's JSON (another status's body
    may be a proxy's page, not JSON)."""
    data = json.dumps(body).encode()
    writer.write(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower().split("\r\n")
    length = next((int(x.split(":")[1]) for x in head if x.startswith("content-length:")), 0)
    payload, status = await reader.readexactly(length), int(head[0].split()[1])
    return status, json.loads(payload) if status == 200 else {}


async def _polls(reader, writer, token: str, me: str, state: dict) -> str | None:
    """Long-polls on one connection: the error that ends it, or None when the other end
    closed it before answering a poll after the first (HAProxy does; switchboard.client asks
    again on a new connection then, and so does this)."""
    polls = 0
    while True:
        asked, polls = time.monotonic(), polls + 1
        try:
            poll = {"wait_seconds": WAIT_SECONDS}
            status, body = await post(reader, writer, "/api/v1/claim_next", token, poll)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            if polls > 1 and not getattr(exc, "partial", b""):
                state["retried"].append(time.monotonic())
                return None
            raise
        if status != 200:
            return str(status)
        if todo := body.get("todo"):
            state["wakes"].append((todo["id"], time.monotonic(), me))
            ids = {"todo_id": todo["id"], "attempt_seq": body["attempt_seq"]}
            status, _ = await post(reader, writer, "/api/v1/complete", token, ids)
            if status != 200:
                return f"complete {status}"
        elif time.monotonic() - asked < WAIT_SECONDS - 2:
            state["early"].append(time.monotonic())  # answered before its wait ran out: a drain


async def _agent(i: int, port: int, token: str, state: dict) -> None:
    """Waiter ``i``, from its own address 127.1.x.y (a node behind a proxy logs it), which
    connects again RETRY_S after an error, as an agent would."""
    me = f"127.1.{i // 250}.{i % 250 + 1}"
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(me, 0))
        except OSError as exc:
            error: str | None = f"connect {type(exc).__name__}"
        else:
            state["connected"].append(time.monotonic())
            try:
                error = await _polls(reader, writer, token, me, state)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                error = type(exc).__name__
            finally:
                writer.close()
        if error:
            state["errors"].append((time.monotonic(), error))
            await asyncio.sleep(RETRY_S)


async def _fleet(conn, port: int, tokens: list[str], n: int, first: int) -> dict:
    state: dict = {"connected": [], "wakes": [], "errors": [], "early": [], "retried": []}
    tasks = []
    for i in range(first, first + n):
        tasks.append(asyncio.create_task(_agent(i, port, tokens[i % len(tokens)], state)))
        if i % 100 == 99:
            await asyncio.sleep(100 / RAMP_PER_S)
    while len(state["connected"]) + len(state["errors"]) < n:
        await asyncio.sleep(0.05)
    conn.send(("parked",))
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # ("stop",)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return state


def waiters_main(conn) -> None:
    """A waiter process: (port, tokens, n, first) -> ("parked",) once each of its n waiters
    connected or failed to; ("stop",) -> ("done", state); None ends it."""
    conn.send(("hello", raise_open_files()))
    while (message := conn.recv()) is not None:
        conn.send(("done", asyncio.run(_fleet(conn, *message))))


class Waiters:
    """Waiter processes spoken to as one: ``park`` splits a fleet among them, ``stop`` ends it
    and merges what they saw."""

    def __init__(self, n: int) -> None:
        self.children = [Child(waiters_main) for _ in range(n)]
        self.limit = min(child.recv()[1] for child in self.children)  # ("hello", its limit)
        self.capacity, self.asked = n * min(PER_PROCESS, self.limit - 200), []

    def park(self, port: int, tokens: list[str], n: int, timeout: float = 300.0) -> None:
        k = len(self.children)
        shares = [n // k + (i < n % k) for i in range(k)]
        self.asked = [child for child, share in zip(self.children, shares, strict=True) if share]
        for i, child in enumerate(self.asked):
            child.send((port, tokens, shares[i], sum(shares[:i])))
        for child in self.asked:
            child.recv(timeout)  # ("parked",)

    def stop(self) -> dict:
        for child in self.asked:
            child.send(("stop",))
        merged: dict = {}
        for child in self.asked:
            for key, values in child.recv()[1].items():
                merged.setdefault(key, []).extend(values)
        return merged

    def close(self) -> None:
        for child in self.children:
            child.close()


# --- the other client: list_todos, the queue page, todos one at a time ------------------------


def _timed(errors: Counter, what: str, call) -> tuple[float, object]:
    """One request, timed; a status but 200 or a dropped connection counted as an error."""
    from switchboard.client import SwitchboardError

    t = time.monotonic()
    try:
        out = call()
    except (SwitchboardError, OSError, http.client.HTTPException) as exc:
        errors[f"{what} {getattr(exc, 'status', type(exc).__name__)}"] += 1
        out = None
    return time.monotonic() - t, out


def _probe(client, link, cookie: str, count: int, errors: Counter) -> dict:
    """``count`` of each, timed, on fresh keep-alive connections (the server closes idle ones)
    opened before the timing."""
    from switchboard.client import SwitchboardError

    def page() -> None:
        link.request("GET", "/queue/", headers={"Cookie": cookie})
        (response := link.getresponse()).read()
        if response.status != 200:
            raise SwitchboardError(response.status, "page", "the queue page did not answer 200")

    link.close()
    link.connect()
    client.list_todos(limit=1)
    listed = [_timed(errors, "list_todos", client.list_todos)[0] for _ in range(count)]
    pages = [_timed(errors, "queue page", page)[0] for _ in range(count)]
    return {"list_todos": latency(listed), "queue_page": latency(pages)}


def idle_fleet(ctx, n: int, waiters: Waiters, tokens: list[str], cookie: str) -> dict:
    from switchboard.client import Client as Agent

    args, errors = ctx.args, Counter()
    caps = {"SWITCHBOARD_WAITERS_PER_PROCESS": str(math.ceil(1.25 * n))}
    caps["SWITCHBOARD_WAITERS_PER_ENDPOINT"] = str(math.ceil(1.25 * n / ENDPOINTS))
    with httpbench.Server(db.RESULTS / f"fleet-{n}-{ctx.stamp}.log", **caps) as server:
        agents = [Agent(server.base_url, token, timeout=60) for token in tokens]
        link = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        _probe(agents[0], link, cookie, 10, Counter())  # warm-up: imports, pools, templates
        rss0 = db.rss_mib(server.pids())
        alone = _probe(agents[0], link, cookie, args.fleet_probes, errors)
        t0 = time.monotonic()
        waiters.park(server.port, tokens, n)
        parked_s, pids = time.monotonic() - t0, server.pids()
        time.sleep(5)  # the server takes the last waiters in
        cpu0 = db.cpu_of(pids)
        time.sleep(5)
        idle_cpu, rss1 = db.cpu_delta(cpu0, db.cpu_of(pids)) / 5, db.rss_mib(server.pids())
        loaded = _probe(agents[0], link, cookie, args.fleet_probes, errors)
        created = []
        for i in range(args.fleet_wakes):
            agent = agents[i % ENDPOINTS]
            body = _timed(errors, "create_todo", lambda a=agent: a.create_todo(title="wake"))[1]
            created.append(((body or {}).get("todo", {}).get("id"), time.monotonic()))
            time.sleep(0.25)
        time.sleep(1)
        state = waiters.stop()
    woke, statuses = {i: t for i, t, _ in state["wakes"]}, server.log_summary()
    errors.update(f"waiters {kind}" for _, kind in state["errors"])
    errors["waiters reconnected"] += len(state["retried"])
    errors.update({f"server {k}": v for k, v in statuses["statuses"].items() if k != "200"})
    errors["unwoken"] += sum(1 for i, _ in created if i not in woke)
    errors["server log lines"] += statuses["other_lines"]
    return {
        "waiters": n,
        "parked_s": round(parked_s, 1),
        "rss_kib_per_waiter": round((rss1 - rss0) * 1024 / n, 1),
        "idle_cpu_pct": round(100 * idle_cpu, 1),
        "alone": alone,
        "with_fleet": loaded,
        "wake": latency([woke[i] - answered for i, answered in created if i in woke]),
        "errors": {k: v for k, v in errors.items() if v},
    }


def run_section(ctx) -> dict:
    args, limit = ctx.args, raise_open_files()
    tokens = [seed.vend(f"fleet-{i}")[1] for i in range(ENDPOINTS)]
    cookie = seed.session_cookie("bench")
    waiters, fleets = Waiters(math.ceil(max(args.fleet_waiters) / PER_PROCESS)), []
    try:
        for n in args.fleet_waiters:
            if n > waiters.capacity or n + 200 > limit:
                log(f"fleet: {n} waiters skipped: the open-files limit is {waiters.limit}")
                continue
            try:
                fleets.append(r := idle_fleet(ctx, n, waiters, tokens, cookie))
            except Exception as exc:  # noqa: BLE001 - recorded
                fleets.append({"waiters": n, "failed": f"{type(exc).__name__}: {exc}"})
                log(f"fleet: {n} waiters failed: {fleets[-1]['failed']}")
                break  # the waiter processes are in an unknown state: no larger fleet
            lat = {k: r["with_fleet"][k]["p95_ms"] for k in ("list_todos", "queue_page")}
            log(f"fleet: {n} waiters: p95 {lat}, wake p95 {r['wake']['p95_ms']} ms, {r['errors']}")
    finally:
        waiters.close()
    note = {"fleets": fleets, "open_files": waiters.limit, "target": TARGET}
    return note | {"waiter_processes": len(waiters.children), "best": best(note)}


def best(note: dict) -> int:
    """The largest fleet meeting the target: others' p95 and the wake-up p95 under their
    bars, and not one error."""
    t, good = note["target"], [0]
    for r in note["fleets"]:
        if "failed" in r or r["errors"] or (r["wake"]["p95_ms"] or math.inf) >= t["wake_p95_ms"]:
            continue
        if max(r["with_fleet"][k]["p95_ms"] for k in ("list_todos", "queue_page")) < t["p95_ms"]:
            good.append(r["waiters"])
    return max(good)


def render(note: dict) -> str:
    rows = []
    for r in note["fleets"]:
        if "failed" in r:
            rows.append([r["waiters"], "-", "-", "-", "-", "-", r["failed"][:80]])
            continue
        alone, loaded = r["alone"], r["with_fleet"]
        rows.append(
            [
                f"{r['waiters']} ({r['parked_s']:.0f} s)",
                pp(alone["list_todos"]) + "; " + pp(loaded["list_todos"]),
                pp(alone["queue_page"]) + "; " + pp(loaded["queue_page"]),
                f"{pp(r['wake'])}/{f2(r['wake']['max_ms'])}",
                f"{r['rss_kib_per_waiter']:.1f}",
                f"{r['idle_cpu_pct']:.1f}",
                ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0",
            ]
        )
    headers = "waiters (ramp s)|list_todos p50/p95 ms: none; fleet|queue page p50/p95 ms: none; fleet|wake p50/p95/max ms|server KiB/waiter|idle CPU %|errors"
    t = note["target"]
    return "\n".join(
        [
            f"Idle fleets: claim_next long-polls (wait_seconds {WAIT_SECONDS}) over {ENDPOINTS} "
            f"endpoints on one switchboard serve (open files {note['open_files']}); "
            + db.code_line(note["git"]),
            "",
            *table(headers.split("|"), rows),
            f"Target: >= {t['waiters']} idle waiters with others' p95 < {t['p95_ms']:.0f} ms, "
            f"wake-up p95 < {t['wake_p95_ms']:.0f} ms, zero errors: largest fleet meeting it "
            f"{note['best']} => {verdict(note['best'] >= t['waiters'])}; took "
            f"{note['duration_s']:.0f} s",
        ]
    )
