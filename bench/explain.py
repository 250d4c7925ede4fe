"""Plans: EXPLAIN (ANALYZE, BUFFERS, WAL) of a statement, what a plan scans and writes, and
whether a plan the claim's prepared statement cached while the tables were empty outlives
the emptiness. Every EXPLAIN ANALYZE runs in a transaction that is rolled back."""

from __future__ import annotations

import re
import time

from django.db import connection, transaction

from queues.transitions import Actor

SCAN = re.compile(
    r"(Seq Scan|Index Only Scan|Index Scan(?: Backward)?|Bitmap Heap Scan|Bitmap Index Scan)"
    r"(?: using (\S+))? on (\S+)"
)
_WRITE = re.compile(r"(Insert|Update|Delete) on (\w+)")
_KIND = {
    "Seq Scan": "SEQ SCAN",
    "Index Scan": "idx",
    "Index Scan Backward": "idx-bwd",
    "Index Only Scan": "idx-only",
    "Bitmap Index Scan": "bitmap",
}


def summarize(lines: list[str]) -> dict:
    """Scans (kind, index, table, rows, loops), writes (node: its WAL records, fpi, bytes),
    planning/execution time and the top node's buffers."""
    scans, writes, node = [], {}, None
    for line in lines:
        if m := SCAN.search(line):
            kind, index, table = m.groups()
            if kind == "Bitmap Index Scan":  # "Bitmap Index Scan on <index>"
                index = table
                table = next((t for t in ("todo_attempts", "todos") if index.startswith(t)), index)
            rows = re.search(r"actual time=\S+ rows=(\d+)", line)
            loops = re.search(r"loops=(\d+)", line)
            scans.append(
                {
                    "kind": kind,
                    "index": index,
                    "table": table,
                    "rows": int(rows.group(1)) if rows else None,
                    "loops": int(loops.group(1)) if loops else None,
                    "never_executed": "never executed" in line,
                }
            )
        if "(cost=" in line or "(actual" in line:
            w = _WRITE.search(line)
            node = f"{w.group(1).lower()} {w.group(2)}" if w else None
        elif (wal := re.search(r"WAL: (.*)", line)) and node:
            got = dict(re.findall(r"(\w+)=(\d+)", wal.group(1)))
            mine = writes.setdefault(node, {"records": 0, "fpi": 0, "bytes": 0})
            for key in mine:
                mine[key] += int(got.get(key, 0))
    out: dict = {"scans": scans, "writes": writes}
    for line in lines:
        s = line.strip()
        for label, key in (("Planning Time:", "planning_ms"), ("Execution Time:", "execution_ms")):
            if s.startswith(label):
                out[key] = float(s.split(":")[1].split()[0])
    for line in lines[1:4]:
        if m := re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", line):
            out["buffers"] = int(m.group(1)) + int(m.group(2) or 0)
            break
    for table in ("todos", "todo_attempts"):
        out[f"seq_scan_{table}"] = any(
            s["kind"] == "Seq Scan" and s["table"] == table and not s["never_executed"]
            for s in scans
        )
    return out


def scan_line(summary: dict) -> str:
    """'todos: idx todos_claimable, idx todos_pkey; todo_attempts: idx-bwd todo_attempts_todo_seq'."""
    by_table: dict[str, list[str]] = {}
    for s in summary["scans"]:
        if s["table"] in ("todos", "todo_attempts") and s["kind"] != "Bitmap Heap Scan":
            what = _KIND.get(s["kind"], s["kind"]) + (f" {s['index']}" if s["index"] else "")
            what += " (not run)" if s["never_executed"] else ""
            if what not in by_table.setdefault(s["table"], []):
                by_table[s["table"]].append(what)
    return "; ".join(f"{t}: {', '.join(v)}" for t, v in by_table.items()) or "no scans"


def explain(text: str, params) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS, WAL) on Django's connection, in the caller's transaction."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, WAL) " + text, params)
        return [row[0] for row in cursor.fetchall()]


def claim_params(endpoint_id: int) -> dict:
    from queues.models import Endpoint
    from queues.transitions import Actor
    from queues.transitions.claim import _claim_params

    params, _token = _claim_params(
        Actor.agent(Endpoint.objects.get(pk=endpoint_id)), None, False, None, None
    )
    return params


def explain_claim(endpoint_id: int, statement=None) -> tuple[list[str], dict]:
    """EXPLAIN (ANALYZE, BUFFERS, WAL) of one claim (queues.sql.CLAIM_NEXT, or ``statement``),
    rolled back."""
    from queues import sql

    with transaction.atomic():
        lines = explain((statement or sql.CLAIM_NEXT).text, claim_params(endpoint_id))
        transaction.set_rollback(True)
    return lines, summarize(lines)


# --- a plan cached while the tables were empty ------------------------------------------------


