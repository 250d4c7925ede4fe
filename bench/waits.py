"""Todos that wait for todos, children and keys (section ``waits``; issue 44's "Speed and
scale"). Four parts, each against a baseline measured in the same run:

- ``wake``: a worker's ``claim_next`` long-poll parked over HTTP (``switchboard.client``, one
  ``switchboard serve``) while the only todo of its queue waits ``after`` two others, one done
  already; the bench completes the other in this process (``transitions.complete``); from
  that commit (the transition's return) to the long-poll's answer with the dependent. The
  baseline, alternated with it: the same poll woken by a ``create_todo`` of another endpoint.
- ``fan-in``: one todo with N dependents (the first made by ``create_todo(after=...)``, the
  rest copies of its row and its edge); the prerequisite's complete (its trigger releases the
  first 1000 in that transaction), then ``transitions.release_leftovers()`` called in a loop
  as the sweeper calls it, each batch's transaction timed (queues.db.run, wrapped in this
  process only). Then the same with a real ``switchboard sweep`` running, which calls it once
  a pass. The baseline: a complete of a todo nothing waits for.
- ``children``: a parent with N children (the first by ``create_todo(parent=...)``, the rest
  copies) released ``wait_for_children``; the children drained by W worker processes
  (bench/workers.py's ``ours``: claim_next + complete through queues.transitions), each end
  counting the parent down in its transaction; against the same drain of N todos without a
  parent, alternated.
- ``keys``: N pending todos over K keys (round-robin) on an endpoint with
  ``max_claimed_per_key`` 1, drained by W workers, against the same todos without keys on an
  endpoint without the limit, alternated. During each drain a thread samples the claimed todos
  per key (by the todos' states and by their open attempts), each look one snapshot (the
  attempts' times cannot say it: see CLAIMED_PER_KEY). Each keyed drain runs right before or
  right after its plain one (the ratio is per pair, the median of ``--waits-key-reps``
  pairs): this host's speed drifts by 10-30 % within a minute, the same client work costing
  that much more CPU a todo from one drain to the next (docs/benchmarks.md, "Keys, a fourth
  time").
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from contextlib import contextmanager

from bench import db, httpbench, seed, workers
from bench.ledger import latency, median, per_todo
from bench.table import f, f2, log, table, verdict
from bench.workers import DrainFailed, ParkedPoll

TARGET = {"wake_p95_ms": 50.0, "release_s": 1.0, "keys_ratio": 0.9}  # issue 44
PARK_S = 0.15  # the long-poll is parked this long before the completion
WAIT_SECONDS = 10
SAMPLE_S = 0.005  # the key sampler's pause between looks
# The served node and the sweeper run this tree's code: a venv's editable install may point at
# another checkout (a git worktree's run would serve the main tree's code otherwise).
THIS_TREE = {"PYTHONPATH": str(db.ROOT)}
OPTIONS = [  # flag, type, default, --quick's, help
    ("--waits-wakes", int, 200, 30, "completions of a last prerequisite, each waking a poll"),
    ("--waits-fan", int, 10_000, 2000, "dependents of one todo, children of one parent"),
    ("--waits-todos", int, 10_000, 2000, "todos per keys drain"),
    ("--waits-keys", int, 100, 100, "keys the keyed drain's todos share"),
    ("--waits-workers", int, 4, 4, "worker processes for the drains"),
    ("--waits-reps", int, 3, 1, "drains per variant of the children's part, alternated"),
    # Nine pairs: one pair's ratio moves 0.73-1.01 with the host (docs/benchmarks.md, "Keys,
    # a sixth time"), and five pairs' median moved 0.87-0.93 from run to run.
    ("--waits-key-reps", int, 9, 1, "drains per variant of the keys' part, alternated"),
]
PENDING = """
INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt, failures,
                   round, last_attempt_seq, attempts_pruned, owner, dead_letter_reason, key)
