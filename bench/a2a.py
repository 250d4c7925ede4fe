"""A2A (section ``a2a``; issue 45): a task's completion on its client's stream, against the same
path's floor in bare SQL, and an open ``SubscribeToTask`` stream's cost beside an idle
``claim_next`` long-poll. How each is timed: docs/benchmarks.md, "A2A"."""

from __future__ import annotations

import asyncio
import json
import math
import queue
import resource
import socket
import threading
import time
from collections import Counter

from bench import db, httpbench, seed
from bench.ledger import latency, median, spread_of
from bench.table import f2, log, pp, spread, table, verdict
from bench.workers import ParkedPoll

# Issue 45's bars; the memory ratio's slack and the GetTask bar: docs/benchmarks.md, "A2A".
TARGET = {"send_p95_ms": 100.0, "memory_ratio": 1.10, "get_p95_ms": 25.0}
PARK_S = 0.1  # the worker's long-poll is parked this long before each send
WAIT_SECONDS = 10  # the worker's long-poll
POLL_SECONDS = 30  # the idle long-polls of the memory part
SETTLE_S = 3.0  # after the last stream or long-poll is open, before the RSS is read
IDLE_S = 5.0  # the CPU window
WARM = 20  # streams (long-polls) opened and closed before the baseline RSS
PROBES = 20  # GetTask requests per probe
BATCH = 100  # connections opened at once
OPTIONS = [  # flag, type, default, --quick's, help
    ("--a2a-rounds", int, 200, 40, "SendStreamingMessage rounds, each claimed and completed"),
    ("--a2a-streams", int, 1000, 200, "open SubscribeToTask streams; as many idle long-polls"),
    ("--a2a-reps", int, 3, 1, "times the streams and the long-polls are measured"),
]


