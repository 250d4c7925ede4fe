"""Worker processes (a ``Pool`` serves drains over pipes: "prepare", then "go" to all as the
barrier, "done" with stats), and the ledger's loops: ``ours`` (claim_next, complete),
``ours-then`` (each complete claims the next), ``nohist-then`` (bench/nohist.sql)."""

from __future__ import annotations

import json
import multiprocessing as mp
import queue
import re
import threading
import time
from contextlib import suppress
from pathlib import Path

import psycopg

from bench import db

RESULT = {"ok": True}
_PARTS = db.named(Path(__file__).with_name("nohist.sql"))
_AFTER_CLOSE = " " + _PARTS["close_also"]
TWIN = {  # ADR-0039's reference: the two statements bench/nohist.sql's parts make
    "claim": f"WITH {_PARTS['claim'].format(also='')}\n{_PARTS['claim_row']}",
    "close_then_claim": f"WITH {_PARTS['close']},\n{_PARTS['claim'].format(also=_AFTER_CLOSE)}\n"
    + _PARTS["close_row"],
}
PLACEHOLDER = re.compile(r"%\((\w+)\)s")  # psycopg's, $1... in a PREPARE


class DrainFailed(RuntimeError):
    """A drain that did not do what it names: the run stops rather than report it."""


class Child:
    """A spawned process, ``target(conn, *args)``, spoken to over a pipe (``send``); ``close``
    sends None (a loop that reads its pipe ends on it), then terminates it if it is there."""

    def __init__(self, target, *args) -> None:
        spawn = mp.get_context("spawn")
        self.pipe, child = spawn.Pipe()
        self.proc = spawn.Process(target=target, args=(child, *args), daemon=True)
        self.proc.start()
        child.close()
        self.send = self.pipe.send

    def recv(self, timeout: float = 300.0) -> tuple:
        if not self.pipe.poll(timeout):
            raise TimeoutError(f"{self.proc.name}: no answer in {timeout:.0f} s")
        return self.pipe.recv()

    def close(self) -> None:
        with suppress(OSError):
            self.pipe.send(None)
        self.proc.join(10)
        if self.proc.is_alive():  # mid-conversation after a failure
            self.proc.terminate()
            self.proc.join(10)


class Pool:
    """``size`` children running ``target(conn, index, *args)``, which calls ``serve``."""

    def __init__(self, target, size: int, *args):
        self.children = [Child(target, i, *args) for i in range(size)]
        for child in self.children:
            assert child.recv()[0] == "hello"
        self.postmaster = db.postmaster_pid()

    def drain(self, n: int, *payload, probe=lambda: None) -> dict:
        """One drain on the first ``n`` children: the todos they did, the wall time, their
        claims' latencies and CPU, PostgreSQL's CPU (every process of a local server) and the
        WAL it wrote; and ``probe()`` just before "go" and after the last "done"."""
        children = self.children[:n]
        for child in children:
            child.send(("prepare", *payload))
        if errors := [m[1] for m in (c.recv() for c in children) if m[0] == "error"]:
            raise DrainFailed(f"{payload[0]}: {errors[0]}")
        pg, wal, before = db.server_cpu(self.postmaster), db.wal_lsn(), probe()
        t0 = time.perf_counter()
        for child in children:
            child.send(("go",))
        results = [child.recv()[1] for child in children]
        after = probe()
        if errors := [r["error"] for r in results if r["error"]]:
            raise DrainFailed(f"{payload[0]} drain failed: {errors[0]}")
        return {
            "n": sum(r["n"] for r in results),
            "wall": max(r["end"] for r in results) - t0,
            "lat": [x for r in results for x in r["lat"]],
            "client_cpu": sum(r["cpu"] for r in results),
            "pg_cpu": db.cpu_delta(pg, db.server_cpu(self.postmaster)),
            "wal_bytes": db.wal_lsn() - wal,
            "results": results,
            "before": before,
            "after": after,
        }

    def close(self) -> None:
        for child in self.children:
            child.close()


def serve(conn, prepare) -> None:
    """A child's side of the protocol: ``prepare(*payload)`` readies a drain and returns
    ``run()``, which drains and returns its stats; CPU is this process's. None ends it."""
    conn.send(("hello",))
    while (msg := conn.recv()) is not None:
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


# --- the ledger's loops ----------------------------------------------------------------------


def _product(loop: str, endpoint_id: int):
    """``ours`` and ``ours-then``: claim_next() -> a claim or None, and close(claim) -> the
    claim its answer brought, or None. The bench's one use of the ledger's transitions."""
    from switchboard.queues import transitions
    from switchboard.queues.models import Endpoint

    actor = transitions.Actor.agent(Endpoint.objects.get(pk=endpoint_id))

    def claim_next():
        return transitions.claim_next(actor)

    def complete(c) -> None:
        transitions.complete(actor, c.todo.id, attempt_seq=c.attempt_seq, result=RESULT)

    def complete_then(c):
        done = transitions.Close.complete(result=RESULT)
        then = transitions.close_then_claim_next(
            actor, done, c.todo.id, attempt_seq=c.attempt_seq, claim=transitions.ClaimArgs()
        )
        return then.claim

    return claim_next, complete_then if loop == "ours-then" else complete


