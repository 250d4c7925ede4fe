"""Schedules due at once (section ``schedules``; issue 44's bar: 1,000 schedules due in the same
minute across 3 sweepers, every slot's todo made within 1 s of its time, exactly once). How
each minute is judged: docs/benchmarks.md, "Schedules"."""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from datetime import UTC, timedelta

from bench import db, seed
from bench.ledger import latency
from bench.table import f2, log, pp, table, verdict

BAR_SECONDS = 1.0
OPTIONS = [  # flag, type, default, --quick's, help
    ("--schedules", int, 1000, 200, "schedules due in the same minute"),
    ("--schedule-sweepers", int, 3, 3, "sweeper processes"),
    ("--schedule-minutes", int, 3, 1, "consecutive minutes measured"),
]
SLOT = """
  FROM todos t JOIN schedules s ON s.id = t.schedule_id
 WHERE s.endpoint_id = %s AND t.scheduled_for = %s
"""
LAGS = "SELECT extract(epoch FROM t.created_at - t.scheduled_for)::float8" + SLOT
SLOTS = "SELECT count(*), count(DISTINCT t.schedule_id)" + SLOT  # one slot: a todo a schedule
SEEN = "SELECT count(*), statement_timestamp()" + SLOT


def run_section(ctx) -> dict:
    from switchboard.queues import schedules
    from switchboard.queues.models import Endpoint, Schedule
    from switchboard.queues.schedules import OPERATOR

    args, t = ctx.args, time.monotonic()
    endpoint = Endpoint.objects.get(pk=seed.vend("bench-schedules")[0])
    for n in range(args.schedules):
        every = {"cron": "* * * * *", "title_template": "{name} {date}"}
        schedules.add(endpoint, by=OPERATOR, name=f"s{n}", **every)
    log(f"schedules: {args.schedules:,} added in {time.monotonic() - t:.1f} s")
    # The first measured minute: at least 15 s away, so the sweepers are up before it.
    now = db.one("SELECT statement_timestamp()").astimezone(UTC) + timedelta(seconds=75)
    first = now.replace(second=0, microsecond=0)
    Schedule.objects.filter(endpoint=endpoint).update(next_run_at=first)
    rows = []
    with ExitStack() as sweepers:
        for n in range(args.schedule_sweepers):
            log_path = db.RESULTS / f"schedules-sweeper{n}-{ctx.stamp}.log"
            sweepers.enter_context(db.Spawned(log_path, "sweep", "--interval", "5"))
        for slot in (first + timedelta(minutes=m) for m in range(args.schedule_minutes)):
            seen = _watch(endpoint.pk, slot, args.schedules)
            lags = [row[0] for row in db.rows(LAGS, (endpoint.pk, slot))]
            total, distinct = db.rows(SLOTS, (endpoint.pk, slot))[0]
            rows.append(
                {
                    "slot": slot.isoformat(),
                    "made": total,
                    "once": total == distinct == args.schedules,
                    "created": latency(lags, 50, 95, 99),
                    "first_ms": round(min(lags) * 1000, 3) if lags else None,
                    "all_seen_s": seen,
                }
            )
            log(f"schedules: {slot:%H:%M} made {total}, all seen after {seen} s")
    note = {"schedules": args.schedules, "sweepers": args.schedule_sweepers, "rows": rows}
    return note | {"cpus": os.cpu_count(), "load": [round(x, 2) for x in os.getloadavg()]}


def _watch(endpoint_id: int, slot, expected: int) -> float | None:
    """Seconds from ``slot`` (the database's clock) until a connection of its own first sees
    ``expected`` committed todos of that slot; None if not within 90 s of it."""
    with db.connect() as conn:
        while True:
            count, now = conn.execute(SEEN, (endpoint_id, slot)).fetchone()
            if count >= expected:
                return round((now - slot).total_seconds(), 3)
            if (now - slot).total_seconds() > 90:
                return None
            time.sleep(0.01)


def met(row: dict) -> bool:
    """A minute meets the bar: one todo a slot, every one created and committed within it."""
    c, seen = row["created"], row["all_seen_s"]
    on_time = c["max_ms"] is not None and c["max_ms"] <= BAR_SECONDS * 1000
    return row["once"] and on_time and seen is not None and seen <= BAR_SECONDS


def worst(note: dict) -> float | None:
    """The slowest minute's seconds until all its todos were committed (None: one never was)."""
    seen = [r["all_seen_s"] for r in note["rows"]]
    return None if not seen or None in seen else max(seen)


def render(note: dict) -> str:
    rows = []
    for r in note["rows"]:
        made = [
            r["slot"][11:16],
            f"{r['made']:,}",
            "yes" if r["once"] else "NO",
            f2(r.get("first_ms")),
        ]
        seen = "-" if r["all_seen_s"] is None else f"{r['all_seen_s'] * 1000:.0f}"
        rows.append([*made, *pp(r["created"], "p50", "p95", "p99", "max").split("/"), seen])
    headers = "minute (UTC)|todos made|once each|first ms|p50|p95|p99|max|all committed ms"
    verdict_ = verdict(all(met(r) for r in note["rows"]))
    return "\n".join(
        [
            f"Schedules due at once: {note['schedules']:,} every-minute schedules on one "
            f"endpoint, {note['sweepers']} `switchboard sweep` processes, {note['cpus']} CPUs; "
            "a todo's lag is its created_at after its slot (first: the earliest, so the "
            "sweepers' waking); all committed is when a separate connection first saw every one",
            "",
            *table(headers.split("|"), rows),
            f"bar: every todo created and committed within {BAR_SECONDS:.0f} s of its slot, one "
            f"per slot => {verdict_}; load average at the end {note.get('load')}",
        ]
    )
