"""Worker processes, and the ledger's loops they drain the queue with.

A ``Pool`` is a fixed set of processes (multiprocessing 'spawn') started once, serving drains
on a pipe so start-up and imports never fall inside a timed drain: "prepare" readies each
child (it answers "ready"), "go" sent to all in a row is the start barrier, each answers
"done" with its stats; a drain's wall time runs from the first "go" to the latest end.

The ledger's loops: ``ours`` runs the product's plans (claim_next, heartbeat, complete) with
``queues.db.run``; ``ours-then`` the same with each complete claiming the next todo in its
own statement (``then``); ``nohist-then`` that loop on the statements without attempt history
(bench/nohist.py, ADR-0039's reference); ``bare`` three statements on a plain table with the
same executor.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from contextlib import suppress

from bench import db

RESULT = {"ok": True}


class DrainFailed(RuntimeError):
    pass


class Child:
    """A spawned helper process, ``target(conn, *args)``, spoken to over a pipe and ended by
    its handle: on leaving ``with``, None is sent (a loop that reads its pipe ends on it),
    and a child still there after 10 s is terminated."""

    def __init__(self, target, *args) -> None:
        spawn = mp.get_context("spawn")
        self.pipe, child = spawn.Pipe()
        self.proc = spawn.Process(target=target, args=(child, *args), daemon=True)
        self.proc.start()
        child.close()

    def __enter__(self) -> Child:
        return self

    def send(self, message) -> None:
        self.pipe.send(message)

    def ask(self, message) -> tuple:
        self.pipe.send(message)
        return self.recv()

    def recv(self, timeout: float = 300.0) -> tuple:
        if not self.pipe.poll(timeout):
            raise TimeoutError(f"{self.proc.name}: no answer in {timeout:.0f} s")
        return self.pipe.recv()

    def __exit__(self, *exc) -> None:
        with suppress(OSError):
            self.pipe.send(None)
        self.proc.join(10)
        if self.proc.is_alive():  # mid-conversation after a failure
            self.proc.terminate()
            self.proc.join(10)


class Pool:
    def __init__(self, target, size: int, *args, name: str):
        ctx = mp.get_context("spawn")
        self.pipes, self.procs = [], []
        for i in range(size):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=target, args=(child, i, *args), daemon=True, name=f"{name}-{i}"
            )
            proc.start()
            child.close()
            self.pipes.append(parent)
            self.procs.append(proc)
        self.hello = []
        for pipe in self.pipes:
            msg = pipe.recv()
            assert msg[0] == "hello", msg
            self.hello.append(msg[1])

    def drain(self, n: int, *payload, probe=lambda: None) -> dict:
        """One drain on the first ``n`` children. ``probe()`` is called just before "go" and
        after the last "done" (CPU, WAL); returns wall, each child's stats and both probes."""
        pipes = self.pipes[:n]
        for pipe in pipes:
            pipe.send(("prepare", *payload))
        errors = [m[1] for m in (pipe.recv() for pipe in pipes) if m[0] == "error"]
        if errors:
            raise DrainFailed(f"{payload[0]}: {errors[0]}")
        before = probe()
        t0 = time.perf_counter()
        for pipe in pipes:
            pipe.send(("go",))
        results = [pipe.recv()[1] for pipe in pipes]
        after = probe()
        if errors := [r["error"] for r in results if r["error"]]:
            raise DrainFailed(f"{payload[0]} drain failed: {errors[0]}")
        return {
            "wall": max(r["end"] for r in results) - t0,
            "results": results,
            "before": before,
            "after": after,
        }

    def close(self) -> None:
        """Ask each child to stop, then join it (terminating only our own children)."""
        for pipe in self.pipes:
            with suppress(OSError):
                pipe.send(("stop",))
        for proc in self.procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()  # our own child, by its handle


def serve(conn, hello, prepare) -> None:
    """A child's side of the protocol: ``prepare(*payload)`` readies a drain and returns
    ``run()``, which drains and returns its stats; CPU is this process's."""
    conn.send(("hello", hello))
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        try:
            run = prepare(*msg[1:])
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("ready",))
        assert conn.recv()[0] == "go"
        cpu0, start = time.process_time(), time.perf_counter()
        try:
            stats, error = run(), None
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
            stats, error = {}, f"{type(exc).__name__}: {exc}"
        end, cpu = time.perf_counter(), time.process_time() - cpu0
        conn.send(("done", {**stats, "start": start, "end": end, "cpu": cpu, "error": error}))


# --- the ledger's loops --------------------------------------------------------------------

_PICK = """(SELECT id FROM bench_bare_jobs WHERE endpoint_id = %(ep)s AND state = 'pending'
              ORDER BY priority DESC, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"""
BARE = {
    "claim": f"""UPDATE bench_bare_jobs SET state = 'claimed',
       lease_expires_at = now() + interval '300 s' WHERE id = {_PICK} RETURNING id""",
    "heartbeat": """UPDATE bench_bare_jobs SET lease_expires_at = now() + interval '300 s'
 WHERE id = %(id)s AND state = 'claimed'""",
    "complete": """UPDATE bench_bare_jobs SET state = 'done', result = %(result)s
 WHERE id = %(id)s AND state = 'claimed'""",
}


