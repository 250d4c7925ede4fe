"""Plans: EXPLAIN (ANALYZE, BUFFERS) of the claim (rolled back) and what it scans (the growth
section's per-history look). The check of a plan cached while the tables were empty is
retired (docs/benchmarks.md, retired sections); tests/queues/test_attempt_plans.py pins the
hot plans over 200,000 attempts."""

from __future__ import annotations

import re

from django.db import connection, transaction

SCAN = re.compile(
    r"(Seq Scan|Index Only Scan|Index Scan(?: Backward)?|Bitmap Index Scan)(?: using (\S+))? on (\S+)"
)
KIND = {
    "Seq Scan": "SEQ SCAN",
    "Index Scan": "idx",
    "Index Scan Backward": "idx-bwd",
    "Index Only Scan": "idx-only",
    "Bitmap Index Scan": "bitmap",
}


def summarize(lines: list[str]) -> dict:
    """Each table's scans ('idx todos_claimable'; '(not run)' when never executed), the
    execution time, the top node's buffers, whether ``todo_attempts`` is read sequentially."""
    scans: dict[str, list[str]] = {}
    for line in lines:
        if m := SCAN.search(line):
            kind, index, table = m.groups()
            if kind == "Bitmap Index Scan":  # "Bitmap Index Scan on <index>"
                index = table
                table = next((t for t in ("todo_attempts", "todos") if index.startswith(t)), index)
            what = (
                KIND[kind]
                + (f" {index}" if index else "")
                + (" (not run)" if "never executed" in line else "")
            )
            if what not in scans.setdefault(table, []):
                scans[table].append(what)
    out: dict = {
        "scans": scans,
        "seq_scan_todo_attempts": "SEQ SCAN" in scans.get("todo_attempts", []),
    }
    for line in lines:
        if line.strip().startswith("Execution Time:"):
            out["execution_ms"] = float(line.split(":")[1].split()[0])
    if m := re.search(r"Buffers: shared hit=(\d+)(?: read=(\d+))?", "\n".join(lines[1:4])):
        out["buffers"] = int(m.group(1)) + int(m.group(2) or 0)
    return out


def scan_line(summary: dict) -> str:
    """'todos: idx todos_claimable, idx todos_pkey; todo_attempts: ...'."""
    return "; ".join(f"{t}: {', '.join(v)}" for t, v in summary["scans"].items()) or "no scans"


def claim_params(endpoint_id: int) -> dict:
    """The parameters claim_next's plan binds to its claim statement: its first step."""
    from queues import sql, transitions
    from queues.db import Atomic
    from queues.models import Endpoint

    actor = transitions.Actor.agent(Endpoint.objects.get(pk=endpoint_id))
    plan = transitions.claim_next_plan(actor)
    step = next(plan)
    plan.close()
    if isinstance(step, Atomic) or step.statement != sql.CLAIM_NEXT:
        raise RuntimeError("claim_next's plan no longer starts with its claim (admission limit?)")
    return dict(step.params)


def explain_claim(endpoint_id: int) -> tuple[list[str], dict]:
    """EXPLAIN (ANALYZE, BUFFERS) of one claim (queues.sql.CLAIM_NEXT), rolled back."""
    from queues import sql

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS) " + sql.CLAIM_NEXT.text, claim_params(endpoint_id)
        )
        lines = [row[0] for row in cursor.fetchall()]
        transaction.set_rollback(True)
    return lines, summarize(lines)
