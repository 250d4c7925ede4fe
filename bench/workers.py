"""Worker processes, and the in-process loops they drain the queue with.

A ``Pool`` is a fixed set of OS processes (multiprocessing 'spawn'), started once and then
serving drains on a pipe, so process start-up and imports never fall inside a timed drain:

    parent -> ("prepare", *payload)   child -> ("ready",) or ("error", text)
    parent -> ("go",)                 child -> ("done", stats)
    parent -> ("stop",)

Between "ready" and "go" each child blocks on its pipe, so "go" sent to all in a row is the
start barrier; a drain's wall time runs from just before the first "go" to the latest child's
end (``time.perf_counter`` is CLOCK_MONOTONIC, one clock for all processes). The ledger's
HTTP clients and Procrastinate's workers are Pools of their own targets.

The ledger loops (``LOOPS``): each claim, heartbeat and complete is one statement and its own
transaction, run by ``queues.db`` on Django's connection with the same prepared cursor, so
the loops differ by their SQL and bookkeeping, not the driver path.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time

from bench import db
from queues.transitions import Actor

RESULT = {"ok": True}


class DrainFailed(RuntimeError):
    pass


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
        errors = [r["error"] for r in results if r["error"]]
        if errors:
            raise DrainFailed(f"{payload[0]} drain failed: {errors[0]}")
        wall = max(r["end"] for r in results) - t0
        return {"wall": wall, "results": results, "before": before, "after": after}

    def close(self) -> None:
        """Ask each child to stop, then join it (terminating only our own children)."""
        for pipe in self.pipes:
            try:
                pipe.send(("stop",))
            except (BrokenPipeError, OSError):
                pass
        for pipe, proc in zip(self.pipes, self.procs, strict=True):
            try:
                if pipe.poll(10):
                    pipe.recv()
            except (EOFError, OSError):
                pass
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()  # our own child, by its handle


def serve(conn, hello, prepare) -> None:
    """A child's side of the protocol: ``prepare(*payload)`` readies a drain and returns
    ``run()``, which drains and returns its stats; CPU is this process's (Python's)."""
    conn.send(("hello", hello))
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            conn.send(("stopped",))
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
        end = time.perf_counter()
        cpu = time.process_time() - cpu0
        conn.send(("done", {**stats, "start": start, "end": end, "cpu": cpu, "error": error}))


# --- the ledger's loops --------------------------------------------------------------------


def _statement(name: str, text: str):
    from queues.db import Statement

    return Statement(name, text, why="the bench's reference loops", prepare=True)


def _loop_statements() -> dict:
    pick = """(SELECT id FROM {t} WHERE endpoint_id = %(ep)s AND state = 'pending'
              ORDER BY priority DESC, created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"""
    beat = """UPDATE {t} SET lease_expires_at = now() + interval '300 s'
 WHERE id = %(id)s AND state = 'claimed'"""
    return {
        # bare: FOR UPDATE SKIP LOCKED on a plain table, no history (the physical reference)
        "bare_claim": f"""UPDATE bench_bare_jobs SET state = 'claimed',
       lease_expires_at = now() + interval '300 s'
 WHERE id = {pick.format(t="bench_bare_jobs")} RETURNING id, 0""",
        "bare_heartbeat": beat.format(t="bench_bare_jobs"),
        "bare_complete": """UPDATE bench_bare_jobs SET state = 'done', result = %(result)s
 WHERE id = %(id)s AND state = 'claimed'""",
        # hand: the bare table plus a hand-written two-column attempt row (calibration)
        "hand_claim": f"""WITH moved AS (
    UPDATE bench_hand_jobs j SET state = 'claimed', attempt = j.attempt + 1,
           lease_expires_at = now() + interval '300 s'
     WHERE j.id = {pick.format(t="bench_hand_jobs")} RETURNING j.id, j.attempt
), opened AS (
    INSERT INTO bench_hand_attempts (job_id, seq) SELECT id, attempt FROM moved RETURNING seq
)
SELECT moved.id, moved.attempt FROM moved""",
        "hand_heartbeat": beat.format(t="bench_hand_jobs"),
        "hand_complete": """WITH moved AS (
    UPDATE bench_hand_jobs SET state = 'done', result = %(result)s
     WHERE id = %(id)s AND state = 'claimed' RETURNING id
)
UPDATE bench_hand_attempts a SET ended_at = now(), outcome = 'completed', result = %(result)s
  FROM moved WHERE a.job_id = moved.id AND a.seq = %(seq)s AND a.ended_at IS NULL""",
    }


def _sql_loop(kind: str, endpoint_id: int, heartbeat: bool, lat: list, hb_lat: list) -> int:
    from queues import db as ledger_db

    s = {k: _statement(k, v) for k, v in _loop_statements().items() if k.startswith(kind)}
    payload, clock, n = json.dumps(RESULT), time.perf_counter, 0
    while True:
        t = clock()
        rows = ledger_db.fetch(s[f"{kind}_claim"], {"ep": endpoint_id})
        if not rows:
            return n  # the empty claim that ends the drain is not a claim
        lat.append(clock() - t)
        job, seq = rows[0]
        if heartbeat:
            t = clock()
            ledger_db.fetch(s[f"{kind}_heartbeat"], {"id": job})
            hb_lat.append(clock() - t)
        ledger_db.fetch(s[f"{kind}_complete"], {"result": payload, "id": job, "seq": seq})
        n += 1


def _plans(endpoint_id: int, heartbeat: bool, lat: list, hb_lat: list, twins=None) -> int:
    """The product's loop: transitions.claim_next + heartbeat + complete, each the plan
    ``queues.db.run`` executes (what ``transitions.claim_next(...)`` does); with ``twins``
    the same plans with their statements swapped for the ones without history (nohist) or
    writing the attempt row at close (once, bench/writeonce.py)."""
    from bench import nohist
    from queues import db as ledger_db
    from queues import transitions
    from queues.models import Endpoint

    endpoint = Endpoint.objects.get(pk=endpoint_id)
    actor = transitions.Actor.agent(endpoint)
    if twins is None:
        run = ledger_db.run
    else:

        def run(plan):
            return ledger_db.run(nohist.swapped(plan, twins))

    clock, n = time.perf_counter, 0
    while True:
        t = clock()
        claimed = run(transitions.claim_next_plan(Actor.agent(endpoint)))
        if claimed is None:
            return n
        lat.append(clock() - t)
        seq = claimed.attempt_seq
        if heartbeat:
            t = clock()
            run(transitions.heartbeat_plan(actor, claimed.todo.id, attempt_seq=seq))
            hb_lat.append(clock() - t)
        run(transitions.complete_plan(actor, claimed.todo.id, attempt_seq=seq, result=RESULT))
        n += 1


LOOPS = ("bare", "hand", "ours", "nohist", "once")


def ledger_worker(conn, index: int) -> None:
    """Entry point of a ledger worker process; says hello with its backend's pid."""
    db.setup_django()
    from bench import nohist, writeonce

    backend = db.with_cursor("SELECT pg_backend_pid()")[0]
    twins = {"nohist": nohist.statements()}
    twins["once"] = writeonce.statements(twins["nohist"])

    def prepare(loop: str, endpoint_id: int, heartbeat: bool):
        db.with_cursor("SELECT 1")  # a live connection before the barrier
        lat: list[float] = []
        hb_lat: list[float] = []

        def run() -> dict:
            if loop in ("bare", "hand"):
                n = _sql_loop(loop, endpoint_id, heartbeat, lat, hb_lat)
            else:
                n = _plans(endpoint_id, heartbeat, lat, hb_lat, twins.get(loop))
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
            "per_worker": [r["n"] for r in results],
            "client_cpu": sum(r["cpu"] for r in results),
            "server_cpu": db.cpu_delta(d["before"]["pg"], d["after"]["pg"]),
            "wal_bytes": d["after"]["wal"] - d["before"]["wal"],
        }