SELECT %(ep)s, 'bench todo ' || g, '', 0, 'pending', 5, 0, 0, 1, 0, 0, '', '',
       CASE WHEN %(keys)s > 0 THEN 'repo-' || (g %% %(keys)s) ELSE '' END
  FROM generate_series(1, %(n)s) g
"""
EDGES = """
INSERT INTO todo_after (todo_id, after_id, ended)
SELECT t.id, %(after)s, '' FROM todos t WHERE t.endpoint_id = %(ep)s AND t.id > %(first)s
"""
STATES = "SELECT state, count(*) FROM todos WHERE endpoint_id = %s GROUP BY state"
# The sampler's look: the most claimed todos of any one key, by the todos' states and by their
# open attempts (each claim opens one and each end closes it, in the statement that moves the
# todo).
CLAIMED_PER_KEY = """
SELECT (SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM todos
          WHERE endpoint_id = %(ep)s AND state = 'claimed' AND key <> '' GROUP BY key) x),
       (SELECT coalesce(max(c), 0) FROM (SELECT count(*) c FROM todo_attempts a
          JOIN todos t ON t.id = a.todo_id
          WHERE a.ended_at IS NULL AND t.endpoint_id = %(ep)s AND t.key <> '' GROUP BY t.key) y)
"""
# No look at the attempts' times for two of a key claimed at once: a claim's claimed_at is
# its statement's start, taken before its snapshot and its trigger (a backend may wait
# between them on a busy machine), so a claim that began before another of its key ended
# and was counted after it reads as an overlap that never was. The sampler's looks are each
# one snapshot.


def columns() -> str:
    """todos' columns but its id: a row copied with them is the same todo again."""
    names = db.with_cursor(
        "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position)"
        " FROM information_schema.columns WHERE table_name = 'todos' AND column_name <> 'id'"
    )[0]
    return names


def copy_todo(todo_id: int, n: int) -> None:
    """n copies of a todo's row (the product made the original; the copies are its twins)."""
    cols = columns()
    seed.scalar(
        f"INSERT INTO todos ({cols}) SELECT {cols} FROM todos, generate_series(1, %s)"
        " WHERE id = %s",
        (n, todo_id),
    )


def states(endpoint_id: int) -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(STATES, (endpoint_id,))
        return dict(cursor.fetchall())


def fresh() -> None:
    seed.scalar("ANALYZE todos")
    seed.scalar("ANALYZE todo_after")
    seed.checkpoint()


# --- wake: the last prerequisite's commit -> the parked long-poll answered --------------------


def wake(server, waiter_id: int, token: str, sender_id: int, n: int) -> dict:
    from switchboard.queues import transitions
    from switchboard.queues.models import Endpoint
    from switchboard.queues.transitions import Actor

    waiter = Endpoint.objects.get(pk=waiter_id)
    sender = Actor.agent(Endpoint.objects.get(pk=sender_id))

    def done(todo_id: int) -> None:
        seq = transitions.claim(sender, todo_id).attempt_seq
        transitions.complete(sender, todo_id, attempt_seq=seq)

    seen: dict[str, list[float]] = {"after": [], "create": []}
    commit_ms, wrong = [], 0
    with ParkedPoll(server.base_url, token, WAIT_SECONDS) as poll:
        for i in range(2 * n):
            how = "after" if i % 2 else "create"
            if how == "after":
                first, _ = transitions.create_todo(sender, title=f"first {i}")
                last, _ = transitions.create_todo(sender, title=f"last {i}")
                dependent, _ = transitions.create_todo(
                    sender, endpoint=waiter, title=f"after {i}", after=[first.id, last.id]
                )
                done(first.id)
                seq = transitions.claim(sender, last.id).attempt_seq
            poll.park()
            time.sleep(PARK_S)
            t0 = time.time()
            if how == "after":
                transitions.complete(sender, last.id, attempt_seq=seq)
                expected = dependent.id
            else:
                expected = transitions.create_todo(sender, endpoint=waiter, title=f"new {i}")[0].id
            committed = time.time()
            at, todo_id = poll.answered()
            if how == "after":
                commit_ms.append(committed - t0)
            if todo_id == expected:
                seen[how].append(at - committed)
            else:
                wrong += 1
    return {
        "rounds": n,
        "after": latency(seen["after"], 50, 95, 99),
        "create": latency(seen["create"], 50, 95, 99),
        "complete": latency(commit_ms),
        "wrong": wrong,
    }


