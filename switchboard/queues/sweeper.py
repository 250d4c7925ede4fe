"""The sweeper: the background work no request does .

One pass reaps lapsed leases, requeues due retries, ends the waits of questions whose time
ran out, makes the todos of due schedules (``queues.schedules``), folds attempt endings into
the metric counters (``queues.metrics``), deletes terminal todos past retention, delivers the
outbox, and records itself in the one ``sweeper_status`` row.
Every step works in batches, each its own short transaction that takes its rows with
``FOR UPDATE SKIP LOCKED``, so several sweepers can run at once: they split the work instead of
queueing behind each other, and no row is handled twice. State changes go through
``queues.transitions``; retention deletes only terminal todos, which no transition moves.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial

import psycopg
from django.conf import settings
from django.db import Error as DatabaseError
from django.db import close_old_connections, connection, transaction

from switchboard.queues import counters, db, outbox, schedules, sql, transitions
from switchboard.queues.db import Statement
from switchboard.queues.db.availability import connection_params, log_failure
from switchboard.queues.models import TodoState

log = logging.getLogger("switchboard.sweeper")

REAP_BATCH = 100
RETRY_BATCH = 500
DELETE_BATCH = 1000


@dataclass(slots=True)
class SweepReport:
    """What one pass did. ``reaped`` counts every lapsed lease closed; the ones that spent
    the todo's last allowed attempt are also counted in ``dead_lettered_by_reap``."""

    reaped: int = 0
    dead_lettered_by_reap: int = 0
    requeued_retries: int = 0
    unanswered: int = 0  # questions whose time ran out (their todos requeued or dead)
    scheduled: int = 0  # todos made by schedules for their due slots
    released_dependents: int = 0  # todos made after others, released past a trigger's batch
    deleted_by_age: int = 0
    deleted_by_cap: int = 0
    dead_lettered_revoked: int = 0
    delivered: int = 0

    @property
    def did_work(self) -> bool:
        return any(asdict(self).values())

    def as_text(self) -> str:
        return " ".join(f"{name}={count}" for name, count in asdict(self).items())


def sweep_once(
    *,
    reap_batch: int = REAP_BATCH,
    retry_batch: int = RETRY_BATCH,
    delete_batch: int = DELETE_BATCH,
) -> SweepReport:
    """One full pass. Each step repeats its batch until a batch comes back short: the rows
    a short batch skipped are locked by another sweeper or claimer, which is handling them."""
    report = SweepReport()
    started = time.monotonic()
    _record_start()

    def reap() -> int:
        closed = transitions.reap_lapsed(batch=reap_batch)
        report.reaped += len(closed)
        report.dead_lettered_by_reap += sum(c.todo.state == TodoState.DEAD for c in closed)
        return len(closed)

    def requeue() -> int:
        count = transitions.requeue_due_retries(batch=retry_batch)
        report.requeued_retries += count
        return count

    def expire() -> int:
        count = len(transitions.expire_questions(batch=reap_batch))
        report.unanswered += count
        return count

    _drain(reap, reap_batch)
    _drain(requeue, retry_batch)
    _drain(expire, reap_batch)
    report.scheduled = sum(f.todo_id is not None for f in schedules.fire_due())
    report.released_dependents = transitions.release_leftovers()
    report.dead_lettered_revoked = transitions.dead_letter_revoked_leftovers()
    # Before retention, which deletes only todos that ended days ago, long since folded.
    counters.fold_attempt_endings()
    _refresh_stale_statistics()
    report.deleted_by_age = _delete_by_age(
        days=settings.SWITCHBOARD_RETENTION_DAYS, batch=delete_batch
    )
    report.deleted_by_cap = _delete_by_cap(
        cap=settings.SWITCHBOARD_RETENTION_MAX_TERMINAL, batch=delete_batch
    )
    report.delivered = outbox.deliver_due()

    elapsed_ms = round((time.monotonic() - started) * 1000)
    _record_finish({**asdict(report), "elapsed_ms": elapsed_ms})
    # One line per pass; idle passes at DEBUG so a quiet queue does not flood the log.
    log.log(
        logging.INFO if report.did_work else logging.DEBUG,
        "sweep pass %s elapsed_ms=%d",
        report.as_text(),
        elapsed_ms,
        extra={"sweep": asdict(report), "elapsed_ms": elapsed_ms},
    )
    return report