def _twin(conn, endpoint_id: int):
    """``nohist-then``, on ``conn``: the same two callables, on bench/nohist.sql."""
    claiming = {"endpoint": endpoint_id, "owner": "agent:bench-nohist", "lease_seconds": 300}

    def claim_next():
        return conn.execute(TWIN["claim"], claiming, prepare=True).fetchone()

    def complete_then(claim):
        ids = {"todo_id": claim[0], "attempt_seq": claim[1], "result": json.dumps(RESULT)}
        row = conn.execute(TWIN["close_then_claim"], claiming | ids, prepare=True).fetchone()
        if row is None:
            raise DrainFailed(f"the twin's close found todo {claim[0]} not held")
        return row if row[0] is not None else None

    return claim_next, complete_then


def twin_columns() -> dict[str, set[str]]:
    """The columns bench/nohist.sql names, by table: todos (as t, m, n, and those it sets),
    endpoints (as e, rq)."""
    text = "\n".join(TWIN.values())
    todos = {c for _, c in re.findall(r"\b(t|m|n)\.(\w+)", text)}
    todos |= set(re.findall(r"(?:SET|,)\s+(\w+) =", text))
    return {"todos": todos, "endpoints": {c for _, c in re.findall(r"\b(e|rq)\.(\w+)", text)}}


def check_twin() -> None:
    """Stop the run, naming the statement, if the migrated schema no longer takes one of
    bench/nohist.sql's: ADR-0039's reference would no longer be the product's drain."""
    with db.connect() as conn:
        for name, text in TWIN.items():
            found = dict.fromkeys(PLACEHOLDER.findall(text))
            numbers = {p: f"${i}" for i, p in enumerate(found, 1)}
            native = PLACEHOLDER.sub(lambda m, n=numbers: n[m[1]], text)
            try:
                conn.execute(f"PREPARE bench_twin AS {native}")
            except psycopg.Error as exc:
                raise SystemExit(f"bench/nohist.sql, {name}: no longer prepares: {exc}") from None
            conn.execute("DEALLOCATE bench_twin")


def _drain(claim_next, close, lat: list[float]) -> int:
    """Claim and close until the queue is empty; ``lat``: the time of each call whose answer
    was a claim (with then, most are completes)."""
    n, clock, claim = 0, time.perf_counter, None
    while True:
        if claim is None:
            t = clock()
            if (claim := claim_next()) is None:
                return n  # the empty claim that ends the drain is not a claim
            lat.append(clock() - t)
        t = clock()
        if (claim := close(claim)) is not None:
            lat.append(clock() - t)
        n += 1


def ledger_worker(conn, index: int) -> None:
    """A ledger worker process: Django for ours, a psycopg connection of its own for the twin.
    Each drain ends by flushing its backends' statistics, so the parent reads them whole."""
    db.setup_django()
    own = db.connect()

    def prepare(loop: str, endpoint_id: int):
        db.one("SELECT 1")  # a live connection before the barrier
        steps = _twin(own, endpoint_id) if loop == "nohist-then" else _product(loop, endpoint_id)
        lat: list[float] = []

        def run() -> dict:
            n = _drain(*steps, lat)
            for flush in (db.one, own.execute):
                flush("SELECT pg_stat_force_next_flush()")
            return {"n": n, "lat": lat}

        return run

    serve(conn, prepare)


class ParkedPoll:
    """An agent's ``claim_next`` long-poll over HTTP on a thread, parked on ``park()``;
    ``answered()``: when its answer came (``time.time()``) and the todo it brought (None:
    none), completed at once so the queue is empty for the next round."""

    def __init__(self, base_url: str, token: str, wait_seconds: float) -> None:
        self.base_url, self.token, self.wait_seconds = base_url, token, wait_seconds
        self.go, self.got = queue.Queue(), queue.Queue()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ParkedPoll:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.go.put(False)
        self.thread.join(timeout=self.wait_seconds + 30)

    def park(self) -> None:
        self.go.put(True)

    def answered(self) -> tuple[float, int | None]:
        return self.got.get(timeout=self.wait_seconds + 30)

    def woken(self, ring, park_s: float) -> tuple[float, float, bool]:
        """Park, wait ``park_s``, ``ring()`` (a transition, returning the todo the poll should
        bring): its own seconds, from its return to the poll's answer, whether that todo came."""
        self.park()
        time.sleep(park_s)
        t0, expected = time.time(), ring()
        committed = time.time()
        at, todo_id = self.answered()
        return committed - t0, at - committed, todo_id == expected

    def _poll(self) -> None:
        from switchboard.client import Client

        client = Client(self.base_url, self.token, timeout=self.wait_seconds + 20)
        while self.go.get():
            claimed = client.claim_next(wait_seconds=self.wait_seconds)
            at, todo = time.time(), claimed["todo"]
            if todo is not None:
                client.complete(todo_id=todo["id"], attempt_seq=claimed["attempt_seq"])
            self.got.put((at, todo and todo["id"]))