# --- fan-in: one prerequisite, N dependents ---------------------------------------------------


@contextmanager
def timed_batches(into: list[float]):
    """Each transaction release_leftovers runs (its one db.run a batch), timed: the row
    locks of a batch are held no longer than that."""
    from switchboard.queues import db as ledger_db

    run = ledger_db.run

    def timed(plan):
        t = time.perf_counter()
        try:
            return run(plan)
        finally:
            into.append(time.perf_counter() - t)

    ledger_db.run = timed
    try:
        yield
    finally:
        ledger_db.run = run


def dependents(actor, n: int) -> tuple[int, int]:
    """A claimed prerequisite and n todos waiting after it: (its id, its attempt_seq)."""
    from switchboard.queues import transitions

    pre, _ = transitions.create_todo(actor, title="fan-in prerequisite")
    first, _ = transitions.create_todo(actor, title="dependent", after=[pre.id])
    copy_todo(first.id, n - 1)
    seed.scalar(EDGES, {"after": pre.id, "ep": actor.endpoint_id, "first": first.id})
    fresh()
    return pre.id, transitions.claim(actor, pre.id).attempt_seq


def plain_completes(actor, n: int = 20) -> list[float]:
    """The baseline: complete of a todo nothing waits for, n times."""
    from switchboard.queues import transitions

    out = []
    for i in range(n):
        todo, _ = transitions.create_todo(actor, title=f"plain {i}")
        seq = transitions.claim(actor, todo.id).attempt_seq
        t = time.perf_counter()
        transitions.complete(actor, todo.id, attempt_seq=seq)
        out.append(time.perf_counter() - t)
    return out


def fan_in(actor, n: int) -> dict:
    from switchboard.queues import transitions

    ep = actor.endpoint_id
    seed.scalar("DELETE FROM todos WHERE endpoint_id = %s", (ep,))
    plain = plain_completes(actor)
    pre, seq = dependents(actor, n)
    assert states(ep).get("waiting") == n, states(ep)
    batches: list[float] = []
    t0 = time.perf_counter()
    transitions.complete(actor, pre, attempt_seq=seq)
    complete_s = time.perf_counter() - t0
    in_commit = states(ep).get("pending", 0)
    calls = 0
    with timed_batches(batches):
        while states(ep).get("waiting") and time.perf_counter() - t0 < 60:
            transitions.release_leftovers()
            calls += 1
    total_s = time.perf_counter() - t0
    left = states(ep).get("waiting", 0)
    return {
        "dependents": n,
        "plain_complete": latency(plain),
        "complete_ms": round(complete_s * 1000, 1),
        "released_in_commit": in_commit,
        "batches": latency(batches),
        "sweeper_calls": calls,
        "all_pending_ms": round(total_s * 1000, 1),
        "left_waiting": left,
        "longest_ms": round(max([complete_s, *batches]) * 1000, 1),
    }