def _post(path: str, token: str, method: str | dict, params: dict | None = None, v="1.1") -> bytes:
    """A raw POST: a JSON-RPC ``method`` with ``params``, or a plain JSON body."""
    rpc = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    body = json.dumps(rpc if params is not None else method).encode()
    return (
        f"POST {path} HTTP/{v}\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nAccept: text/event-stream\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def _state(event: dict) -> str | None:
    """The task state an event says: the task's, or a status update's (None: an artifact)."""
    result = event.get("result") or {}
    said = result.get("task") or result.get("statusUpdate") or {}
    return (said.get("status") or {}).get("state") or ("error" if "error" in event else None)


def send_streaming(port: int, token: str, i: int) -> dict:
    """One SendStreamingMessage to the worker: when its first byte went, the status, each
    event's state and when it was read, the task's id."""
    message = {"messageId": f"m-{i}", "role": "ROLE_USER", "parts": [{"text": f"a2a {i}"}]}
    params = {"message": message, "metadata": {"to": "a2a-worker"}}
    request = _post("/a2a", token, "SendStreamingMessage", params, "1.0")
    events, task, status = [], None, 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as link:
        sent = time.time()
        link.sendall(request)
        for at, line in httpbench.lines(link):
            if line.startswith(b"HTTP/"):
                status = int(line.split(b" ", 2)[1])
            elif line.startswith(b"data:"):
                event = json.loads(line[5:])
                task = task or ((event.get("result") or {}).get("task") or {}).get("id")
                events.append((at, _state(event)))
    return {"sent": sent, "status": status, "events": events, "task": task}


def rounds(server, sender_token: str, worker_token: str, n: int) -> dict:
    """SendStreamingMessage -> the worker's parked claim_next -> complete -> COMPLETED read."""
    got, first_states, failed = [], Counter(), Counter()
    with ParkedPoll(server.base_url, worker_token, WAIT_SECONDS) as worker:
        for i in range(n):
            worker.park()
            time.sleep(PARK_S)
            r = send_streaming(server.port, sender_token, i)
            claimed_at, todo_id = worker.answered()
            done = next((at for at, s in r["events"] if s == "TASK_STATE_COMPLETED"), None)
            first_states[r["events"][0][1] if r["events"] else "none"] += 1
            if r["status"] != 200 or done is None or todo_id is None:
                failed[f"status {r['status']}, {len(r['events'])} events, todo {todo_id}"] += 1
            elif not (r["task"] or "").startswith(f"{todo_id}-"):
                failed["the worker claimed another task"] += 1
            else:
                got.append((todo_id, r["sent"], claimed_at, done))
    ids = [g[0] for g in got]
    ended = dict(
        db.rows(
            "SELECT id, extract(epoch FROM ended_at)::float8 FROM todos WHERE id = ANY(%s)", (ids,)
        )
    )
    return {
        "rounds": n,
        "send_to_completed": latency([done - sent for _, sent, _, done in got], 50, 95, 99),
        "commit_to_completed": latency(
            [d - ended[t] for t, _, _, d in got if ended.get(t)], 50, 95, 99
        ),
        "send_to_claimed": latency([claimed - sent for _, sent, claimed, _ in got], 50, 95, 99),
        "first_event": dict(first_states),
        "failed": dict(failed),
    }


def bare(n: int) -> dict:
    """The floor: commit (insert + pg_notify) -> notification heard by a thread blocked on a
    LISTEN connection, ``n`` times one after another."""
    listen, talk = db.connect(), db.connect()
    talk.execute("CREATE TABLE bench_a2a_bare (id bigserial PRIMARY KEY, body text NOT NULL)")
    listen.execute("LISTEN bench_a2a")
    heard, stop = queue.Queue(), threading.Event()

    def hear() -> None:
        while not stop.is_set():
            for note in listen.notifies(timeout=0.5):
                heard.put((note.payload, time.time()))

    thread = threading.Thread(target=hear, daemon=True)
    thread.start()
    seen, missed = [], 0
    try:
        time.sleep(0.2)  # the listener is waiting
        for i in range(n):
            with talk.transaction():
                key = talk.execute(
                    "WITH r AS (INSERT INTO bench_a2a_bare (body) VALUES (%s) RETURNING id) "
                    "SELECT id::text, pg_notify('bench_a2a', id::text) FROM r",
                    (f"row {i}",),
                ).fetchone()[0]
            committed = time.time()
            try:
                while (got := heard.get(timeout=5))[0] != key:
                    pass  # a notification given up on before
                seen.append(got[1] - committed)
            except queue.Empty:
                missed += 1
            time.sleep(0.005)
    finally:
        stop.set()
        thread.join(timeout=5)
        talk.execute("DROP TABLE bench_a2a_bare")
        listen.close()
        talk.close()
    return {"n": n, "heard": latency(seen, 50, 95, 99), "missed": missed}


async def _hold(port: int, requests: list[bytes], opened_when: bytes | None, measure) -> dict:
    """A connection per request, BATCH at a time, each open once ``opened_when`` was read (None:
    written), held while ``measure()`` runs: what it did, each one's fate, what came after."""
    fates, later, links = Counter(), Counter(), []

    async def opened(request: bytes):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            return f"connect {type(exc).__name__}", None
        links.append(writer)
        writer.write(request)
        await writer.drain()
        if opened_when is None:
            return "open", reader
        data = b""
        try:
            while opened_when not in data and (
                chunk := await asyncio.wait_for(reader.read(65536), 30)
            ):
                data += chunk
        except (TimeoutError, OSError) as exc:
            return type(exc).__name__, None
        status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/") else "none"
        if status != "200" or opened_when not in data or b'"error"' in data:
            return f"status {status}" + (", an error event" if b'"error"' in data else ""), None
        return "open", reader

    async def one(request: bytes) -> None:
        fate, reader = await opened(request)
        fates[fate] += 1
        while reader is not None and (chunk := await reader.read(65536)):
            kind = "keepalive" if b"keepalive" in chunk else "data" if b"data:" in chunk else ""
            later["answer" if opened_when is None else kind] += 1

    tasks, started = [], time.monotonic()
    for i in range(0, len(requests), BATCH):
        tasks += [asyncio.create_task(one(r)) for r in requests[i : i + BATCH]]
        while sum(fates.values()) < len(tasks) and time.monotonic() - started < 120:
            await asyncio.sleep(0.01)
    opened_s = time.monotonic() - started
    measured = await measure()
    for writer in links:
        writer.close()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    said = {k: v for k, v in later.items() if k}
    return {"measured": measured, "fates": dict(fates), "later": said, "opened_s": opened_s}


def _probe(port: int, token: str, task: str) -> dict:
    """PROBES GetTask requests on fresh connections: their times; failed: not the task."""
    asked, times = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}}, []
    for _ in range(PROBES):
        t = time.monotonic()
        status, body = httpbench.request(port, "/a2a", asked, token)
        right = status == 200 and (body.get("result") or {}).get("id") == task
        times.append(time.monotonic() - t if right else None)
    return latency([t for t in times if t is not None]) | {"failed": times.count(None)}


