"""Idle fleets (section ``fleet``): N long-polls held by one ``switchboard serve``.

For each N a fresh server (its caps sized for the fleet as a deployment would: waiters per
endpoint 1.25 x N/10, per process 1.25 x N) and waiter processes (asyncio, one raw HTTP/1.1
connection per waiter, at most PER_PROCESS each) holding N ``claim_next`` long-polls over 10
endpoints; an answered
waiter completes what it got and polls again. While they wait, from this process: the
server's idle CPU and RSS per waiter, p50/p95 of ``list_todos`` and the Board's queue page
with no fleet and with it, wake-up latency of todos created one at a time, and every error.
The hot path at 1, 4 and 16 clients is the ``http`` section's.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import math
import resource
import time
from collections import Counter
from functools import partial

from bench import db, httpbench
from bench.ledger import latency
from bench.table import f2, ints, log, pp, table
from bench.workers import Child

ENDPOINTS = 10
WAIT_SECONDS = 30
TARGET = {"waiters": 10_000, "p95_ms": 100.0, "wake_p95_ms": 100.0}  # issue 31 (was 2,000)
RAMP_PER_S = 200.0  # waiters come up at this rate


OPTIONS = [  # flag, type, default, --quick's, help
    ("--fleet-waiters", ints, [2000, 5000, 10_000], [500, 2000], "idle long-polls per server"),
    ("--fleet-probes", int, 60, 30, "requests per probe"),
    ("--fleet-wakes", int, 40, 20, "todos created one at a time"),
]


def raise_open_files() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                total += sum(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
        except OSError:
            continue
    return round(total / 1024, 1)


# --- the waiters: one process, asyncio, raw HTTP/1.1 -----------------------------------------


async def _post(reader, writer, path: str, token: str, body: dict) -> tuple[int, dict]:
    """One request on a kept connection: the status, and a 200's JSON (another status's body
    may be a proxy's page, not JSON: bench/cluster.py's waiters go through HAProxy)."""
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


async def _waiter(port: int, token: str, state: dict, stop: asyncio.Event) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        state["errors"][f"connect {type(exc).__name__}"] += 1
        return
    state["sent"] += 1
    try:
        while not stop.is_set():
            poll = _post(
                reader, writer, "/api/v1/claim_next", token, {"wait_seconds": WAIT_SECONDS}
            )
            request, stopping = asyncio.ensure_future(poll), asyncio.ensure_future(stop.wait())
            await asyncio.wait({request, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not request.done():
                request.cancel()
                return
            stopping.cancel()
            status, body = request.result()
            if status != 200:
                state["errors"][str(status)] += 1
                await asyncio.sleep(2)  # as a client told to retry shortly would
            elif todo := body.get("todo"):  # else the wait ran out: poll again
                state["wakes"].append((todo["id"], time.monotonic()))
                ids = {"todo_id": todo["id"], "attempt_seq": body["attempt_seq"]}
                status, _ = await _post(reader, writer, "/api/v1/complete", token, ids)
                if status != 200:
                    state["errors"][f"complete {status}"] += 1
    except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
        if not stop.is_set():
            state["errors"][type(exc).__name__] += 1
    finally:
        writer.close()


async def _fleet(conn, port: int, tokens: list[str], n: int) -> dict:
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    state: dict = {"sent": 0, "wakes": [], "errors": Counter()}
    tasks = []
    for i in range(n):
        tasks.append(loop.create_task(_waiter(port, tokens[i % len(tokens)], state, stop)))
        if i % 100 == 99:
            await asyncio.sleep(100 / RAMP_PER_S)
    while state["sent"] + sum(state["errors"].values()) < n:
        await asyncio.sleep(0.05)
    conn.send(("parked",))
    await loop.run_in_executor(None, conn.recv)  # ("stop",)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return state


def waiters_main(conn) -> None:
    """The waiter process: (port, tokens, n) -> ("parked",); ("stop",) -> ("done", state);
    None ends it."""
    conn.send(("hello", raise_open_files()))
    while (message := conn.recv()) is not None:
        conn.send(("done", asyncio.run(_fleet(conn, *message))))


# One waiter process holds at most this many: each of its connections is a file, and a
# process may open 20,000 here (the hard limit), so 10,000 waiters take three processes.
PER_PROCESS = 4000


class WaiterGroup:
    """Several waiter processes spoken to as one (the pipe's ``send`` and ``recv``): a
    fleet is split among them, and their answers merged."""

    def __init__(self, n: int) -> None:
        self.children = [Child(waiters_main) for _ in range(n)]
        self.limit = min(child.recv()[1] for child in self.children)  # ("hello", its limit)
        self.asked = 0

    def capacity(self) -> int:
        return len(self.children) * min(PER_PROCESS, self.limit - 200)

    def send(self, message) -> None:
        if isinstance(message, tuple) and len(message) == 3:  # (port, tokens, n): split it
            port, tokens, n = message
            shares = [
                n // len(self.children) + (i < n % len(self.children))
                for i in range(len(self.children))
            ]
            self.asked = sum(1 for share in shares if share)
            for child, share in zip(self.children, shares, strict=True):
                if share:
                    child.send((port, tokens, share))
            return
        for child in self.children[: self.asked]:
            child.send(message)

    def recv(self) -> tuple:
        answers = [child.recv() for child in self.children[: self.asked]]
        if answers[0][0] != "done":
            return answers[0]  # ("parked",) from each
        merged: dict = {"sent": 0, "wakes": [], "errors": Counter()}
        for _, state in answers:
            merged["sent"] += state["sent"]
            merged["wakes"] += state["wakes"]
            merged["errors"].update(state["errors"])
        return ("done", merged)

    def close(self) -> None:
        for child in self.children:
            child.__exit__()


# --- the other client: list_todos, the queue page, todos one at a time ------------------------


def _timed(errors: dict, what: str, call) -> tuple[float, object]:
    """One request, timed; a status but 200 or a dropped connection counted as an error."""
    from switchboard.client import SwitchboardError

    t = time.monotonic()
    try:
        out = call()
    except (SwitchboardError, OSError, http.client.HTTPException) as exc:
        errors[f"{what} {getattr(exc, 'status', type(exc).__name__)}"] += 1
        out = None
    return time.monotonic() - t, out


def _page(link: http.client.HTTPConnection, cookie: str) -> bytes:
    from switchboard.client import SwitchboardError

    link.request("GET", "/queue/", headers={"Cookie": cookie})
    response = link.getresponse()
    data = response.read()
    if response.status != 200:
        raise SwitchboardError(response.status, "page", "the queue page did not answer 200")
    return data


def _probe(client, link, cookie: str, count: int, errors: dict) -> dict:
    """``count`` of each, timed, on fresh keep-alive connections (the server closes idle ones)
    opened before the timing."""
    link.close()
    link.connect()
    client.list_todos(limit=1)
    listed = [_timed(errors, "list_todos", client.list_todos)[0] for _ in range(count)]
    pages = [_timed(errors, "queue page", lambda: _page(link, cookie))[0] for _ in range(count)]
    return {"list_todos": latency(listed), "queue_page": latency(pages)}


def idle_fleet(ctx, n: int, waiters, tokens: list[str], cookie: str) -> dict:
    from switchboard.client import Client as Agent

    args = ctx.args
    caps = {
        "SWITCHBOARD_WAITERS_PER_ENDPOINT": str(math.ceil(1.25 * n / ENDPOINTS)),
        "SWITCHBOARD_WAITERS_PER_PROCESS": str(math.ceil(1.25 * n)),
    }
    errors: Counter = Counter()
    with httpbench.Server(db.RESULTS / f"fleet-{n}-{ctx.stamp}.log", **caps) as server:
        agents = [Agent(server.base_url, token, timeout=60) for token in tokens]
        link = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        _probe(agents[0], link, cookie, 10, {})  # warm-up: imports, pools, templates
        rss0, alone = (
            rss_mib(server.pids()),
            _probe(agents[0], link, cookie, args.fleet_probes, errors),
        )
        t0 = time.monotonic()
        waiters.send((server.port, tokens, n))
        waiters.recv()  # ("parked",)
        parked_s, pids = time.monotonic() - t0, server.pids()
        time.sleep(5)  # the server takes the last waiters in
        cpu0 = db.cpu_of(pids)
        time.sleep(5)
        idle_cpu = db.cpu_delta(cpu0, db.cpu_of(pids)) / 5
        rss1, loaded = (
            rss_mib(server.pids()),
            _probe(agents[0], link, cookie, args.fleet_probes, errors),
        )
        created = []
        for i in range(args.fleet_wakes):
            create = partial(agents[i % ENDPOINTS].create_todo, title=f"wake {i}")
            body = _timed(errors, "create_todo", create)[1]
            created.append(((body or {}).get("todo", {}).get("id"), time.monotonic()))
            time.sleep(0.25)
        time.sleep(1)
        waiters.send(("stop",))
        state = waiters.recv()[1]
    woke, statuses = dict(state["wakes"]), server.log_summary()
    errors.update({f"waiters {k}": v for k, v in state["errors"].items()})
    errors.update({f"server {k}": v for k, v in statuses["statuses"].items() if k != "200"})
    errors["unwoken"] += sum(1 for i, _ in created if i not in woke)
    errors["server log lines"] += statuses["other_lines"]
    return {
        "waiters": n,
        "sent": state["sent"],
        "parked_s": round(parked_s, 1),
        "rss_kib_per_waiter": round((rss1 - rss0) * 1024 / n, 1),
        "idle_cpu_pct": round(100 * idle_cpu, 1),
        "alone": alone,
        "with_fleet": loaded,
        "wake": latency([woke[i] - answered for i, answered in created if i in woke]),
        "errors": {k: v for k, v in errors.items() if v},
    }


def _session_cookie(username: str) -> str:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


def run_section(ctx) -> None:
    args, started, limit = ctx.args, time.monotonic(), raise_open_files()
    tokens = [httpbench.vend(f"fleet-{i}")[1] for i in range(ENDPOINTS)]
    cookie = _session_cookie("bench")
    waiters = WaiterGroup(math.ceil(max(args.fleet_waiters) / PER_PROCESS))
    fleets = []
    try:
        for n in args.fleet_waiters:
            if n > waiters.capacity() or n + 200 > limit:
                log(f"fleet: {n} waiters skipped: the open-files limit is {waiters.limit}")
                continue
            try:
                fleets.append(r := idle_fleet(ctx, n, waiters, tokens, cookie))
            except Exception as exc:  # noqa: BLE001 - recorded
                fleets.append({"waiters": n, "failed": f"{type(exc).__name__}: {exc}"})
                log(f"fleet: {n} waiters failed: {fleets[-1]['failed']}")
                break  # the waiter processes are in an unknown state: no larger fleet
            log(
                f"fleet: {n} waiters: list_todos p95 {r['with_fleet']['list_todos']['p95_ms']} ms,"
                f" queue page p95 {r['with_fleet']['queue_page']['p95_ms']} ms, wake p95 "
                f"{r['wake']['p95_ms']} ms, errors {r['errors'] or 0}"
            )
    finally:
        waiters.close()
    note = {
        "fleets": fleets,
        "open_files": waiters.limit,
        "waiter_processes": len(waiters.children),
        "target": TARGET,
    }
    note |= {"git": db.git_state(), "duration_s": round(time.monotonic() - started, 1)}
    ctx.ledger.notes["fleet"] = {**note, "best": best(note)}
    (db.RESULTS / f"fleet-{ctx.stamp}.txt").write_text(render(ctx.ledger.notes["fleet"]) + "\n")


def best(note: dict) -> int:
    """The largest fleet meeting the target: others' p95 and the wake-up p95 under their
    bars, and not one error."""
    t = note["target"]
    return max(
        (
            r["waiters"]
            for r in note["fleets"]
            if "failed" not in r
            and max(r["with_fleet"][k]["p95_ms"] for k in ("list_todos", "queue_page"))
            < t["p95_ms"]
            and (r["wake"]["p95_ms"] or math.inf) < t["wake_p95_ms"]
            and not r["errors"]
        ),
        default=0,
    )


def render(note: dict) -> str:
    out = [
        f"Idle fleets: claim_next long-polls (wait_seconds {WAIT_SECONDS}) over {ENDPOINTS} "
        f"endpoints on one switchboard serve (open files {note['open_files']}); "
        + db.code_line(note["git"]),
        "",
    ]
    rows = []
    for r in note["fleets"]:
        if "failed" in r:
            rows.append([r["waiters"], "-", "-", "-", "-", "-", r["failed"][:80]])
            continue
        rows.append(
            [
                f"{r['waiters']} ({r['parked_s']:.0f} s)",
                pp(r["alone"]["list_todos"]) + "; " + pp(r["with_fleet"]["list_todos"]),
                pp(r["alone"]["queue_page"]) + "; " + pp(r["with_fleet"]["queue_page"]),
                f"{pp(r['wake'])}/{f2(r['wake']['max_ms'])}",
                f"{r['rss_kib_per_waiter']:.1f}",
                f"{r['idle_cpu_pct']:.1f}",
                ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0",
            ]
        )
    headers = "waiters (ramp s)|list_todos p50/p95 ms: none; fleet|queue page p50/p95 ms: none; fleet|wake p50/p95/max ms|server KiB/waiter|idle CPU %|errors"
    out += table(headers.split("|"), rows)
    t = note["target"]
    out.append(
        f"Target: >= {t['waiters']} idle waiters with others' p95 < {t['p95_ms']:.0f} ms, wake-up "
        f"p95 < {t['wake_p95_ms']:.0f} ms, zero errors: largest fleet meeting it {note['best']} "
        f"=> {'MET' if note['best'] >= t['waiters'] else 'NOT MET'}; took {note['duration_s']:.0f} s"
    )
    return "\n".join(out)