def with_sweeper(actor, n: int, log_path) -> dict:
    """The same release with a real ``switchboard sweep`` (its default interval) running:
    from the complete's call until none waits. One sample; where the completion falls in the
    sweeper's interval decides it."""
    from django.conf import settings

    from switchboard.queues import transitions

    ep = actor.endpoint_id
    seed.scalar("DELETE FROM todos WHERE endpoint_id = %s", (ep,))
    pre, seq = dependents(actor, n)
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            [httpbench.switchboard_command(), "sweep"],
            cwd=db.ROOT,
            env=dict(os.environ, **THIS_TREE),
            stdout=out,
            stderr=out,
        )
        try:
            time.sleep(4.0)  # up, and its first pass run
            t0 = time.perf_counter()
            transitions.complete(actor, pre, attempt_seq=seq)
            while states(ep).get("waiting") and time.perf_counter() - t0 < 60:
                time.sleep(0.01)
            total = time.perf_counter() - t0
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    return {
        "dependents": n,
        "interval_s": settings.SWITCHBOARD_SWEEP_INTERVAL_SECONDS,
        "all_pending_ms": round(total * 1000, 1),
        "left_waiting": states(ep).get("waiting", 0),
    }


# --- children, and keys: drains by worker processes ------------------------------------------


def children(actor, child_ep: int, n: int) -> int:
    """A parent waiting for n pending children on ``child_ep``'s queue; the parent's id."""
    from switchboard.queues import transitions
    from switchboard.queues.models import Endpoint

    to = Endpoint.objects.get(pk=child_ep)
    parent, _ = transitions.create_todo(actor, title="parent")
    seq = transitions.claim(actor, parent.id).attempt_seq
    first, _ = transitions.create_todo(actor, endpoint=to, title="child", parent=parent.id)
    copy_todo(first.id, n - 1)
    seed.scalar(
        "UPDATE todos SET children_total = %s, children_open = %s WHERE id = %s", (n, n, parent.id)
    )
    transitions.release(actor, parent.id, attempt_seq=seq, wait_for_children=True)
    fresh()
    return parent.id


def pending(ep: int, n: int, keys: int) -> None:
    seed.scalar("DELETE FROM todos WHERE endpoint_id = %s", (ep,))
    seed.scalar("VACUUM (ANALYZE) todos")
    seed.scalar(PENDING, {"ep": ep, "n": n, "keys": keys})
    fresh()


class Sampler:
    """A thread on a connection of its own: the most claimed todos of one key, by the todos'
    states and by their open attempts, every SAMPLE_S while a drain runs."""

    def __init__(self, ep: int):
        self.ep, self.looks, self.most = ep, 0, [0, 0]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with db.connect() as conn:
            while not self.stop.is_set():
                row = conn.execute(CLAIMED_PER_KEY, {"ep": self.ep}).fetchone()
                self.most = [max(a, b) for a, b in zip(self.most, row, strict=True)]
                self.looks += 1
                time.sleep(SAMPLE_S)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)


def drain(pool, w: int, ep: int, n: int, keyed: bool, loop: str = "ours") -> dict:
    with Sampler(ep) as sampler:
        d = pool.drain(w, loop, ep)
    if d["n"] != n or states(ep).get("done") != n:
        raise DrainFailed(f"waits: drained {d['n']} of {n} on endpoint {ep}")
    out = {
        "todos_per_s": d["n"] / d["wall"],
        "cpu_ms_per_todo": per_todo(d["client_cpu"] + (d["pg_cpu"] or 0), n),
        "looks": sampler.looks,
        "most_claimed_per_key": sampler.most,
    }
    return out


def summarize(drains: list[dict]) -> dict:
    return {
        "todos_per_s": median(d["todos_per_s"] for d in drains),
        "todos_per_s_all": [round(d["todos_per_s"]) for d in drains],
        "cpu_ms_per_todo": median(d["cpu_ms_per_todo"] for d in drains),
        "looks": sum(d["looks"] for d in drains),
        "most_claimed_per_key": [max(d["most_claimed_per_key"][i] for d in drains) for i in (0, 1)],
    }


def ratios(mine: list[dict], ref: list[dict]) -> dict:
    rs = [round(a["todos_per_s"] / b["todos_per_s"], 3) for a, b in zip(mine, ref, strict=True)]
    return {"median": median(rs), "min": min(rs), "max": max(rs)}


