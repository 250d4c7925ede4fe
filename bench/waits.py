"""Todos that wait for todos, children and keys (section ``waits``; issue 44's "Speed and
scale"): the parts and their baselines are docs/benchmarks.md's "Waits: after, children and
keys"; why each ratio is of pairs side by side, its "Keys, a fourth time"."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from bench import db, httpbench, seed, workers
from bench.ledger import latency, median, per_todo, spread_of
from bench.table import all_of, f, f2, log, pp, spread, table, verdict
from bench.workers import DrainFailed, ParkedPoll

TARGET = {"wake_p95_ms": 50.0, "release_s": 1.0, "keys_ratio": 0.9}  # issue 44
PARK_S = 0.15  # the long-poll is parked this long before the completion
WAIT_SECONDS = 10
SAMPLE_S = 0.005  # the key sampler's pause between looks
KEYED = ["keyed", "plain", "keys", "keyed-then", "plain-then"]  # the keys' drains, in a round
RATIOS = {  # each ratio's drains: the variant's, its baseline's
    "children_ratio": ("children", "plain-children"),
    "keys_ratio": ("keyed", "plain"),
    "keys_then_ratio": ("keyed-then", "plain-then"),
    "keys_unlimited_ratio": ("keys", "plain"),
}
OPTIONS = [  # flag, type, default, --quick's, help
    ("--waits-wakes", int, 200, 30, "completions of a last prerequisite, each waking a poll"),
    ("--waits-fan", int, 10_000, 2000, "dependents of one todo, children of one parent"),
    ("--waits-todos", int, 10_000, 2000, "todos per keys drain"),
    ("--waits-keys", int, 100, 100, "keys the keyed drain's todos share"),
    ("--waits-workers", int, 4, 4, "worker processes for the drains"),
    ("--waits-reps", int, 3, 1, "drains per variant of the children's part, alternated"),
    # As many pairs as "Keys, a sixth time" (docs/benchmarks.md) found the median needs.
    ("--waits-key-reps", int, 9, 1, "drains per variant of the keys' part, alternated"),
]
STATE = "SELECT state FROM todos WHERE id = %s"
STATES = "SELECT state, count(*) FROM todos WHERE endpoint_id = %s GROUP BY 1"
EDGES = """
INSERT INTO todo_after (todo_id, after_id, ended)
SELECT t.id, %(after)s, '' FROM todos t WHERE t.endpoint_id = %(ep)s AND t.id > %(first)s
"""
# The sampler's look: the most claimed todos of any one key, by the todos' states and by their
# open attempts, each look one snapshot (a claim's claimed_at is taken before its snapshot, so
# the attempts' times would show overlaps that never were: docs/benchmarks.md, "Waits").
CLAIMED_PER_KEY = """
SELECT (SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM todos
          WHERE endpoint_id = %(ep)s AND state = 'claimed' AND key <> '' GROUP BY key) x),
       (SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM todo_attempts a
          JOIN todos t ON t.id = a.todo_id
          WHERE a.ended_at IS NULL AND t.endpoint_id = %(ep)s AND t.key <> '' GROUP BY t.key) y)
"""


def copy_todo(todo_id: int, n: int) -> None:
    """n copies of a todo's row (the product made the original; the copies are its twins)."""
    cols = db.one(
        "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)"
        " FROM information_schema.columns WHERE table_name = 'todos' AND column_name <> 'id'"
    )
    sql = (
        f"INSERT INTO todos ({cols}) SELECT {cols} FROM todos, generate_series(1, %s) WHERE id = %s"
    )
    db.one(sql, (n, todo_id))


def states(endpoint_id: int) -> dict[str, int]:
    return dict(db.rows(STATES, (endpoint_id,)))


def fresh() -> None:
    db.one("ANALYZE todos, todo_after")
    seed.checkpoint()


def empty(ep: int) -> None:
    db.one("DELETE FROM todos WHERE endpoint_id = %s", (ep,))