def _steps(loop: str, endpoint_id: int):
    """The loop's claim() (a handle, or None when the queue is empty), heartbeat(handle) and
    complete(handle), each one statement and transaction."""
    from queues import db as ledger_db
    from queues import transitions
    from queues.db import Statement
    from queues.models import Endpoint

    if loop == "bare":
        s = {
            k: Statement(f"bench_bare_{k}", v, why="the bench's floor", prepare=True)
            for k, v in BARE.items()
        }
        payload = json.dumps(RESULT)
        return (
            lambda: next(iter(ledger_db.fetch(s["claim"], {"ep": endpoint_id})), (None,))[0],
            lambda job: ledger_db.fetch(s["heartbeat"], {"id": job}),
            lambda job: ledger_db.fetch(s["complete"], {"result": payload, "id": job}),
        )
    actor = transitions.Actor.agent(Endpoint.objects.get(pk=endpoint_id))
    if loop in ("ours-then", "nohist-then"):
        return _then_steps(actor)
    return (
        lambda: ledger_db.run(transitions.claim_next_plan(actor)),
        lambda c: ledger_db.run(
            transitions.heartbeat_plan(actor, c.todo.id, attempt_seq=c.attempt_seq)
        ),
        lambda c: ledger_db.run(
            transitions.complete_plan(actor, c.todo.id, attempt_seq=c.attempt_seq, result=RESULT)
        ),
    )


def _then_steps(actor):
    """``ours-then``: each complete claims the next todo in its own statement
    (transitions.complete_then_claim_next_plan), as the agents' ``then`` does; claim() hands
    that claim over, and runs claim_next only to start (or when the complete could not
    claim: then it completes alone)."""
    from queues import db as ledger_db
    from queues import transitions

    brought: list = []

    def claim():
        if brought:
            return brought.pop()
        return ledger_db.run(transitions.claim_next_plan(actor))

    def complete(c):
        both = ledger_db.run(
            transitions.complete_then_claim_next_plan(
                actor, c.todo.id, attempt_seq=c.attempt_seq, result=RESULT
            )
        )
        if both is None:
            ledger_db.run(
                transitions.complete_plan(
                    actor, c.todo.id, attempt_seq=c.attempt_seq, result=RESULT
                )
            )
        elif both.claim is not None:
            brought.append(both.claim)

    def heartbeat(c):
        ledger_db.run(transitions.heartbeat_plan(actor, c.todo.id, attempt_seq=c.attempt_seq))

    return claim, heartbeat, complete


def _drain(steps, heartbeat: bool, lat: list, hb_lat: list, *, then: bool = False) -> int:
    """Claim, (heartbeat,) complete until the queue is empty. ``lat``: each claim's time, or
    with ``then`` each complete's (which brings the next claim, as over HTTP)."""
    claim, beat, complete = steps
    clock, n = time.perf_counter, 0
    while True:
        t = clock()
        if (handle := claim()) is None:
            return n  # the empty claim that ends the drain is not a claim
        if not then:
            lat.append(clock() - t)
        if heartbeat:
            t = clock()
            beat(handle)
            hb_lat.append(clock() - t)
        t = clock()
        complete(handle)
        if then:
            lat.append(clock() - t)
        n += 1


def ledger_worker(conn, index: int) -> None:
    """Entry point of a ledger worker process; says hello with its backend's pid."""
    db.setup_django()
    from bench import nohist

    backend = db.with_cursor("SELECT pg_backend_pid()")[0]

    def prepare(loop: str, endpoint_id: int, heartbeat: bool):
        db.with_cursor("SELECT 1")  # a live connection before the barrier
        nohist.use(loop == "nohist-then")  # the statements without history, or the product's
        steps = _steps(loop, endpoint_id)
        lat: list[float] = []
        hb_lat: list[float] = []

        def run() -> dict:
            n = _drain(steps, heartbeat, lat, hb_lat, then=loop.endswith("-then"))
            return {"n": n, "lat": lat, "hb_lat": hb_lat}

        return run

    serve(conn, backend, prepare)


class LedgerPool(Pool):
    """Ledger workers; a drain also records their backends' CPU (from /proc, when the server
    is local) and the WAL the server wrote."""

    def __init__(self, size: int):
        super().__init__(ledger_worker, size, name="bench-worker")
        self.local = all(db.is_postgres(pid) for pid in self.hello)

    def run(self, loop: str, workers: int, endpoint_id: int, heartbeat: bool) -> dict:
        backends = self.hello[:workers]

        def probe():
            return {"wal": db.wal_lsn(), "pg": db.cpu_of(backends) if self.local else None}

        d = self.drain(workers, loop, endpoint_id, heartbeat, probe=probe)
        results, n = d["results"], sum(r["n"] for r in d["results"])
        return {
            "n": n,
            "wall": d["wall"],
            "per_s": n / d["wall"] if d["wall"] > 0 else 0.0,
            "lat": [x for r in results for x in r["lat"]],
            "hb_lat": [x for r in results for x in r["hb_lat"]],
            "client_cpu": sum(r["cpu"] for r in results),
            "server_cpu": db.cpu_delta(d["before"]["pg"], d["after"]["pg"]),
            "wal_bytes": d["after"]["wal"] - d["before"]["wal"],
        }
