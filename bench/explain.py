"""Plans of the claim statement: which scans it uses as history grows, and whether a plan
made while the tables were empty can outlive the emptiness.

Every EXPLAIN (ANALYZE) here runs inside a transaction that is rolled back, so it claims
nothing for real.
"""

from __future__ import annotations

import re
import time

from django.db import connection, transaction

_SCAN = re.compile(
    r"(Seq Scan|Index Only Scan|Index Scan(?: Backward)?|Bitmap Heap Scan|Bitmap Index Scan)"
    r"(?: using (\S+))? on (\S+)"
)


def claim_params(endpoint_id: int) -> dict:
    from queues import transitions
    from queues.models import Endpoint
    from queues.transitions import Actor

    endpoint = Endpoint.objects.get(pk=endpoint_id)
    params, _token = transitions._claim_params(Actor.agent(endpoint), None, False, None, None)
    return params


def summarize(lines: list[str]) -> dict:
    """Scans (kind, index, table, loops), planning/execution time and top-level buffers."""
    scans = []
    for line in lines:
        m = _SCAN.search(line)
        if not m:
            continue
        kind, index, table = m.group(1), m.group(2), m.group(3)
        if kind == "Bitmap Index Scan":  # "Bitmap Index Scan on <index>"
            index = table
            table = (
                "todo_attempts"
                if index.startswith("todo_attempts")
                else ("todos" if index.startswith("todos") else index)
            )
        loops = re.search(r"loops=(\d+)", line)
        rows = re.search(r"actual time=\S+ rows=(\d+)", line)
        never = "never executed" in line
        scans.append(
            {
                "kind": kind,
                "index": index,
                "table": table,
                "rows": int(rows.group(1)) if rows else None,
                "loops": int(loops.group(1)) if loops else None,
                "never_executed": never,
            }
        )
    out = {"scans": scans}
    for line in lines:
        s = line.strip()
        if s.startswith("Planning Time:"):
            out["planning_ms"] = float(s.split(":")[1].split()[0])
        elif s.startswith("Execution Time:"):
            out["execution_ms"] = float(s.split(":")[1].split()[0])
    for line in lines[1:4]:
        m = re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", line)
        if m:
            out["buffers"] = int(m.group(1)) + int(m.group(2) or 0)
            break
    out["triggers"] = []
    for line in lines:
        m = re.match(
            r"\s*Trigger for constraint (\S+)(?: on \S+)?: time=([\d.]+) calls=(\d+)", line
        )
        if m:
            out["triggers"].append(
                {"constraint": m.group(1), "ms": float(m.group(2)), "calls": int(m.group(3))}
            )
    out["seq_scan_attempts"] = any(
        s["kind"] == "Seq Scan" and s["table"] == "todo_attempts" and not s["never_executed"]
        for s in scans
    )
    out["seq_scan_todos"] = any(
        s["kind"] == "Seq Scan" and s["table"] == "todos" and not s["never_executed"] for s in scans
    )
    return out


_KIND = {
    "Seq Scan": "SEQ SCAN",
    "Index Scan": "idx",
    "Index Scan Backward": "idx-bwd",
    "Index Only Scan": "idx-only",
    "Bitmap Index Scan": "bitmap",
}


def scan_line(summary: dict) -> str:
    """The scans on todos/todo_attempts, e.g.
    'todos: idx todos_claimable, idx todos_pkey; todo_attempts: idx-bwd todo_attempts_todo_seq'."""
    by_table: dict[str, list[str]] = {}
    for s in summary["scans"]:
        if s["table"] not in ("todos", "todo_attempts") or s["kind"] == "Bitmap Heap Scan":
            continue
        what = _KIND.get(s["kind"], s["kind"]) + (f" {s['index']}" if s["index"] else "")
        if s["never_executed"]:
            what += " (not run)"
        by_table.setdefault(s["table"], [])
        if what not in by_table[s["table"]]:
            by_table[s["table"]].append(what)
    return "; ".join(f"{t}: {', '.join(v)}" for t, v in by_table.items())