def wake(server, waiter_id: int, token: str, sender_id: int, n: int) -> dict:
    """The last prerequisite's commit -> the parked long-poll answered, alternated with a
    create's."""
    from switchboard.queues import transitions
    from switchboard.queues.models import Endpoint
    from switchboard.queues.transitions import Actor

    waiter = Endpoint.objects.get(pk=waiter_id)
    sender = Actor.agent(Endpoint.objects.get(pk=sender_id))

    def claimed(title: str) -> tuple[int, int]:
        todo_id = transitions.create_todo(sender, title=title)[0].id
        return todo_id, transitions.claim(sender, todo_id).attempt_seq

    def after(i: int):
        (first, first_seq), (last, seq) = claimed(f"first {i}"), claimed(f"last {i}")
        who = {"endpoint": waiter, "title": f"after {i}", "after": [first, last]}
        dependent = transitions.create_todo(sender, **who)[0].id
        transitions.complete(sender, first, attempt_seq=first_seq)

        def ring() -> int:
            transitions.complete(sender, last, attempt_seq=seq)
            return dependent

        return ring

    def create(i: int):
        return lambda: transitions.create_todo(sender, endpoint=waiter, title=f"new {i}")[0].id

    seen: dict[str, list[float]] = {"after": [], "create": []}
    commit_s, wrong = [], 0
    with ParkedPoll(server.base_url, token, WAIT_SECONDS) as poll:
        for i in range(2 * n):
            how = "after" if i % 2 else "create"
            took, woke, right = poll.woken((after if i % 2 else create)(i), PARK_S)
            commit_s += [took] if how == "after" else []
            seen[how] += [woke] if right else []
            wrong += not right
    every = {k: latency(v, 50, 95, 99) for k, v in seen.items()}
    return {"rounds": n, **every, "complete": latency(commit_s), "wrong": wrong}


def dependents(actor, n: int) -> tuple[int, int]:
    """A claimed prerequisite and n todos waiting after it: (its id, its attempt_seq)."""
    from switchboard.queues import transitions

    empty(actor.endpoint_id)
    pre, _ = transitions.create_todo(actor, title="fan-in prerequisite")
    first, _ = transitions.create_todo(actor, title="dependent", after=[pre.id])
    copy_todo(first.id, n - 1)
    db.one(EDGES, {"after": pre.id, "ep": actor.endpoint_id, "first": first.id})
    fresh()
    return pre.id, transitions.claim(actor, pre.id).attempt_seq