def _prepared(statement) -> tuple[str, list[str]] | None:
    """This session's server-side prepared statement for ``statement`` (psycopg names it):
    its name and parameter names in $n order; None when not prepared here."""
    order: list[str] = []

    def placeholder(m: re.Match) -> str:
        if m.group(1) not in order:
            order.append(m.group(1))
        return f"${order.index(m.group(1)) + 1}"

    text = re.sub(r"%\((\w+)\)s", placeholder, statement.text).replace("%%", "%")
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE statement = %s", [text])
        row = cursor.fetchone()
    return (row[0], order) if row else None


def _look(endpoint, claims: int, *, explained: bool = True) -> dict:
    """``claims`` claim_next + complete on this session (the claim timed), then the plan its
    prepared statement runs now (EXPLAIN ... EXECUTE, rolled back) and its plan counts."""
    from queues import sql, transitions

    actor = transitions.Actor.agent(endpoint)
    lat = []
    for _ in range(claims):
        t = time.perf_counter()
        c = transitions.claim_next(Actor.agent(endpoint))
        lat.append(time.perf_counter() - t)
        transitions.complete(actor, c.todo.id, attempt_seq=c.attempt_seq, result={"ok": True})
    out = {"claim_p50_ms": round(sorted(lat)[len(lat) // 2] * 1000, 3)}
    found = _prepared(sql.CLAIM_NEXT)
    if found is None:
        return {**out, "scans": "not prepared on this session (SWITCHBOARD_PREPARED_STATEMENTS?)"}
    name, order = found
    params = claim_params(endpoint.pk)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = %s", [name]
        )
        generic, custom = cursor.fetchone()
    if not explained:
        return {**out, "scans": "(not explained)", "generic_custom": [generic, custom]}
    # psycopg deallocates every prepared statement at a ROLLBACK: this is its last use here
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"EXPLAIN (ANALYZE, BUFFERS) EXECUTE {name}({', '.join(['%s'] * len(order))})",
            [params[k] for k in order],
        )
        summary = summarize([row[0] for row in cursor.fetchall()])
        transaction.set_rollback(True)
    return {
        **out,
        "scans": scan_line(summary),
        "summary": summary,
        "generic_custom": [generic, custom],
    }


def plan_cache_check(endpoint_id: int, history: int, pending: int = 200) -> dict:
    """Claims on empty (ANALYZEd) tables in Django's session, so the claim's prepared
    statement caches its plans there; then ``history`` done todos with attempts and pending
    todos are loaded from another session with autovacuum paused (the statistics still say
    empty); then the SAME session: its claims on the plan cached while empty, and that plan;
    then again once re-prepared (psycopg deallocates its statements at the EXPLAIN's ROLLBACK)
    on the stale statistics; and after ANALYZE."""
    from bench import db, seed
    from queues.models import Endpoint

    endpoint = Endpoint.objects.get(pk=endpoint_id)
    step = pending // 4
    seed.truncate("ours")
    seed.analyze("ours")
    frozen = "ALTER TABLE {} SET (autovacuum_enabled = {})"
    for table in seed.SYSTEM_TABLES["ours"]:
        db.with_cursor(frozen.format(table, "false"))
    try:
        seed.add_pending("ours", endpoint_id, 20 + step)
        # more than 5 runs: PostgreSQL may then keep a generic plan
        out = {"empty": _look(endpoint, 20 + step, explained=False)}
        with db.connect() as side, seed.via(side):
            seed.add_history("ours", endpoint_id, history)
            seed.add_pending("ours", endpoint_id, 3 * step)
            out["reltuples_todos"] = seed._scalar(
                "SELECT reltuples FROM pg_class WHERE relname = 'todos'"
            )
        out["stale"] = _look(endpoint, step)
        out["reprepared"] = _look(endpoint, step)
        seed.analyze("ours")
        out["analyzed"] = _look(endpoint, step)
    finally:
        for table in seed.SYSTEM_TABLES["ours"]:
            db.with_cursor(frozen.format(table, "true"))
    return out


def plan_cache_lines(pc: dict, history: int) -> list[str]:
    def look(label: str, d: dict) -> str:
        s = d.get("summary") or {}
        counts = d.get("generic_custom")
        return (
            f"  {label}: claim p50 {d['claim_p50_ms']:.2f} ms; plan now: {d['scans']}"
            + (f"; buffers {s.get('buffers')}, execution {s.get('execution_ms')} ms" if s else "")
            + (f"; generic/custom plans so far {counts[0]}/{counts[1]}" if counts else "")
        )

    return [
        "Plans made while the tables were empty: the claim's prepared statement (queues.db) runs "
        f"on empty ANALYZEd tables in one session, then {history:,} history rows + pending",
        "todos are loaded from another session with autovacuum paused, so the statistics still "
        f"say empty (reltuples todos={pc['reltuples_todos']:.0f}); then, in the SAME session:",
        look("empty tables             ", pc["empty"]),
        look("history, stale statistics", pc["stale"]),
        look("re-prepared, still stale ", pc["reprepared"]),
        look("after ANALYZE            ", pc["analyzed"]),
        "  (generic/custom = plans PostgreSQL made for the statement so far; ANALYZE invalidates "
        "cached plans, and the sweeper ANALYZEs a table that outgrew its statistics: "
        "tests/queues/test_sql.py)",
    ]