def _warm(server, requests: list[bytes], opened_when) -> None:
    """Open and close a few (the path's imports, pools and caches before the baseline)."""

    async def settle() -> None:
        await asyncio.sleep(0.5)

    asyncio.run(_hold(server.port, requests, opened_when, settle))
    time.sleep(1.0)


def _crowd(server, requests: list[bytes], opened_when, probe=None) -> dict:
    """Hold the crowd; the server's RSS (MiB) before, once held, and after it closed; its CPU
    while held; ``probe()`` while held."""
    pids = server.pids()
    rss0 = db.rss_mib(pids)

    async def measure() -> dict:
        await asyncio.sleep(SETTLE_S)
        rss1, cpu0 = db.rss_mib(pids), db.cpu_of(pids)
        await asyncio.sleep(IDLE_S)
        cpu = db.cpu_delta(cpu0, db.cpu_of(pids)) / IDLE_S
        held = await asyncio.to_thread(probe) if probe else None
        return {"rss1": rss1, "cpu": cpu, "held": held}

    out = asyncio.run(_hold(server.port, requests, opened_when, measure))
    time.sleep(2.0)  # the server sees them go
    m, n = out.pop("measured"), len(requests)
    return out | {
        "n": n,
        "rss_mib": [rss0, m["rss1"], db.rss_mib(pids)],
        "kib_each": round((m["rss1"] - rss0) * 1024 / n, 2),
        "idle_cpu_pct": round(100 * m["cpu"], 2),
        "held_get": m["held"],
    }


def streams(ctx, caps: dict, n: int, sender, target, token: str, rep: int) -> dict:
    """n SubscribeToTask streams on n pending tasks, on a fresh server; GetTask around them."""
    from switchboard.agents.task_view import task_id
    from switchboard.queues import transitions
    from switchboard.queues.transitions import Actor

    actor, ids = Actor.agent(sender), []
    for i in range(n + WARM + 1):
        todo, _ = transitions.create_todo(actor, endpoint=target, title=f"followed {i}")
        ids.append(task_id(sender.team_id, todo.id))
    probe, warm, held = ids[0], ids[1 : WARM + 1], ids[WARM + 1 :]

    def subscribe(tasks: list[str]) -> list[bytes]:
        return [_post("/a2a", token, "SubscribeToTask", {"id": t}) for t in tasks]

    with httpbench.Server(db.RESULTS / f"a2a-streams-{rep}-{ctx.stamp}.log", **caps) as server:
        _warm(server, subscribe(warm), b"\n\n")  # the a2a path, the task watch
        before = _probe(server.port, token, probe)
        held_ = _crowd(server, subscribe(held), b"\n\n", lambda: _probe(server.port, token, probe))
        after = _probe(server.port, token, probe)
    return held_ | {"get_before": before, "get_after": after, "server": server.log_summary()}