def fan_in(actor, n: int) -> dict:
    """The complete (its trigger releases a batch), then release_leftovers() as the sweeper
    calls it, each batch's statement timed; the baseline: completes nothing waits for."""
    from django.db import connection

    from switchboard.queues import transitions

    ep, plain = actor.endpoint_id, []
    empty(ep)
    for i in range(20):
        todo, _ = transitions.create_todo(actor, title=f"plain {i}")
        seq = transitions.claim(actor, todo.id).attempt_seq
        t = time.perf_counter()
        transitions.complete(actor, todo.id, attempt_seq=seq)
        plain.append(time.perf_counter() - t)
    pre, seq = dependents(actor, n)
    assert states(ep).get("waiting") == n, states(ep)
    batches: list[float] = []

    def timed(execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            if "UPDATE todo_after a" in sql:  # a batch's (queues.sql RELEASE_BATCH)
                batches.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    transitions.complete(actor, pre, attempt_seq=seq)
    complete_s, in_commit, calls = time.perf_counter() - t0, states(ep).get("pending", 0), 0
    with connection.execute_wrapper(timed):
        while states(ep).get("waiting") and time.perf_counter() - t0 < 60:
            transitions.release_leftovers()
            calls += 1
    total_s = time.perf_counter() - t0
    return {
        "dependents": n,
        "plain_complete": latency(plain),
        "complete_ms": round(complete_s * 1000, 1),
        "released_in_commit": in_commit,
        "batches": latency(batches),
        "sweeper_calls": calls,
        "all_pending_ms": round(total_s * 1000, 1),
        "left_waiting": states(ep).get("waiting", 0),
        "longest_ms": round(max([complete_s, *batches]) * 1000, 1),
    }


def with_sweeper(actor, n: int, log_path) -> dict:
    """The same release with a real ``switchboard sweep`` (its default interval) running:
    from the complete's call until none waits. One sample."""
    from django.conf import settings

    from switchboard.queues import transitions

    ep = actor.endpoint_id
    pre, seq = dependents(actor, n)
    with db.Spawned(log_path, "sweep"):
        time.sleep(4.0)  # up, and its first pass run
        t0 = time.perf_counter()
        transitions.complete(actor, pre, attempt_seq=seq)
        while states(ep).get("waiting") and time.perf_counter() - t0 < 60:
            time.sleep(0.01)
        total = time.perf_counter() - t0
    return {
        "dependents": n,
        "interval_s": settings.SWITCHBOARD_SWEEP_INTERVAL_SECONDS,
        "all_pending_ms": round(total * 1000, 1),
        "left_waiting": states(ep).get("waiting", 0),
    }


def children(actor, child_ep: int, n: int) -> int:
    """A parent waiting for n pending children on ``child_ep``'s queue; the parent's id."""
    from switchboard.queues import transitions
    from switchboard.queues.models import Endpoint

    to = Endpoint.objects.get(pk=child_ep)
    parent, _ = transitions.create_todo(actor, title="parent")
    seq = transitions.claim(actor, parent.id).attempt_seq
    first, _ = transitions.create_todo(actor, endpoint=to, title="child", parent=parent.id)
    copy_todo(first.id, n - 1)
    db.one(
        "UPDATE todos SET children_total = %s, children_open = %s WHERE id = %s", (n, n, parent.id)
    )
    transitions.release(actor, parent.id, attempt_seq=seq, wait_for_children=True)
    fresh()
    return parent.id


def pending(ep: int, n: int, keys: int) -> None:
    empty(ep)
    db.one("VACUUM (ANALYZE) todos")
    db.one(seed.PENDING, {"ep": ep, "n": n, "keys": keys})
    fresh()


@contextmanager
def sampled(ep: int):
    """A thread on a connection of its own: the most claimed todos of one key, by the todos'
    states and by their open attempts, every SAMPLE_S while a drain runs: ``[most, looks]``."""
    seen, stop = [[0, 0], 0], threading.Event()

    def run() -> None:
        with db.connect() as conn:
            while not stop.is_set():
                row = conn.execute(CLAIMED_PER_KEY, {"ep": ep}).fetchone()
                seen[:] = [[max(a, b) for a, b in zip(seen[0], row, strict=True)], seen[1] + 1]
                time.sleep(SAMPLE_S)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(10)


def drain(pool, w: int, ep: int, n: int, loop: str = "ours") -> dict:
    with sampled(ep) as seen:
        d = pool.drain(w, loop, ep)
    if d["n"] != n or states(ep).get("done") != n:
        raise DrainFailed(f"waits: drained {d['n']} of {n} on endpoint {ep}")
    cpu, (most, looks) = per_todo(d["client_cpu"] + (d["pg_cpu"] or 0), n), seen
    return {"todos_per_s": d["n"] / d["wall"], "cpu_ms_per_todo": cpu} | {
        "looks": looks,
        "most_claimed_per_key": most,
    }


def summarize(drains: list[dict]) -> dict:
    return {
        "todos_per_s": median(d["todos_per_s"] for d in drains),
        "todos_per_s_all": [round(d["todos_per_s"]) for d in drains],
        "cpu_ms_per_todo": median(d["cpu_ms_per_todo"] for d in drains),
        "looks": sum(d["looks"] for d in drains),
        "most_claimed_per_key": [max(d["most_claimed_per_key"][i] for d in drains) for i in (0, 1)],
    }


def ratios(mine: list[dict], ref: list[dict]) -> dict | None:
    return spread_of(
        [round(a["todos_per_s"] / b["todos_per_s"], 3) for a, b in zip(mine, ref, strict=True)]
    )


def drains(ctx, pool) -> dict:
    """The children's and the keys' drains, each variant beside its baseline in alternating
    order, after one small drain of each to warm up."""
    from switchboard.queues import endpoints
    from switchboard.queues.models import Endpoint
    from switchboard.queues.transitions import Actor

    a, w, n, reps = ctx.args, ctx.args.waits_workers, ctx.args.waits_todos, ctx.args.waits_reps
    fan = Actor.agent(Endpoint.objects.get(pk=seed.vend("bench-parents")[0]))
    child_ep, plain_ep = seed.vend("bench-children")[0], seed.vend("bench-plain")[0]
    keyed_ep = seed.vend("bench-keyed")[0]
    endpoints.set_limits(Endpoint.objects.get(pk=keyed_ep), max_claimed=None, max_claimed_per_key=1)
    eps = {"keyed": keyed_ep, "keys": seed.vend("bench-keys-unlimited")[0], "plain": plain_ep}
    got: dict[str, list[dict]] = {k: [] for k in ("children", "plain-children", *KEYED)}
    parents_pending = 0
    for rep in range(max(reps, a.waits_key_reps) + 1):  # the first warms up, not recorded
        size = a.waits_fan if rep else min(500, a.waits_fan)
        order = ["children", "plain-children"]
        for what in (order if rep % 2 == 0 else order[::-1]) if rep <= reps else ():
            parent = children(fan, child_ep, size) if what == "children" else None
            if parent is None:
                pending(child_ep, size, 0)
            d = drain(pool, w, child_ep, size)
            if parent is not None:
                parents_pending += db.one(STATE, (parent,)) == "pending"
            empty(child_ep)
            got[what] += [d] if rep else []
            log(f"waits: {what} {size:,}: {d['todos_per_s']:.0f} todos/s")
        size = n if rep else min(500, n)
        # Each ratio's two drains side by side in either order: keyed and keys next to plain.
        for what in (KEYED if rep % 2 == 0 else KEYED[::-1]) if rep <= a.waits_key_reps else ():
            kind, _, then = what.partition("-")
            pending(eps[kind], size, 0 if kind == "plain" else a.waits_keys)
            d = drain(pool, w, eps[kind], size, loop="ours-then" if then else "ours")
            got[what] += [d] if rep else []
            most = d["most_claimed_per_key"]
            log(f"waits: {what} {size:,}: {d['todos_per_s']:.0f} todos/s, most per key {most}")
    sizes = {"children": {"n": a.waits_fan}, "keyed": {"n": n, "keys": a.waits_keys}}
    sizes |= {"plain": {"n": n}, "keys": sizes["keyed"]}
    note = {"workers": w, "reps": reps, "key_reps": a.waits_key_reps}
    for what, drained in got.items():  # "plain-children" as "plain_children", and so on
        size = sizes[what.split("-")[0]] if what != "plain-children" else sizes["children"]
        note[what.replace("-", "_")] = summarize(drained) | size
    note |= {"parents_released": parents_pending}
    for ratio, (mine, ref) in RATIOS.items():
        note[ratio] = ratios(got[mine], got[ref])
    return note


def run_section(ctx) -> dict:
    from switchboard.queues.models import Endpoint
    from switchboard.queues.transitions import Actor

    args = ctx.args
    waiter_id, token = seed.vend("bench-waiter")
    sender_id, _ = seed.vend("bench-sender")
    with httpbench.Server(db.RESULTS / f"waits-server-{ctx.stamp}.log") as server:
        w = wake(server, waiter_id, token, sender_id, args.waits_wakes)
    log(f"waits: wake p95 {w['after']['p95_ms']} ms (create's {w['create']['p95_ms']})")
    fan = Actor.agent(Endpoint.objects.get(pk=seed.vend("bench-fan-in")[0]))
    release = fan_in(fan, args.waits_fan)
    log(f"waits: fan-in {args.waits_fan:,}: all pending in {release['all_pending_ms']} ms")
    swept = with_sweeper(fan, args.waits_fan, db.RESULTS / f"waits-sweeper-{ctx.stamp}.log")
    log(f"waits: with switchboard sweep: all pending in {swept['all_pending_ms']} ms")
    pool = ctx.pool
    if own := pool is None or len(pool.children) < args.waits_workers:
        pool = workers.Pool(workers.ledger_worker, args.waits_workers)
    try:
        d = drains(ctx, pool)
    finally:
        if own:
            pool.close()
    note = {"wake": w, "fan_in": release, "with_sweeper": swept, **d, "target": TARGET}
    return note | {"server": server.settings | server.log_summary()}


def met(note: dict) -> dict:
    t, r, s, k, w = (note[x] for x in ("target", "fan_in", "with_sweeper", "keyed", "wake"))
    wake = w["wrong"] == 0 and (w["after"]["p95_ms"] or 1e9) <= t["wake_p95_ms"]
    ratios_ = min(note[x]["median"] for x in ("keys_ratio", "keys_then_ratio")) >= t["keys_ratio"]
    one_a_key = k["most_claimed_per_key"] == note["keyed_then"]["most_claimed_per_key"] == [1, 1]
    return {
        "wake": wake,
        "release": not r["left_waiting"] and r["all_pending_ms"] <= t["release_s"] * 1000,
        "sweeper": not s["left_waiting"] and s["all_pending_ms"] <= t["release_s"] * 1000,
        "keys": ratios_ and one_a_key,
    }


def render(note: dict) -> str:
    w, r, s, t, ok = note["wake"], note["fan_in"], note["with_sweeper"], note["target"], met(note)
    times = ("p50", "p95", "p99", "max")
    wake_rows = [
        ["the last prerequisite completes", w["after"]["n"], pp(w["after"], *times)],
        ["create_todo (baseline)", w["create"]["n"], pp(w["create"], *times)],
    ]
    plain, batches, released = r["plain_complete"], r["batches"], r["released_in_commit"]
    fan_rows = [
        ["complete, nothing waits (baseline)", plain["n"], *pp(plain, "p50", "max").split("/")],
        [f"complete, {released:,} released in its commit", 1, *[f2(r["complete_ms"])] * 2],
        ["a leftover batch's statement", batches["n"], *pp(batches, "p50", "max").split("/")],
    ]

    def row(label: str, s: dict, ratio: dict | None, keyed: bool = False) -> list:
        most = "/".join(map(str, s["most_claimed_per_key"])) + f" ({s['looks']:,} looks)"
        rate, ratio_ = all_of(s["todos_per_s_all"]), spread(ratio, 3) if ratio else "1.000"
        return [label, rate, f2(s["cpu_ms_per_todo"]), ratio_, most if keyed else "-"]

    c, pc, k, u, p = (note[x] for x in ("children", "plain_children", "keyed", "keys", "plain"))
    keys = f"{k['n']:,} todos, {k['keys']} keys"
    rows = [
        row(f"{c['n']:,} children of one waiting parent", c, note["children_ratio"]),
        row(f"{pc['n']:,} todos without a parent", pc, None),
        row(f"{keys}, max_claimed_per_key 1", k, note["keys_ratio"], True),
        row(f"{u['n']:,} todos, {u['keys']} keys, no limit", u, note["keys_unlimited_ratio"]),
        row(f"{p['n']:,} todos without keys, no limit", p, None),
        row(f"{keys}, limit 1, with then", note["keyed_then"], note["keys_then_ratio"], True),
        row(f"{p['n']:,} todos without keys, complete with then", note["plain_then"], None),
    ]
    headers = "drain|todos/s|CPU ms/todo|x its baseline|most claimed per key (states/attempts)"
    return "\n".join(
        [
            f"Waits (issue 44): a parked claim_next (one switchboard serve, "
            f"{note['server']['workers']} workers) woken by its todo's last prerequisite's "
            f"complete, or by a create; commit to answer; {db.code_line(note['git'])}",
            "",
            *table(["woken by", "wakes", "p50/p95/p99/max ms"], wake_rows),
            f"Target p95 <= {t['wake_p95_ms']:.0f} ms: {verdict(ok['wake'])}; the completing "
            f"transition itself p50/p95 {pp(w['complete'])} ms; {w['wrong']} polls answered with "
            f"another todo; {note['server']['line']}",
            "",
            f"Fan-in: one todo with {r['dependents']:,} dependents; its complete (releasing a "
            f"batch), then release_leftovers() in a loop as the sweeper calls it",
            "",
            *table(["step", "n", "p50 ms", "max ms"], fan_rows),
            f"All {r['dependents']:,} pending {f(r['all_pending_ms'])} ms after the complete's "
            f"call ({r['sweeper_calls']} release_leftovers calls; {r['left_waiting']} left "
            f"waiting); longest step {f(r['longest_ms'])} ms. Target all within "
            f"{t['release_s']:.0f} s: {verdict(ok['release'])}",
            f"With a running switchboard sweep (interval {s['interval_s']} s, one sample): all "
            f"pending {f(s['all_pending_ms'])} ms after the complete's call ({s['left_waiting']} "
            f"left waiting) => {verdict(ok['sweeper'])}",
            "",
            f"Drains: claim_next + complete (or complete with then) through queues.transitions, "
            f"{note['workers']} workers; the children's rows the median of {note['reps']} "
            f"drain(s), the keys' of {note.get('key_reps', note['reps'])} pairs side by side; "
            f"CPU = workers + every PostgreSQL process",
            "",
            *table(headers.split("|"), rows),
            f"Parents pending after their children's drain: {note['parents_released']} of "
            f"{note['reps'] + 1}. Keys target >= {t['keys_ratio']} x and never two claimed with "
            f"one key: {verdict(ok['keys'])}; section took {note['duration_s']:.0f} s",
        ]
    )