def explain_claim(endpoint_id: int, statement: str | None = None) -> tuple[list[str], dict]:
    """EXPLAIN (ANALYZE, BUFFERS) of CLAIM_NEXT on the current connection, rolled back."""
    from queues import sql

    params = claim_params(endpoint_id)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + (statement or sql.CLAIM_NEXT), params)
            lines = [row[0] for row in cursor.fetchall()]
        transaction.set_rollback(True)
    return lines, summarize(lines)


def _time_claims(endpoint, count: int) -> list[float]:
    """claim_next + complete ``count`` times on this connection; claim latencies."""
    from queues import transitions
    from queues.transitions import Actor

    actor = Actor.agent(endpoint)
    lat = []
    for _ in range(count):
        t = time.perf_counter()
        c = transitions.claim_next(endpoint=endpoint)
        lat.append(time.perf_counter() - t)
        if c is None:
            break
        transitions.complete(actor, c.todo.id, attempt_seq=c.attempt_seq, result={"ok": True})
    return lat


def _p50(xs: list[float]) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 2] * 1000


def _side_connection():
    """A second, fresh PostgreSQL session on the bench database (autocommit)."""
    import psycopg

    connection.ensure_connection()
    params = connection.get_connection_params()
    for key in ("cursor_factory", "pool", "prepare_threshold"):
        params.pop(key, None)
    return psycopg.connect(**params, autocommit=True)


def _stats_frozen(frozen: bool) -> None:
    """Autovacuum off/on for the two tables, so 'stale statistics' stays stale while we look."""
    value = "false" if frozen else "true"
    with connection.cursor() as cursor:
        for table in ("todos", "todo_attempts"):
            cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = {value})")


def _claim_and_commit(endpoint_id: int, count: int) -> dict:
    """``count`` claims (queues.sql.CLAIM_NEXT, each its own transaction, left claimed) on
    this session, timing the statement and the COMMIT separately: the deferred checks (foreign
    keys, the one-open-attempt constraint) run at COMMIT."""
    from queues import sql

    params = claim_params(endpoint_id)
    stmt, commit = [], []
    with connection.cursor() as cursor:
        for _ in range(count):
            with transaction.atomic():
                t0 = time.perf_counter()
                cursor.execute(sql.CLAIM_NEXT, params)
                cursor.fetchall()
                t1 = time.perf_counter()
            commit.append(time.perf_counter() - t1)
            stmt.append(t1 - t0)
    return {"statement_p50_ms": _p50(stmt), "commit_p50_ms": _p50(commit)}


def _look(endpoint_id: int, claims: int) -> dict:
    lines, summary = explain_claim(endpoint_id)
    return {
        "scans": scan_line(summary),
        "summary": summary,
        "explain": lines,
        **_claim_and_commit(endpoint_id, claims),
    }


