"""The worker side: one OS process per worker, its own Django setup and database connection.

A worker is started once (``spawn``) and then serves drains on a pipe, so process start-up and
Django's import cost never fall inside a timed drain:

    parent -> ("prepare", loop, endpoint_id, heartbeat, variant)   worker -> ("ready",)
    parent -> ("go",)                                               worker -> ("done", stats)
    parent -> ("stop",)

Between "ready" and "go" the worker is blocked on the pipe, so "go" sent to every worker in a
row is the start barrier; the drain's wall time runs from just before the first "go" to the
latest worker's end (``time.perf_counter`` is CLOCK_MONOTONIC, one clock for all processes).

Every loop has the same discipline: each claim, heartbeat and complete is one statement and its
own transaction (autocommit, as queues.transitions runs its single-statement transitions), sent
through the same cursor (``queues.sql``'s server-side prepared statements on Django's psycopg 3
connection), so the comparison is the SQL and the bookkeeping, not the driver path.
"""

from __future__ import annotations

import json
import time

LOOPS = ("bare", "hand", "ours")

# --- the bare loop: FOR UPDATE SKIP LOCKED on a plain table, no history --------------------

BARE_CLAIM = """
UPDATE bench_bare_jobs SET state = 'claimed', lease_expires_at = now() + interval '300 s'
 WHERE id = (SELECT id FROM bench_bare_jobs
              WHERE endpoint_id = %s AND state = 'pending'
              ORDER BY priority DESC, created_at, id
              LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id
"""
BARE_HEARTBEAT = """
UPDATE bench_bare_jobs SET lease_expires_at = now() + interval '300 s'
 WHERE id = %s AND state = 'claimed'
"""
BARE_COMPLETE = """
UPDATE bench_bare_jobs SET state = 'done', result = %s WHERE id = %s AND state = 'claimed'
"""

# --- the calibration loop: hand-written SQL that also opens and closes an attempt row -----

HAND_CLAIM = """
WITH pick AS (
    SELECT id FROM bench_hand_jobs
     WHERE endpoint_id = %(ep)s AND state = 'pending'
     ORDER BY priority DESC, created_at, id
     LIMIT 1 FOR UPDATE SKIP LOCKED
), moved AS (
    UPDATE bench_hand_jobs j
       SET state = 'claimed', attempt = j.attempt + 1,
           lease_expires_at = now() + interval '300 s'
      FROM pick WHERE j.id = pick.id
 RETURNING j.id, j.attempt
), opened AS (
    INSERT INTO bench_hand_attempts (job_id, seq) SELECT id, attempt FROM moved
 RETURNING seq
)
SELECT moved.id, moved.attempt FROM moved
"""
HAND_HEARTBEAT = """
UPDATE bench_hand_jobs SET lease_expires_at = now() + interval '300 s'
 WHERE id = %s AND state = 'claimed'
"""
HAND_COMPLETE = """
WITH moved AS (
    UPDATE bench_hand_jobs SET state = 'done', result = %(result)s
     WHERE id = %(id)s AND state = 'claimed'
 RETURNING id
)
UPDATE bench_hand_attempts a SET ended_at = now(), outcome = 'completed', result = %(result)s
  FROM moved WHERE a.job_id = moved.id AND a.seq = %(seq)s AND a.ended_at IS NULL
"""

RESULT = {"ok": True}


def _run(cursor, statement: str, params) -> tuple | None:
    cursor.execute(statement, params)
    return cursor.fetchone() if cursor.description else None


def _cursor():
    """The cursor queues.sql.fetch uses: server-side binding, prepared on first use."""
    from django.db import connection

    from queues.sql import _PreparedCursor

    connection.ensure_connection()
    return connection._prepare_cursor(_PreparedCursor(connection.connection))