def drains(ctx, pool) -> dict:
    from switchboard.queues import endpoints
    from switchboard.queues.models import Endpoint
    from switchboard.queues.transitions import Actor

    a, w, n, reps = ctx.args, ctx.args.waits_workers, ctx.args.waits_todos, ctx.args.waits_reps
    fan = Actor.agent(Endpoint.objects.get(pk=seed.vend("bench-parents")[0]))
    child_ep, plain_ep = seed.vend("bench-children")[0], seed.vend("bench-plain")[0]
    keyed_ep = seed.vend("bench-keyed")[0]
    endpoints.set_limits(Endpoint.objects.get(pk=keyed_ep), max_claimed=None, max_claimed_per_key=1)
    keys_ep = seed.vend("bench-keys-unlimited")[0]
    got: dict[str, list[dict]] = {"children": [], "plain-children": [], "plain": []}
    got |= {"keyed": [], "keys": [], "keyed-then": [], "plain-then": []}
    parents_pending = 0
    for rep in range(max(reps, a.waits_key_reps) + 1):  # the first warms up, not recorded
        size = a.waits_fan if rep else min(500, a.waits_fan)
        order = ["children", "plain-children"]
        for what in (order if rep % 2 == 0 else order[::-1]) if rep <= reps else ():
            if what == "children":
                parent = children(fan, child_ep, size)
            else:
                pending(child_ep, size, 0)
            d = drain(pool, w, child_ep, size, keyed=False)
            if what == "children":
                parents_pending += state_of(parent) == "pending"
            seed.scalar("DELETE FROM todos WHERE endpoint_id = %s", (child_ep,))
            got[what] += [d] if rep else []
            log(f"waits: {what} {size:,}: {d['todos_per_s']:.0f} todos/s")
        size = n if rep else min(500, n)
        # Each ratio's two drains side by side in either order: keyed and keys next to plain.
        order = ["keyed", "plain", "keys", "keyed-then", "plain-then"]
        for what in (order if rep % 2 == 0 else order[::-1]) if rep <= a.waits_key_reps else ():
            kind, _, then = what.partition("-")
            ep = {"keyed": keyed_ep, "keys": keys_ep, "plain": plain_ep}[kind]
            pending(ep, size, 0 if kind == "plain" else a.waits_keys)
            loop = "ours-then" if then else "ours"
            d = drain(pool, w, ep, size, keyed=kind == "keyed", loop=loop)
            got[what] += [d] if rep else []
            log(
                f"waits: {what} {size:,}: {d['todos_per_s']:.0f} todos/s, most per key "
                f"{d['most_claimed_per_key']}"
            )
    return {
        "workers": w,
        "reps": reps,
        "key_reps": a.waits_key_reps,
        "children": summarize(got["children"]) | {"n": a.waits_fan},
        "plain_children": summarize(got["plain-children"]) | {"n": a.waits_fan},
        "children_ratio": ratios(got["children"], got["plain-children"]),
        "parents_released": parents_pending,
        "keyed": summarize(got["keyed"]) | {"n": n, "keys": a.waits_keys},
        "keys": summarize(got["keys"]) | {"n": n, "keys": a.waits_keys},
        "plain": summarize(got["plain"]) | {"n": n},
        "keyed_then": summarize(got["keyed-then"]) | {"n": n, "keys": a.waits_keys},
        "plain_then": summarize(got["plain-then"]) | {"n": n},
        "keys_ratio": ratios(got["keyed"], got["plain"]),
        "keys_then_ratio": ratios(got["keyed-then"], got["plain-then"]),
        "keys_unlimited_ratio": ratios(got["keys"], got["plain"]),
    }


def state_of(todo_id: int) -> str:
    return seed.scalar("SELECT state FROM todos WHERE id = %s", (todo_id,))


