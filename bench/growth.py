"""Claim cost as history grows (section ``growth``; SPEC: claim cost must not grow with history):
the same drain at a small and a large history, judged on CPU and buffers per todo and sequential
scans of ``todo_attempts`` (docs/benchmarks.md, "The summary")."""

from __future__ import annotations

from bench import db, seed
from bench.ledger import median, per_todo
from bench.table import f, f2, ints, log, table, verdict
from bench.workers import DrainFailed

BAR = {"cpu": 1.25, "buffers": 1.5}  # the large history's per todo / the small's, at most
OPTIONS = [  # flag, type, default, --quick's, help
    ("--growth-history", ints, [10_000, 200_000], [10_000, 50_000], "history rows, small,large"),
    ("--growth-todos", int, 1500, 300, "todos per drain"),
    ("--growth-workers", int, 4, 4, "worker processes"),
    ("--growth-reps", int, 3, 3, "drains per history, after one not recorded"),
]
COUNTERS = """
SELECT coalesce(sum(s.seq_scan) FILTER (WHERE s.relname = 'todo_attempts'), 0),
       coalesce(sum(io.heap_blks_hit + io.heap_blks_read + coalesce(io.idx_blks_hit, 0)
                    + coalesce(io.idx_blks_read, 0)), 0)
  FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid)
 WHERE s.relname IN ('todos', 'todo_attempts')
"""


def counters() -> list[int]:
    """Sequential scans of todo_attempts, and buffers touched in both tables, so far."""
    return [int(x) for x in db.rows(COUNTERS)[0]]


def run_section(ctx) -> dict:
    args, rows, n = ctx.args, [], ctx.args.growth_todos
    for history in args.growth_history:
        scenario = seed.Scenario(ctx.endpoint_id, history)
        scenario.build()
        drains = []
        for rep in range(args.growth_reps + 1):
            after = scenario.reset(n)
            s = ctx.pool.drain(args.growth_workers, "ours", ctx.endpoint_id, probe=counters)
            if s["n"] != n or seed.unfinished(after):
                raise DrainFailed(f"growth at {history:,}: drained {s['n']} of {n}")
            s["counters"] = [a - b for a, b in zip(s["after"], s["before"], strict=True)]
            drains += [s] if rep else []  # the first warms the workers up
        cpu = median(per_todo(s["client_cpu"] + (s["pg_cpu"] or 0), n) for s in drains)
        row = {"history": history, "todos_per_s": median(s["n"] / s["wall"] for s in drains)}
        row |= {"cpu_ms_per_todo": cpu, "seq_scans": sum(s["counters"][0] for s in drains)}
        rows.append(row | {"buffers_per_todo": median(s["counters"][1] / n for s in drains)})
        log(f"growth {history:,}: {rows[-1]['cpu_ms_per_todo']:.2f} ms CPU a todo")
    return {"todos": n, "workers": args.growth_workers, "reps": args.growth_reps, "rows": rows}


def judge(note: dict) -> dict:
    """The large history's CPU and buffers per todo over the small's; the bar."""
    small, large = note["rows"][0], note["rows"][-1]
    cpu = large["cpu_ms_per_todo"] / small["cpu_ms_per_todo"]
    buffers = large["buffers_per_todo"] / small["buffers_per_todo"]
    seq = sum(r["seq_scans"] for r in note["rows"])
    met = cpu <= BAR["cpu"] and buffers <= BAR["buffers"] and not seq
    return {"cpu": cpu, "buffers": buffers, "seq_scans": seq, "met": met}


def render(note: dict) -> str:
    rows = []
    for r in note["rows"]:
        figures = [
            f(r["todos_per_s"]),
            f2(r["cpu_ms_per_todo"]),
            f(r["buffers_per_todo"], "{:.1f}"),
        ]
        rows.append([f"{r['history']:,}", *figures, r["seq_scans"]])
    j, h = judge(note), "history|todos/s|CPU ms/todo|buffers/todo|seq scans of todo_attempts"
    return "\n".join(
        [
            f"Claim cost as history grows: claim_next + complete through queues.transitions, "
            f"{note['todos']:,} todos a drain, {note['workers']} workers, median of "
            f"{note['reps']} drains; {db.code_line(note['git'])}",
            "",
            *table(h.split("|"), rows),
            f"large/small: CPU x{f2(j['cpu'])} (bar <= {BAR['cpu']}), buffers x{f2(j['buffers'])}"
            f" (bar <= {BAR['buffers']}), {j['seq_scans']} seq scans (bar: none) => "
            + verdict(j["met"]),
        ]
    )
