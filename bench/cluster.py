"""Three nodes behind one address (section ``cluster``): ``switchboard serve`` x 3 behind HAProxy
with the shipped deploy/haproxy.cfg, their pools through PgBouncer in transaction mode
(deploy/pgbouncer.ini filled in; the doorbell's LISTEN direct), on a PostgreSQL primary with a
synchronous standby; all on loopback in a temporary folder, each process leading a process
group of its own, all ended whatever happens.

1. wake-up: N waiters (one asyncio process as in bench/fleet.py, each from its own loopback
   address, which the nodes log by X-Forwarded-For) long-poll claim_next through HAProxy;
   todos created one at a time on node a, b, c in turn: how soon a waiter has each, on which node.
2. kill -9 of node b's process group while they wait; todos created right after; b restarts.
3. SIGTERM to node c (a drain: its waiters get todo:null at once and poll again elsewhere).
4. failover: the nodes direct on a multi-host URL (PgBouncer follows no primary), a writer
   through HAProxy; the primary killed, the standby promoted DETECT_S later: time to the first
   200, and acknowledged writes the new primary lacks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import traceback
from collections import Counter

from bench import db, fleet
from bench.cluster_nodes import (
    ENDPOINTS,
    NODES,
    Cluster,
    healthy,
    held,
    request,
    tools,
    wait_until,
)
from bench.ledger import latency
from bench.table import f2, log, pp, table
from bench.workers import Child

WAIT_SECONDS = fleet.WAIT_SECONDS
WAKE_P95_MS = fleet.TARGET["wake_p95_ms"]  # the fleet's bar, now across nodes
DETECT_S = 1.0  # the primary's death to `pg_ctl promote`: a watchdog's detection, fixed
GAP_S = 0.5  # between todos created one at a time
RETRY_S = 1.0  # a waiter's pause after an error
RISE_S = 3.0  # HAProxy takes a node back after 2 good checks 1 s apart (deploy/haproxy.cfg)

OPTIONS = [  # flag, type, default, --quick's, help
    ("--cluster-waiters", int, 3000, 600, "long-polls through HAProxy"),
    ("--cluster-wakes", int, 30, 12, "todos created one at a time, in each of three steps"),
]


# --- the waiters: one process, asyncio, raw HTTP/1.1 -----------------------------------------


async def _poll(reader, writer, token: str, me: str, state: dict) -> str | None:
    """Long-polls on one connection: the error that ends it, or None when HAProxy closed it
    before answering a poll after the first (switchboard.client asks again on a new connection
    then, and so does this)."""
    polls = 0
    while True:
        asked, polls = time.monotonic(), polls + 1
        try:
            poll = {"wait_seconds": WAIT_SECONDS}
            status, body = await fleet._post(reader, writer, "/api/v1/claim_next", token, poll)
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
            status, _ = await fleet._post(reader, writer, "/api/v1/complete", token, ids)
            if status != 200:
                return f"complete {status}"
        elif time.monotonic() - asked < WAIT_SECONDS - 2:
            state["early"].append(time.monotonic())  # answered before its wait ran out: a drain


async def _agent(i: int, port: int, token: str, state: dict) -> None:
    """A waiter from its own address, 127.1.x.y, that connects again after an error (RETRY_S
    later) as an agent would."""
    me = f"127.1.{i // 250}.{i % 250 + 1}"
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(me, 0))
        except OSError as exc:
            error: str | None = f"connect {type(exc).__name__}"
        else:
            state["connected"].append(time.monotonic())
            try:
                error = await _poll(reader, writer, token, me, state)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                error = type(exc).__name__
            finally:
                writer.close()
        if error:
            state["errors"].append((time.monotonic(), error))
            await asyncio.sleep(RETRY_S)


async def _fleet(conn, port: int, tokens: list[str], n: int) -> dict:
    state: dict = {"connected": [], "wakes": [], "errors": [], "early": [], "retried": []}
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(_agent(i, port, tokens[i % len(tokens)], state)))
        if i % 100 == 99:
            await asyncio.sleep(100 / fleet.RAMP_PER_S)
    while len(state["connected"]) < n:
        await asyncio.sleep(0.05)
    conn.send(("parked",))
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # ("stop",)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return state


def waiters_main(conn, port: int, tokens: list[str], n: int) -> None:
    """The waiter process: ("parked",) once all n connected; ("stop",) -> ("done", state)."""
    fleet.raise_open_files()
    conn.send(("done", asyncio.run(_fleet(conn, port, tokens, n))))


# --- the steps -------------------------------------------------------------------------------


def create(c: Cluster, nodes: str, count: int, tokens: list[str]) -> list[dict]:
    """``count`` todos, one every GAP_S, each created directly on the next of ``nodes``; with
    each, for whom each node answered claim_next meanwhile."""
    made = []
    for i in range(count):
        node, marks, asked = nodes[i % len(nodes)], c.marks(), time.monotonic()
        body = {"title": f"wake {i}"}
        status, out = request(c.ports[node], "/api/v1/create_todo", body, tokens[i % ENDPOINTS])
        answered = time.monotonic()
        time.sleep(GAP_S)
        todo_id = (out.get("todo") or {}).get("id")
        made.append(dict(id=todo_id, node=node, asked=asked, answered=answered, status=status))
        made[-1]["pollers"] = c.pollers(marks)
    return made


def outcome(made: list[dict], state: dict, since: float, until: float) -> dict:
    """What the waiters got of ``made``, and what they met between ``since`` and ``until``."""
    woke = {todo_id: (t, me) for todo_id, t, me in state["wakes"]}
    got = [(m, *woke[m["id"]]) for m in made if m["id"] in woke]
    on = [next((n for n, who in m["pollers"].items() if me in who), None) for m, _, me in got]
    errors = Counter(kind for t, kind in state["errors"] if since <= t <= until)
    errors.update(f"create {m['status']}" for m in made if m["status"] != 200)
    counts = {
        k: sum(1 for t in state[k] if since <= t <= until)
        for k in ("connected", "retried", "early")
    }
    return {
        "created": len(made),
        "claimed": len(got),
        "wake": latency([t - m["asked"] for m, t, _ in got]),
        "create": latency([m["answered"] - m["asked"] for m in made]),
        "cross_node": sum(1 for (m, _, _), n in zip(got, on, strict=True) if n and n != m["node"]),
        "seen_node": sum(1 for n in on if n),
        "errors": dict(errors),
        **counts,
    }


def waiting(c: Cluster, tokens: list[str], n: int, wakes: int) -> dict:
    """Steps 1-3, with ``n`` waiters through HAProxy."""
    with Child(waiters_main, c.ports["proxy"], tokens, n) as waiters:
        try:
            waiters.recv(timeout=n / fleet.RAMP_PER_S + 60)
        except TimeoutError:
            raise RuntimeError("the waiters did not all connect") from None
        time.sleep(3)  # the nodes take the last polls in
        spread, t1 = {x: held(c.ports[x]) for x in NODES}, time.monotonic()
        first = create(c, NODES, wakes, tokens)
        t2, kill = time.monotonic(), {"held": held(c.ports["b"]), "restart_s": 0.0}
        c.stop("node-b")
        after_kill = create(c, "ac", wakes, tokens)
        kill["restart_s"] = round(c.nodes("b", **c.pooled), 2)
        time.sleep(RISE_S)
        t3, drain = time.monotonic(), {"held": held(c.ports["c"]), "drain_s": 0.0}
        drain["drain_s"] = round(c.stop("node-c", signal.SIGTERM), 2)
        after_drain = create(c, "ab", wakes, tokens)
        waiters.send(("stop",))
        state, t4 = waiters.recv()[1], time.monotonic()
    return {
        "spread": spread,
        "wake": outcome(first, state, t1, t2),
        "kill": {**kill, **outcome(after_kill, state, t2, t3)},
        "drain": {**drain, **outcome(after_drain, state, t3, t4)},
    }


def writer(port: int, token: str, stop: threading.Event, out: dict) -> None:
    """Create, claim, complete, one after another through HAProxy until ``stop``; every call
    (asked, answered, status), every acknowledged create and completion."""

    def ask(verb: str, body: dict) -> dict | None:
        asked = time.monotonic()
        status, answer = request(port, f"/api/v1/{verb}", body, token)
        out["calls"].append((asked, time.monotonic(), status))
        if status != 200:
            time.sleep(0.05)  # a client's pause before it tries again
        return answer if status == 200 else None

    while not stop.is_set():
        if made := ask("create_todo", {"title": "failover"}):
            out["created"].append(todo_id := made["todo"]["id"])
            if claimed := ask("claim", {"todo_id": todo_id}):
                if ask("complete", {"todo_id": todo_id, "attempt_seq": claimed["attempt_seq"]}):
                    out["completed"].append(todo_id)


def failover(c: Cluster, token: str) -> dict:
    """Step 4: the nodes direct on both servers' addresses; the primary killed, the standby
    promoted DETECT_S later."""
    for n in "ab":
        c.stop(f"node-{n}")
    hosts = f"127.0.0.1:{c.ports['primary']},127.0.0.1:{c.ports['standby']}"
    query = "target_session_attrs=read-write&connect_timeout=2"
    c.nodes(NODES, DATABASE_URL=f"postgresql://switchboard@{hosts}/switchboard?{query}")
    time.sleep(RISE_S)
    out: dict[str, list] = {"calls": [], "created": [], "completed": []}
    stop = threading.Event()
    thread = threading.Thread(target=writer, args=(c.ports["proxy"], token, stop, out), daemon=True)
    thread.start()

    def after(ok: bool) -> list[float]:  # when the calls asked after the kill were answered
        return [a for s, a, status in out["calls"] if s > killed and (status == 200) == ok]

    try:
        wait_until("the writer's first completion", lambda: out["completed"], 30)
        time.sleep(2)
        killed = time.monotonic()
        c.stop("primary")
        time.sleep(DETECT_S)
        promoted = time.monotonic()
        c.run("promote", f"{c.tools['postgres']}/pg_ctl", "promote", "-w", "-D", c.dir / "standby")
        promote_s = time.monotonic() - promoted
        healthy_s = promote_s + wait_until("node a healthy", lambda: healthy(c.ports["a"]))
        wait_until("a 200 through HAProxy", lambda: after(True))
        time.sleep(5)
    finally:
        stop.set()
        thread.join(timeout=15)
    done = "SELECT id, state FROM todos WHERE id = ANY(%s)"
    rows = dict(c.sql("standby", done, (out["created"],), "switchboard"))
    return {
        "detect_s": DETECT_S,
        "promote_s": round(promote_s, 2),
        "node_healthy_s": round(healthy_s, 2),
        "kill_to_200_s": round(min(after(True)) - killed, 2),
        "promote_to_200_s": round(min(after(True)) - promoted, 2),
        "last_error_s": round(max(after(False), default=killed) - killed, 2),
        "acked_creates": len(out["created"]),
        "acked_completions": len(out["completed"]),
        "missing_creates": sum(1 for i in out["created"] if i not in rows),
        "missing_completions": sum(1 for i in out["completed"] if rows.get(i) != "done"),
        "errors": dict(Counter(str(status) for _, _, status in out["calls"] if status != 200)),
    }


def run_section(ctx) -> None:
    args, started = ctx.args, time.monotonic()
    if isinstance(found := tools(), str):
        log(f"cluster: {found}; section skipped")
        return
    if 2 * args.cluster_waiters + 200 > fleet.raise_open_files():  # HAProxy's, inherited
        log(f"cluster: {args.cluster_waiters} waiters do not fit the open-files limit; skipped")
        return
    c = Cluster(found, ctx.stamp)
    note: dict = {"waiters": args.cluster_waiters, "versions": c.versions()}
    try:
        tokens = c.database()
        c.pooled = {
            "DATABASE_URL": c.pgbouncer(),
            "SWITCHBOARD_LISTEN_DATABASE_URL": c.url("primary"),
            "SWITCHBOARD_PREPARED_STATEMENTS": "0",
            "SWITCHBOARD_PAGE_TIMEOUT_SECONDS": "0",
        }
        c.nodes(NODES, **c.pooled)
        c.haproxy()
        log(f"cluster: databases, PgBouncer, nodes and HAProxy up; {args.cluster_waiters} waiters")
        note |= waiting(c, tokens, args.cluster_waiters, args.cluster_wakes)
        log(f"cluster: wake-up p95 {note['wake']['wake']['p95_ms']} ms; kill -9, drain; failover")
        note["failover"] = failover(c, tokens[0])
    except Exception as exc:  # noqa: BLE001 - recorded; the processes end all the same
        note["failed"] = f"{type(exc).__name__}: {exc}"
        log(f"cluster: failed: {traceback.format_exc()}")
    finally:
        c.close()
    note |= {"cpus": os.cpu_count(), "git": db.git_state()}
    ctx.ledger.notes["cluster"] = note | {"duration_s": round(time.monotonic() - started, 1)}
    (db.RESULTS / f"cluster-{ctx.stamp}.txt").write_text(render(ctx.ledger.notes["cluster"]) + "\n")


def met(note: dict) -> bool:
    """Every todo claimed in every step, wake-up p95 under the fleet's bar, and not one waiter
    seeing the drain as an error."""
    steps = [note.get(k) for k in ("wake", "kill", "drain")]
    return (
        all(s and s["claimed"] == s["created"] > 0 for s in steps)
        and (note["wake"]["wake"]["p95_ms"] or float("inf")) < WAKE_P95_MS
        and not note["drain"]["errors"]
    )


def lost(note: dict) -> int:
    """Acknowledged writes the new primary lacks (the failover's bar: none)."""
    return note["failover"]["missing_creates"] + note["failover"]["missing_completions"]


def said(errors: dict) -> str:
    return ", ".join(f"{kind} {n:,}" for kind, n in sorted(errors.items())) or "0"


def row(step: str, s: dict, polls: str) -> list:
    wake, made = f"{pp(s['wake'])}/{f2(s['wake']['max_ms'])}", f"{s['claimed']}/{s['created']}"
    seen = [f2(s["create"]["p50_ms"]), f"{s['cross_node']}/{s['seen_node']}", s["connected"]]
    return [step, polls, made, wake, *seen, s["early"], s["retried"], said(s["errors"])]


def render(note: dict) -> str:
    v, verdict = note["versions"], ("NOT MET", "MET")
    out = [
        f"Three nodes behind one address: switchboard serve x 3 (1 worker each) behind HAProxy "
        f"{v['haproxy']} (deploy/haproxy.cfg), pools through PgBouncer {v['pgbouncer']} "
        f"(deploy/pgbouncer.ini, transaction mode; LISTEN direct), PostgreSQL {v['postgres']} "
        f"with a synchronous standby; {note['waiters']:,} waiters (claim_next, wait_seconds "
        f"{WAIT_SECONDS}) over {ENDPOINTS} endpoints through HAProxy; all on loopback, "
        f"{note['cpus']} CPUs; {db.code_line(note['git'])}",
        "",
    ]
    if w := note.get("wake"):
        k, d, spread = note["kill"], note["drain"], "/".join(map(str, note["spread"].values()))
        rows = [
            row("wake-up: todos on a, b, c in turn", w, f"a/b/c {spread}"),
            row("kill -9 node b; todos on a, c", k, f"b {k['held']}"),
            row("SIGTERM node c; todos on a, b", d, f"c {d['held']}"),
        ]
        headers = "step|polls held|claimed|wake-up p50/p95/max ms|create p50 ms|by another node's waiter|reconnected|todo:null early|asked again|errors"
        out += table(headers.split("|"), rows)
        out.append(
            f"Node b answered again {k['restart_s']:.1f} s after its restart began; node c exited "
            f"{d['drain_s']:.2f} s after SIGTERM. Bar: every todo claimed in every step, wake-up "
            f"p95 < {WAKE_P95_MS:.0f} ms, no error from the drain => {verdict[met(note)]}"
        )
    if fo := note.get("failover"):
        out.append(
            f"Failover, the nodes direct on both servers (multi-host URL), a writer through HAProxy: "
            f"the primary killed, `pg_ctl promote` {fo['detect_s']:.1f} s later (took "
            f"{fo['promote_s']:.2f} s); node a healthy {fo['node_healthy_s']:.2f} s after promote; "
            f"first 200 {fo['kill_to_200_s']:.2f} s after the kill ({fo['promote_to_200_s']:.2f} s "
            f"after promote), last error at {fo['last_error_s']:.2f} s; errors "
            f"{said(fo['errors'])}; acked {fo['acked_creates']} creates and "
            f"{fo['acked_completions']} completions, missing on the new primary "
            f"{fo['missing_creates']} and {fo['missing_completions']} => {verdict[not lost(note)]}"
        )
    if "failed" in note:
        out.append(f"FAILED: {note['failed']}")
    out.append(f"section took {note['duration_s']:.0f} s; logs in bench/results/cluster-<stamp>/")
    return "\n".join(out)