def long_polls(ctx, caps: dict, n: int, token: str, rep: int) -> dict:
    """n idle claim_next long-polls on an empty queue, on a fresh server (warmed with 1-s
    polls)."""
    path, warm = "/api/v1/claim_next", _post("/api/v1/claim_next", token, {"wait_seconds": 1})
    with httpbench.Server(db.RESULTS / f"a2a-polls-{rep}-{ctx.stamp}.log", **caps) as server:
        _warm(server, [warm] * WARM, b"\r\n\r\n")  # answered in 1 s
        held = _crowd(server, [_post(path, token, {"wait_seconds": POLL_SECONDS})] * n, None)
    return held | {"server": server.log_summary()}


def run_section(ctx) -> dict:
    from switchboard.queues.models import Endpoint

    args = ctx.args
    soft, limit = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))  # a file a connection
    (sender_id, sender_token), (worker_id, worker_token), (_, idle_token) = (
        seed.vend(name) for name in ("a2a-sender", "a2a-worker", "a2a-idle")
    )
    sender, worker = Endpoint.objects.get(pk=sender_id), Endpoint.objects.get(pk=worker_id)
    with httpbench.Server(db.RESULTS / f"a2a-server-{ctx.stamp}.log") as server:
        lat = rounds(server, sender_token, worker_token, args.a2a_rounds)
        lat["server"] = server.settings | server.log_summary()
    log(f"a2a: send -> COMPLETED p95 {lat['send_to_completed']['p95_ms']} ms, {lat['failed']}")
    floor = bare(args.a2a_rounds)
    log(f"a2a: bare commit -> heard p95 {floor['heard']['p95_ms']} ms")
    n = min(args.a2a_streams, limit - 500)
    cap = str(2 * n + WARM)  # a stream holds a long-poll's place under both caps
    caps = {"SWITCHBOARD_WAITERS_PER_ENDPOINT": cap, "SWITCHBOARD_WAITERS_PER_PROCESS": cap}
    memory = []
    for rep in range(args.a2a_reps):  # a fresh server each; which goes first alternates
        kinds = {
            "streams": lambda r=rep: streams(ctx, caps, n, sender, worker, sender_token, r),
            "polls": lambda r=rep: long_polls(ctx, caps, n, idle_token, r),
        }
        order = list(kinds) if rep % 2 == 0 else list(reversed(kinds))
        memory.append({kind: kinds[kind]() for kind in order})
        said = {k: (v["kib_each"], v["fates"]) for k, v in memory[-1].items()}
        log(f"a2a: {n} of each, rep {rep + 1}: KiB each and fates {said}")
    return {"latency": lat, "bare": floor, "memory": memory, "caps": caps, "target": TARGET}


def kib(note: dict) -> dict:
    """Per kind, the median KiB each over the reps; and the spread of the reps' ratios of a
    stream's over a long-poll's."""
    reps = note["memory"]
    each = {kind: median([m[kind]["kib_each"] for m in reps]) for kind in ("streams", "polls")}
    p = [m["polls"]["kib_each"] for m in reps]
    ratios = [
        m["streams"]["kib_each"] / k if k > 0 else math.inf for m, k in zip(reps, p, strict=True)
    ]
    return each | {"ratio": spread_of(ratios)}


def met(note: dict) -> dict:
    lat, t, reps = note["latency"], note["target"], note["memory"]
    sent = lat["send_to_completed"]
    fast = (
        not lat["failed"]
        and sent["n"] == lat["rounds"]
        and (sent["p95_ms"] or 1e9) <= t["send_p95_ms"]
    )
    every = all(m[k]["fates"].get("open") == m[k]["n"] for m in reps for k in ("streams", "polls"))
    every = every and not any(m["polls"]["later"] for m in reps)  # no long-poll answered early
    gets = [m["streams"]["get_after"] for m in reps]
    fresh = all(not g["failed"] and (g["p95_ms"] or 1e9) <= t["get_p95_ms"] for g in gets)
    return {
        "send": fast,
        "memory": every and kib(note)["ratio"]["median"] <= t["memory_ratio"],
        "get": fresh,
    }