def _bare(endpoint_id: int, heartbeat: bool, lat: list, hb_lat: list) -> int:
    payload = json.dumps(RESULT)
    n = 0
    clock = time.perf_counter
    with _cursor() as cursor:
        while True:
            t = clock()
            row = _run(cursor, BARE_CLAIM, (endpoint_id,))
            lat.append(clock() - t)
            if row is None:
                lat.pop()  # the empty claim that ends the drain is not a claim
                return n
            job = row[0]
            if heartbeat:
                t = clock()
                _run(cursor, BARE_HEARTBEAT, (job,))
                hb_lat.append(clock() - t)
            _run(cursor, BARE_COMPLETE, (payload, job))
            n += 1


def _hand(endpoint_id: int, heartbeat: bool, lat: list, hb_lat: list) -> int:
    payload = json.dumps(RESULT)
    n = 0
    clock = time.perf_counter
    with _cursor() as cursor:
        while True:
            t = clock()
            row = _run(cursor, HAND_CLAIM, {"ep": endpoint_id})
            lat.append(clock() - t)
            if row is None:
                lat.pop()
                return n
            job, seq = row
            if heartbeat:
                t = clock()
                _run(cursor, HAND_HEARTBEAT, (job,))
                hb_lat.append(clock() - t)
            _run(cursor, HAND_COMPLETE, {"result": payload, "id": job, "seq": seq})
            n += 1


def _ours(endpoint_id: int, heartbeat: bool, lat: list, hb_lat: list) -> int:
    from queues import transitions
    from queues.models import Endpoint
    from queues.transitions import Actor

    ep = Endpoint.objects.get(pk=endpoint_id)
    actor = Actor.agent(ep)
    n = 0
    clock = time.perf_counter
    while True:
        t = clock()
        c = transitions.claim_next(endpoint=ep)
        lat.append(clock() - t)
        if c is None:
            lat.pop()
            return n
        if heartbeat:
            t = clock()
            transitions.heartbeat(actor, c.todo.id, attempt_seq=c.attempt_seq)
            hb_lat.append(clock() - t)
        transitions.complete(actor, c.todo.id, attempt_seq=c.attempt_seq, result={"ok": True})
        n += 1


_RUN = {"bare": _bare, "hand": _hand, "ours": _ours}


def worker_main(conn, index: int) -> None:
    """Entry point of a worker process (multiprocessing 'spawn')."""
    from bench import db, variants

    db.setup_django()
    from django.db import connection

    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend_pid = cursor.fetchone()[0]
    conn.send(("hello", backend_pid))
    while True:
        msg = conn.recv()
        kind = msg[0]
        if kind == "stop":
            connection.close()
            conn.send(("stopped",))
            return
        if kind != "prepare":
            raise RuntimeError(f"worker {index}: unexpected {msg!r}")
        _, loop, endpoint_id, heartbeat, variant = msg
        try:
            variants.HITS = 0
            saved = variants.apply(variant)
            with connection.cursor() as cursor:  # a live connection before the barrier
                cursor.execute("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        lat: list[float] = []
        hb_lat: list[float] = []
        conn.send(("ready",))
        go = conn.recv()
        assert go[0] == "go", go
        cpu0 = time.process_time()
        start = time.perf_counter()
        try:
            n = _RUN[loop](endpoint_id, heartbeat, lat, hb_lat)
            error = None
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which stops
            n, error = 0, f"{type(exc).__name__}: {exc}"
        end = time.perf_counter()
        cpu = time.process_time() - cpu0
        if variant != "baseline" and variant in variants.CODE_VARIANTS and not variants.HITS:
            error = error or f"variant {variant} patched nothing (has the code moved?)"
        try:
            variants.undo(saved)
        except Exception as exc:  # noqa: BLE001
            error = error or f"undo {variant}: {type(exc).__name__}: {exc}"
        conn.send(
            (
                "done",
                {
                    "n": n,
                    "start": start,
                    "end": end,
                    "lat": lat,
                    "hb_lat": hb_lat,
                    "cpu": cpu,
                    "error": error,
                },
            )
        )