def run_forever(interval: float, stop_event: threading.Event) -> None:
    """Sweep every ``interval`` seconds until ``stop_event`` is set. Between passes it wakes
    for the next slot of a schedule and makes the due slots' todos alone (not a whole pass),
    so a slot's todo is made on time, not up to an interval late. A database error (the
    server restarting, a dropped connection) is logged and the pass retried next interval on
    a fresh connection, so the sweeper outlives a database restart."""
    log.info("sweeper started; a pass every %ss", interval)
    next_pass = time.monotonic()
    bell = _SweepBell()
    try:
        while not stop_event.is_set():
            due_in = None
            try:
                # Drop a connection past CONN_MAX_AGE or found broken, as a request would.
                close_old_connections()
                if time.monotonic() >= next_pass:
                    next_pass = time.monotonic() + interval
                    sweep_once()
                else:  # woken for a schedule's slot
                    schedules.fire_due()
                due_in = schedules.seconds_until_due()
            except DatabaseError as exc:
                log_failure(log, f"sweep pass failed; trying again in {interval}s", exc)
                _discard_connection()
                _record_failure(exc)
                next_pass = time.monotonic() + interval
            wait = max(0.0, next_pass - time.monotonic())
            if bell.wait(wait if due_in is None else min(wait, due_in), stop_event):
                next_pass = time.monotonic()  # work a trigger could not finish: a pass now
    finally:
        bell.close()
        _discard_connection()
        log.info("sweeper stopped")


class _SweepBell:
    """The sweeper's own LISTEN on ``switchboard_sweep``: a trigger that leaves work past its
    batch (todos_waits_follow, a prerequisite with more than 1,000 dependents) says so there,
    and the sweeper passes at once instead of at its next interval. Without the connection (the
    database away, a pooler that drops notifications) it waits out the interval as before."""

    SLICE_SECONDS = 1.0  # how often a wait looks at the stop event

    def __init__(self) -> None:
        self.conn: psycopg.Connection | None = None

    def wait(self, seconds: float, stop_event: threading.Event) -> bool:
        """Wait up to ``seconds`` (less when stopped); True when rung."""
        deadline = time.monotonic() + seconds
        if self.conn is None:
            try:
                self.conn = psycopg.connect(**connection_params(listen=True), autocommit=True)
                self.conn.execute(sql.LISTEN_SWEEP.text)
            except psycopg.Error:
                self.close()
                stop_event.wait(seconds)
                return False
        try:
            while not stop_event.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                for _ in self.conn.notifies(timeout=min(left, self.SLICE_SECONDS), stop_after=1):
                    return True
        except psycopg.Error:
            self.close()
            stop_event.wait(max(0.0, deadline - time.monotonic()))
        return False

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(psycopg.Error):
                self.conn.close()
        self.conn = None


# ---------------------------------------------------------------------------------------
# The one sweeper_status row, shared by every sweeper (queue health and /metrics read it).


def _record_start() -> None:
    db.fetch(sql.SWEEPER_STARTED, {})


def _record_finish(report: dict) -> None:
    """A finished pass: its time, what it did, and no error (a failure is cleared by the
    next pass that finishes)."""
    db.fetch(sql.SWEEPER_FINISHED, {"report": json.dumps(report)})


def _record_failure(exc: DatabaseError) -> None:
    """Why the last pass failed: the error's class and SQLSTATE only. A database message
    can quote row values (a todo's text), so none is kept; the log has the whole error."""
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    error = type(exc).__name__ + (f" (SQLSTATE {sqlstate})" if sqlstate else "")
    try:
        db.fetch(sql.SWEEPER_FAILED, {"error": error})
    except DatabaseError:
        # Most often the database is what failed; the log line above says so.
        log.debug("recording the failed pass failed too", exc_info=True)
        _discard_connection()


# ---------------------------------------------------------------------------------------
# Private helpers


def _drain(step: Callable[[], int], batch: int) -> int:
    total = 0
    while True:
        done = step()
        total += done
        if done < batch:
            return total


def _delete_by_age(*, days: int, batch: int) -> int:
    return _drain(partial(_delete, sql.RETENTION_BY_AGE, {"days": days, "batch": batch}), batch)


def _delete_by_cap(*, cap: int, batch: int) -> int:
    if cap == 0:  # 0 means no cap (README, Settings)
        return 0
    endpoint_ids = [row[0] for row in db.fetch(sql.ENDPOINTS_OVER_TERMINAL_CAP, {"cap": cap})]
    deleted = 0
    for endpoint_id in endpoint_ids:
        params = {"endpoint_id": endpoint_id, "cap": cap, "batch": batch}
        deleted += _drain(partial(_delete, sql.RETENTION_BY_CAP, params), batch)
    return deleted


def _delete(statement: Statement, params: dict) -> int:
    """One batch of terminal todos deleted (their attempts and events cascade in the
    database) in its own short transaction, so locks are held for one batch only."""
    with transaction.atomic(durable=True):
        return len(db.fetch(statement, params))


def _discard_connection() -> None:
    try:
        connection.close()
    except DatabaseError:
        # Closing a connection the server already dropped can fail; it is gone either way.
        log.debug("closing a broken database connection failed", exc_info=True)


def _refresh_stale_statistics() -> int:
    """ANALYZE todos / todo_attempts when they changed by more than their size since their
    statistics were taken (see sql.STALE_STATISTICS). Returns how many tables."""
    tables = [name for (name,) in db.fetch(sql.STALE_STATISTICS, {})]
    for table in tables:  # names come from the fixed list in the query
        db.fetch(sql.ANALYZE[table], {})
        log.info("analyzed %s: its statistics lagged behind its contents", table)
    return len(tables)