def plan_cache_check(endpoint_id: int, history: int, pending: int = 400) -> dict:
    """Does anything keep a plan made while the tables were empty?

    1. Django's session runs claims on empty (ANALYZEd) tables, as on a fresh install.
    2. ``history`` done todos with closed attempts, and pending todos, are loaded from a
       *second* session with autovacuum paused on both tables, so the statistics still say
       "empty" (the state before autovacuum catches up).
    3. The SAME Django session: the claim's plan (EXPLAIN ANALYZE), and claim statement and
       COMMIT times; then again after DISCARD PLANS (drops this session's cached plans,
       PostgreSQL's own foreign-key-check plans included); then after ANALYZE.

    Also reports why our own statements cannot hold a stale plan: Django's cursor binds
    client-side (psycopg ClientCursor never prepares), Django sets psycopg's
    prepare_threshold to None, and pg_prepared_statements is empty.
    """
    from bench import seed
    from queues.models import Endpoint

    endpoint = Endpoint.objects.get(pk=endpoint_id)
    per_step = pending // 4
    seed.truncate("ours")
    seed.analyze("ours")  # statistics of empty tables, as on a fresh install
    _stats_frozen(True)
    try:
        seed.add_pending("ours", endpoint_id, 20)
        empty_lat = _time_claims(endpoint, 20)  # plans made while the tables are empty
        with connection.cursor() as cursor:
            cursor_class = type(cursor.cursor)
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            prepared_count = cursor.fetchone()[0]
        pg = connection.connection
        facts = {
            "django_cursor": f"{cursor_class.__module__}.{cursor_class.__qualname__}",
            "client_side_binding": any(c.__name__ == "ClientCursor" for c in cursor_class.__mro__),
            "prepare_threshold": pg.prepare_threshold,
            "pg_prepared_statements": prepared_count,
            "empty_claim_p50_ms": _p50(empty_lat),
        }
        seed.add_pending("ours", endpoint_id, per_step)
        facts["empty"] = _claim_and_commit(endpoint_id, per_step)
        with _side_connection() as side, seed.via(side):
            seed.add_history("ours", endpoint_id, history)
            seed.add_pending("ours", endpoint_id, pending)
            facts["reltuples_todos"] = seed._scalar(
                "SELECT reltuples FROM pg_class WHERE relname = 'todos'"
            )
        facts["same_session"] = _look(endpoint_id, per_step)
        with connection.cursor() as cursor:
            cursor.execute("DISCARD PLANS")
        facts["discard_plans"] = _look(endpoint_id, per_step)
        seed.analyze("ours")
        facts["analyzed"] = _look(endpoint_id, per_step)
    finally:
        _stats_frozen(False)
    return facts


def generic_plan_check(endpoint_id: int, history: int, pending: int = 50) -> dict:
    """What-if: the claim as a server-side prepared statement whose *generic* plan was made
    while the tables were empty (what turning on prepared statements could do). SQL-level
    PREPARE with plan_cache_mode=force_generic_plan; reports the scans that cached plan uses
    once history is loaded without ANALYZE, and after ANALYZE (which invalidates it)."""
    from bench import seed
    from queues import sql

    params = claim_params(endpoint_id)
    order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql.CLAIM_NEXT)))
    text = sql.CLAIM_NEXT
    for i, key in enumerate(order, 1):
        text = text.replace(f"%({key})s", f"${i}")
    values = [params[k] for k in order]
    call = "EXECUTE bench_claim(" + ", ".join(["%s"] * len(values)) + ")"

    def run(prefix: str = "") -> list[str]:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(prefix + call, values)
                lines = [row[0] for row in cursor.fetchall()] if prefix else []
            transaction.set_rollback(True)
        return lines

    seed.truncate("ours")
    seed.analyze("ours")
    seed.add_pending("ours", endpoint_id, 20)
    out: dict = {}
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute("PREPARE bench_claim AS " + text)  # no params: no % processing
    try:
        for _ in range(3):
            run()  # the generic plan is made at the first execution, on empty tables
        explain_ = "EXPLAIN (ANALYZE, BUFFERS) "
        lines = run(explain_)
        out["empty"] = {"summary": summarize(lines), "scans": scan_line(summarize(lines))}
        seed.add_history("ours", endpoint_id, history)
        seed.add_pending("ours", endpoint_id, pending)
        lines = run(explain_)
        stale = summarize(lines)
        out["stale_stats"] = {"summary": stale, "scans": scan_line(stale)}
        out["explain_stale_stats"] = lines
        seed.analyze("ours")
        lines = run(explain_)
        fresh = summarize(lines)
        out["analyzed"] = {"summary": fresh, "scans": scan_line(fresh)}
        out["explain_analyzed"] = lines
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE name = 'bench_claim'"
            )
            out["plans_generic_custom"] = list(cursor.fetchone())
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DEALLOCATE bench_claim")
            cursor.execute("RESET plan_cache_mode")
    return out