def run_section(ctx) -> dict:
    from switchboard.queues.models import Endpoint
    from switchboard.queues.transitions import Actor

    args = ctx.args
    waiter_id, token = seed.vend("bench-waiter")
    sender_id, _ = seed.vend("bench-sender")
    log_path = db.RESULTS / f"waits-server-{ctx.stamp}.log"
    with httpbench.Server(log_path, **THIS_TREE) as server:
        w = wake(server, waiter_id, token, sender_id, args.waits_wakes)
    log(f"waits: wake p95 {w['after']['p95_ms']} ms (create's {w['create']['p95_ms']})")
    fan = Actor.agent(Endpoint.objects.get(pk=seed.vend("bench-fan-in")[0]))
    release = fan_in(fan, args.waits_fan)
    log(f"waits: fan-in {args.waits_fan:,}: all pending in {release['all_pending_ms']} ms")
    swept = with_sweeper(fan, args.waits_fan, db.RESULTS / f"waits-sweeper-{ctx.stamp}.log")
    log(f"waits: with switchboard sweep: all pending in {swept['all_pending_ms']} ms")
    pool = ctx.pool
    own = pool is None or len(pool.children) < args.waits_workers
    if own:
        pool = workers.Pool(workers.ledger_worker, args.waits_workers)
    try:
        d = drains(ctx, pool)
    finally:
        if own:
            pool.close()
    return {
        "wake": w,
        "fan_in": release,
        "with_sweeper": swept,
        **d,
        "target": TARGET,
        "server": server.settings | server.log_summary(),
    }


def met(note: dict) -> dict:
    t, r, k = note["target"], note["fan_in"], note["keyed"]
    return {
        "wake": note["wake"]["wrong"] == 0
        and (note["wake"]["after"]["p95_ms"] or 1e9) <= t["wake_p95_ms"],
        "release": not r["left_waiting"] and r["all_pending_ms"] <= t["release_s"] * 1000,
        "sweeper": not note["with_sweeper"]["left_waiting"]
        and note["with_sweeper"]["all_pending_ms"] <= t["release_s"] * 1000,
        "keys": note["keys_ratio"]["median"] >= t["keys_ratio"]
        and note["keys_then_ratio"]["median"] >= t["keys_ratio"]
        and k["most_claimed_per_key"] == [1, 1]
        and note["keyed_then"]["most_claimed_per_key"] == [1, 1],
    }


def _rate(s: dict) -> str:
    runs = s["todos_per_s_all"]
    return f(s["todos_per_s"]) + (f" ({', '.join(map(str, runs))})" if len(runs) > 1 else "")


def _ratio(r: dict) -> str:
    return f2(r["median"]) + ("" if r["min"] == r["max"] else f" ({f2(r['min'])}-{f2(r['max'])})")


