"""Three nodes behind one address (section ``cluster``): ``switchboard serve`` x 3 behind HAProxy
with the shipped deploy/haproxy.cfg, their pools through PgBouncer in transaction mode
(deploy/pgbouncer.ini filled in; the doorbell's LISTEN direct), on a PostgreSQL primary with a
synchronous standby; all on loopback in a temporary folder, each process leading a process
group of its own, all ended whatever happens.

1. wake-up: N waiters (bench/fleet.py's, each from its own loopback
   address, which the nodes log by X-Forwarded-For) long-poll claim_next through HAProxy;
   todos created one at a time on node a, b, c in turn: how soon a waiter has each, on which node.
2. kill -9 of node b's process group while they wait; todos created right after; b restarts.
3. SIGTERM to node c (a drain: its waiters get todo:null at once and poll again elsewhere).

A primary's failover is tests/crash/test_patroni.py's (docs/deploy.md's recipe), which holds
every acknowledged write under it.
"""

from __future__ import annotations

import math
import os
import signal
import time
import traceback
from collections import Counter

from bench import db, fleet
from bench.cluster_nodes import NODES, Cluster, held, tools
from bench.httpbench import request
from bench.ledger import latency
from bench.table import f2, log, pp, table, verdict

WAIT_SECONDS = fleet.WAIT_SECONDS
WAKE_P95_MS = fleet.TARGET["wake_p95_ms"]  # the fleet's bar, now across nodes
GAP_S = 0.5  # between todos created one at a time
RISE_S = 3.0  # HAProxy takes a node back after 2 good checks 1 s apart (deploy/haproxy.cfg)

OPTIONS = [  # flag, type, default, --quick's, help
    ("--cluster-waiters", int, 3000, 600, "long-polls through HAProxy"),
    ("--cluster-wakes", int, 30, 12, "todos created one at a time, in each of three steps"),
]


# --- the steps -------------------------------------------------------------------------------


def create(c: Cluster, nodes: str, count: int, tokens: list[str]) -> list[dict]:
    """``count`` todos, one every GAP_S, each created directly on the next of ``nodes``; with
    each, for whom each node answered claim_next meanwhile."""
    made = []
    for i in range(count):
        node, marks, asked = nodes[i % len(nodes)], c.marks(), time.monotonic()
        body = {"title": f"wake {i}"}
        status, out = request(c.ports[node], "/api/v1/create_todo", body, tokens[i % len(tokens)])
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
    waiters = fleet.Waiters(math.ceil(n / fleet.PER_PROCESS))
    try:
        try:
            waiters.park(c.ports["proxy"], tokens, n, timeout=n / fleet.RAMP_PER_S + 60)
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
        state, t4 = waiters.stop(), time.monotonic()
    finally:
        waiters.close()
    return {
        "spread": spread,
        "wake": outcome(first, state, t1, t2),
        "kill": {**kill, **outcome(after_kill, state, t2, t3)},
        "drain": {**drain, **outcome(after_drain, state, t3, t4)},
    }


def run_section(ctx) -> dict | None:
    args = ctx.args
    if isinstance(found := tools(), str):
        log(f"cluster: {found}; section skipped")
        return None
    if 2 * args.cluster_waiters + 200 > fleet.raise_open_files():  # HAProxy's, inherited
        log(f"cluster: {args.cluster_waiters} waiters do not fit the open-files limit; skipped")
        return None
    c = Cluster(found, ctx.stamp)
    note: dict = {"waiters": args.cluster_waiters, "cpus": os.cpu_count()}
    try:
        tokens = c.database()
        c.pooled = {"DATABASE_URL": c.pgbouncer(), "SWITCHBOARD_PREPARED_STATEMENTS": "0"}
        c.pooled |= {"SWITCHBOARD_LISTEN_DATABASE_URL": c.url("primary")}
        c.pooled |= {"SWITCHBOARD_PAGE_TIMEOUT_SECONDS": "0"}
        c.nodes(NODES, **c.pooled)
        c.haproxy()
        log(f"cluster: databases, PgBouncer, nodes and HAProxy up; {args.cluster_waiters} waiters")
        note |= waiting(c, tokens, args.cluster_waiters, args.cluster_wakes)
        log(f"cluster: wake-up p95 {note['wake']['wake']['p95_ms']} ms; kill -9, drain")
    except Exception as exc:  # noqa: BLE001 - recorded; the processes end all the same
        note["failed"] = f"{type(exc).__name__}: {exc}"
        log(f"cluster: failed: {traceback.format_exc()}")
    finally:
        c.close()
    return note


def met(note: dict) -> bool:
    """Every todo claimed in every step, wake-up p95 under the fleet's bar, and not one waiter
    seeing the drain as an error."""
    steps = [note.get(k) for k in ("wake", "kill", "drain")]
    return (
        all(s and s["claimed"] == s["created"] > 0 for s in steps)
        and (note["wake"]["wake"]["p95_ms"] or float("inf")) < WAKE_P95_MS
        and not note["drain"]["errors"]
    )


def row(step: str, s: dict, polls: str) -> list:
    wake, made = f"{pp(s['wake'])}/{f2(s['wake']['max_ms'])}", f"{s['claimed']}/{s['created']}"
    seen = [f2(s["create"]["p50_ms"]), f"{s['cross_node']}/{s['seen_node']}", s["connected"]]
    errors = ", ".join(f"{kind} {n:,}" for kind, n in sorted(s["errors"].items())) or "0"
    return [step, polls, made, wake, *seen, s["early"], s["retried"], errors]


def render(note: dict) -> str:
    out = [
        f"Three nodes behind one address: switchboard serve x 3 (1 worker each) behind HAProxy "
        f"(deploy/haproxy.cfg), pools through PgBouncer (deploy/pgbouncer.ini, transaction "
        f"mode; LISTEN direct), PostgreSQL with a synchronous standby; {note['waiters']:,} waiters (claim_next, wait_seconds "
        f"{WAIT_SECONDS}) over {fleet.ENDPOINTS} endpoints through HAProxy; all on loopback, "
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
            f"p95 < {WAKE_P95_MS:.0f} ms, no error from the drain => {verdict(met(note))}"
        )
    if "failed" in note:
        out.append(f"FAILED: {note['failed']}")
    out.append(f"section took {note['duration_s']:.0f} s; logs in bench/results/cluster-<stamp>/")
    return "\n".join(out)