def render(note: dict) -> str:
    lat, b, t, m, k = note["latency"], note["bare"], note["target"], met(note), kib(note)

    def cells(lat: dict, spec: str = "{:.1f}") -> list:
        return [lat["n"], pp(lat, "p50", "p95", "p99", spec=spec), pp(lat, "max", spec=spec)]

    rows = [
        ["send -> COMPLETED read on the stream", *cells(lat["send_to_completed"])]
        + [f"p95 <= {t['send_p95_ms']:.0f}: {verdict(m['send'])}"],
        ["send -> the worker's parked claim_next answered", *cells(lat["send_to_claimed"]), "-"],
        [
            "complete's commit -> COMPLETED read on the stream",
            *cells(lat["commit_to_completed"]),
            "-",
        ],
        [
            "bare SQL: insert + pg_notify commit -> LISTENer heard",
            *cells(b["heard"], "{:.2f}"),
            "the floor",
        ],
    ]
    mem, gets = [], []
    for rep, each in enumerate(note["memory"], 1):
        for what, c in (
            ("SubscribeToTask streams", each["streams"]),
            ("claim_next long-polls", each["polls"]),
        ):
            rss, fates = " / ".join(f"{x:.1f}" for x in c["rss_mib"]), {**c["fates"], **c["later"]}
            else_ = ", ".join(f"{k} {v}" for k, v in fates.items() if k != "open") or "-"
            head = f"{what} ({c['n']}; open {c['fates'].get('open', 0)} in {c['opened_s']:.1f} s)"
            mem.append([head, rep, rss, f"{c['kib_each']:.1f}", f"{c['idle_cpu_pct']:.1f}", else_])
        s = each["streams"]
        said = [
            (x, s[f"get_{x}" if x != "held" else "held_get"]) for x in ("before", "held", "after")
        ]
        gets.append(
            f"rep {rep} "
            + ", ".join(
                f"{x} {pp(g)}" + (f" ({g['failed']} failed)" if g["failed"] else "")
                for x, g in said
            )
        )
    server = lat["server"]
    return "\n".join(
        [
            f"A2A on one switchboard serve ({server.get('workers')} workers, a pool of "
            f"{server.get('db_pool')}): SendStreamingMessage -> a parked claim_next (HTTP) claims "
            "-> complete (HTTP), no work between -> the client's stream reads COMPLETED; the "
            f"same path's floor in bare SQL; {db.code_line(note['git'])}",
            "",
            *table(["from -> to", "n", "p50/p95/p99 ms", "max ms", "target"], rows),
            f"First event of the stream: {lat['first_event']}; failed rounds: "
            f"{lat['failed'] or 0}; {server['line']}",
            "",
            f"Memory, a fresh server for each row, waiter caps {note['caps']}: server RSS before "
            f"/ held / after closing, and its CPU over {IDLE_S:.0f} s while held",
            "",
            *table(["held", "rep", "RSS MiB", "KiB each", "idle CPU %", "else"], mem),
            f"KiB each, median of reps: stream {f2(k['streams'])}, long-poll {f2(k['polls'])}; a "
            f"stream's over a long-poll's {spread(k['ratio'])} (<= {t['memory_ratio']:.2f}): "
            f"{verdict(m['memory'])}",
            f"GetTask on a fresh connection p50/p95 ms, {'; '.join(gets)} (after <= "
            f"{t['get_p95_ms']:.0f}: {verdict(m['get'])}); took {note['duration_s']:.0f} s",
        ]
    )