def render(note: dict) -> str:
    w, r, s, t, ok = note["wake"], note["fan_in"], note["with_sweeper"], note["target"], met(note)

    def times(lat: dict) -> str:
        return f"{f2(lat['p50_ms'])}/{f2(lat['p95_ms'])}/{f2(lat['p99_ms'])}/{f2(lat['max_ms'])}"

    wake_rows = [
        ["the last prerequisite completes", w["after"]["n"], times(w["after"])],
        ["create_todo (baseline)", w["create"]["n"], times(w["create"])],
    ]
    lines = [
        f"Waits (issue 44): a parked claim_next long-poll over HTTP (one switchboard serve, "
        f"{note['server']['workers']} workers) woken by its todo's last prerequisite's "
        f"complete in the bench's process, alternated with one woken by a create; from the "
        f"commit (the transition's return) to the poll's answer; {db.code_line(note['git'])}",
        "",
        *table(["woken by", "wakes", "p50/p95/p99/max ms"], wake_rows),
        f"Target p95 <= {t['wake_p95_ms']:.0f} ms: {verdict(ok['wake'])}; the completing "
        f"transition itself p50/p95 {f2(w['complete']['p50_ms'])}/{f2(w['complete']['p95_ms'])}"
        f" ms; {w['wrong']} polls answered with another todo; {note['server']['line']}",
        "",
        f"Fan-in: one todo with {r['dependents']:,} dependents; its complete (the trigger "
        f"releases up to 1000 in that transaction), then transitions.release_leftovers() in a "
        f"loop as the sweeper calls it, each batch its own transaction",
        "",
        *table(
            ["step", "n", "p50 ms", "max ms"],
            [
                [
                    "complete, nothing waits (baseline)",
                    r["plain_complete"]["n"],
                    f2(r["plain_complete"]["p50_ms"]),
                    f2(r["plain_complete"]["max_ms"]),
                ],
                [
                    f"complete, {r['released_in_commit']:,} released in its commit",
                    1,
                    f2(r["complete_ms"]),
                    f2(r["complete_ms"]),
                ],
                [
                    "a leftover batch (release_leftovers)",
                    r["batches"]["n"],
                    f2(r["batches"]["p50_ms"]),
                    f2(r["batches"]["max_ms"]),
                ],
            ],
        ),
        f"All {r['dependents']:,} pending {f(r['all_pending_ms'])} ms after the complete's call "
        f"({r['sweeper_calls']} release_leftovers calls; {r['left_waiting']} left waiting); "
        f"longest transaction {f(r['longest_ms'])} ms. Target all within {t['release_s']:.0f} s:"
        f" {verdict(ok['release'])}",
        f"With a running switchboard sweep (interval {s['interval_s']} s, one sample): all "
        f"pending {f(s['all_pending_ms'])} ms after the complete's call ({s['left_waiting']} "
        f"left waiting) => {verdict(ok['sweeper'])}",
        "",
    ]

    def row(label: str, s: dict, ratio: dict | None, keyed: bool = False) -> list:
        most = "/".join(map(str, s["most_claimed_per_key"])) + f" ({s['looks']:,} looks)"
        return [label, _rate(s), f2(s["cpu_ms_per_todo"]), _ratio(ratio) if ratio else "1.00"] + (
            [most] if keyed else ["-"]
        )

    c, pc, k, u, p = (note[x] for x in ("children", "plain_children", "keyed", "keys", "plain"))
    rows = [
        row(f"{c['n']:,} children of one waiting parent", c, note["children_ratio"]),
        row(f"{pc['n']:,} todos without a parent", pc, None),
        row(
            f"{k['n']:,} todos, {k['keys']} keys, max_claimed_per_key 1",
            k,
            note["keys_ratio"],
            True,
        ),
        row(f"{u['n']:,} todos, {u['keys']} keys, no limit", u, note["keys_unlimited_ratio"]),
        row(f"{p['n']:,} todos without keys, no limit", p, None),
        row(
            f"{k['n']:,} todos, {k['keys']} keys, limit 1, complete with then",
            note["keyed_then"],
            note["keys_then_ratio"],
            True,
        ),
        row(f"{p['n']:,} todos without keys, complete with then", note["plain_then"], None),
    ]
    headers = [
        "drain",
        "todos/s",
        "CPU ms/todo",
        "x its baseline",
        "most claimed per key (states/attempts)",
    ]
    lines += [
        f"Drains: claim_next + complete (or a complete with then, claiming the next in the "
        f"same call) through queues.transitions, {note['workers']} worker "
        f"processes, after one drain of each to warm up: the children's rows the median of "
        f"{note['reps']} drain(s), the keys' {note.get('key_reps', note['reps'])} (a keyed "
        f"drain right before or after its plain one, the ratio the median of the pairs'), each "
        f"set in alternating order; CPU = workers + every PostgreSQL process",
        "",
        *table(headers, rows),
        f"Parents pending after their children's drain: {note['parents_released']} of "
        f"{note['reps'] + 1}. Keys target >= {t['keys_ratio']} x and never two claimed with "
        f"one key: {verdict(ok['keys'])}; section took {note['duration_s']:.0f} s",
    ]
    return "\n".join(lines)
