"""Schedules due at once (section ``schedules``; issue 44's bar: 1,000 schedules due in the same
minute across 3 sweepers, every slot's todo made within 1 s of its time, exactly once).

N schedules on one endpoint, every minute (``* * * * *``), all due at the same minute; three
``switchboard sweep`` processes (the shipped command, waking for the next slot) run through
``--minutes`` consecutive minutes. Each minute is judged on the todos the database holds:
each slot's todo's ``created_at`` (its insert's statement time) minus its slot, and when a
poller on its own connection first saw all N committed; and exactly once: N todos a minute,
one per (schedule, slot)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta

from bench import db, seed
from bench.httpbench import switchboard_command
from bench.ledger import latency
from bench.table import f2, log, table, verdict

BAR_SECONDS = 1.0
OPTIONS = [  # flag, type, default, --quick's, help
    ("--schedules", int, 1000, 200, "schedules due in the same minute"),
    ("--schedule-sweepers", int, 3, 3, "sweeper processes"),
    ("--schedule-minutes", int, 3, 1, "consecutive minutes measured"),
]
LAGS = """
SELECT extract(epoch FROM t.created_at - t.scheduled_for)::float8
  FROM todos t JOIN schedules s ON s.id = t.schedule_id
 WHERE s.endpoint_id = %s AND t.scheduled_for = %s
"""
SLOTS = """
SELECT count(*), count(DISTINCT t.schedule_id), count(DISTINCT (t.schedule_id, t.scheduled_for))
  FROM todos t JOIN schedules s ON s.id = t.schedule_id
 WHERE s.endpoint_id = %s AND t.scheduled_for = %s
"""
SEEN = """
SELECT count(*), statement_timestamp()
  FROM todos t JOIN schedules s ON s.id = t.schedule_id
 WHERE s.endpoint_id = %s AND t.scheduled_for = %s
"""


def run_section(ctx) -> dict:
    from switchboard.queues import schedules
    from switchboard.queues.models import Endpoint, Schedule
    from switchboard.queues.schedules import OPERATOR

    args = ctx.args
    endpoint = Endpoint.objects.get(pk=seed.vend("bench-schedules")[0])
    t = time.monotonic()
    for n in range(args.schedules):
        schedules.add(
            endpoint, by=OPERATOR, name=f"s{n}", cron="* * * * *", title_template="{name} {date}"
        )
    log(f"schedules: {args.schedules:,} added in {time.monotonic() - t:.1f} s")
    # The first measured minute: at least 15 s away, so the sweepers are up before it.
    first = _minute_after(_db_now() + timedelta(seconds=15))
    Schedule.objects.filter(endpoint=endpoint).update(next_run_at=first)
    slots = [first + timedelta(minutes=m) for m in range(args.schedule_minutes)]
    sweepers = [_sweeper(ctx, n) for n in range(args.schedule_sweepers)]
    rows = []
    try:
        for slot in slots:
            seen = _watch(endpoint.pk, slot, args.schedules)
            lags = [row[0] for row in _rows(LAGS, (endpoint.pk, slot))]
            total, distinct_schedules, distinct_slots = _rows(SLOTS, (endpoint.pk, slot))[0]
            rows.append(
                {
                    "slot": slot.isoformat(),
                    "made": total,
                    "once": total == distinct_slots == distinct_schedules == args.schedules,
                    "created": latency(lags, 50, 95, 99),
                    "first_ms": round(min(lags) * 1000, 3) if lags else None,
                    "all_seen_s": seen,
                }
            )
            log(f"schedules: {slot:%H:%M} made {total}, all seen after {seen} s")
    finally:
        for proc, log_file in sweepers:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            log_file.close()
    return {
        "schedules": args.schedules,
        "sweepers": args.schedule_sweepers,
        "rows": rows,
        "cpus": os.cpu_count(),
        "load": [round(x, 2) for x in os.getloadavg()],
    }


def _minute_after(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=1)


def _db_now() -> datetime:
    return db.with_cursor("SELECT statement_timestamp()")[0].astimezone(UTC)


def _rows(statement: str, params) -> list:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


def _sweeper(ctx, n: int):
    path = db.RESULTS / f"schedules-sweeper{n}-{ctx.stamp}.log"
    log_file = open(path, "wb")  # noqa: SIM115 - closed when the section ends
    proc = subprocess.Popen(
        [switchboard_command(), "sweep", "--interval", "5"],
        cwd=db.ROOT,
        env=dict(os.environ, SWITCHBOARD_DEV="1", LOG_LEVEL="WARNING"),
        stdin=subprocess.DEVNULL,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    return proc, log_file


def _watch(endpoint_id: int, slot: datetime, expected: int) -> float | None:
    """Seconds from ``slot`` (the database's clock) until a connection of its own first sees
    ``expected`` committed todos of that slot; None if not within 90 s of it."""
    found: list[float | None] = [None]

    def poll() -> None:
        with db.connect() as conn:
            while True:
                count, now = conn.execute(SEEN, (endpoint_id, slot)).fetchone()
                if count >= expected:
                    found[0] = round((now - slot).total_seconds(), 3)
                    return
                if (now - slot).total_seconds() > 90:
                    return
                time.sleep(0.01)

    watcher = threading.Thread(target=poll, name="schedules-watch")
    watcher.start()
    watcher.join()
    return found[0]


def met(row: dict) -> bool:
    """A minute meets the bar: one todo a slot, every one created and committed within it."""
    c = row["created"]
    return (
        row["once"]
        and c["max_ms"] is not None
        and c["max_ms"] <= BAR_SECONDS * 1000
        and row["all_seen_s"] is not None
        and row["all_seen_s"] <= BAR_SECONDS
    )


def worst(note: dict) -> float | None:
    """The slowest minute's seconds until all its todos were committed (None: one never was)."""
    seen = [r["all_seen_s"] for r in note["rows"]]
    return None if not seen or None in seen else max(seen)


def render(note: dict) -> str:
    rows = []
    for r in note["rows"]:
        c = r["created"]
        rows.append(
            [
                r["slot"][11:16],
                f"{r['made']:,}",
                "yes" if r["once"] else "NO",
                f2(r.get("first_ms")),
                f2(c["p50_ms"]),
                f2(c["p95_ms"]),
                f2(c["p99_ms"]),
                f2(c["max_ms"]),
                "-" if r["all_seen_s"] is None else f"{r['all_seen_s'] * 1000:.0f}",
            ]
        )
    headers = "minute (UTC)|todos made|once each|first ms|p50|p95|p99|max|all committed ms"
    return "\n".join(
        [
            f"Schedules due at once: {note['schedules']:,} every-minute schedules on one "
            f"endpoint, {note['sweepers']} `switchboard sweep` processes, {note['cpus']} CPUs; "
            "a todo's lag is its created_at after its slot (first: the earliest, so the "
            "sweepers' waking); all committed is when a separate connection first saw every one",
            "",
            *table(headers.split("|"), rows),
            f"bar: every todo created and committed within {BAR_SECONDS:.0f} s of its slot, "
            f"one per slot => {verdict(all(met(r) for r in note['rows']))}; load average at the end {note.get('load')}",
        ]
    )
