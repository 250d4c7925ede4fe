"""Operators' numbers: ``/metrics`` in the Prometheus text format, and the counters behind it.

Counters must survive a restart and agree across every web process, so they live in the
database (``metric_counters``), never in one process's memory:

- **Attempts closed, by outcome.** The sweeper folds attempt endings into
  ``metric_counters`` (``fold_attempt_endings``): each pass counts the attempts that ended
  since the last fold, up to a second ago and never past a transaction still open (whose
  closes would commit behind the mark), under a lock on the one ``sweeper_status`` row, so two
  sweepers never count a window twice. Rows the per-todo history cap prunes before they are
  counted leave their counts, and when they ended, in ``metric_deltas`` for the fold (which
  counts those that ended in its window); retention deletes only todos
  already counted. So every close is counted exactly once, and the counters trail reality by
  about one sweep interval.
- **Questions ended, and the time to answer** (issue 43). The same fold, in the same window
  and transaction, counts the questions that ended (``questions_ended_total`` by ending:
  answered, unanswered, withdrawn) and puts each answered one's wait, asked to answered, in a
  histogram (``time_to_answer_*``). Questions asked are the attempts closed ``asked``.
- **Claim latency.** Each web process times its claim calls in memory (no query on the claim
  path) and adds the deltas to ``metric_counters`` in one statement: at every scrape it
  serves, and from a daemon thread every ``FLUSH_INTERVAL_SECONDS`` while it has any. Deltas
  not yet flushed when a process dies are lost (at most that interval's worth).

A scrape reads those rows plus a few cheap aggregates (todos by state, todos waiting on
people per endpoint, the outbox backlog, the sweeper's last pass) and renders them with a fresh ``CollectorRegistry``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from bisect import bisect_left
from dataclasses import dataclass, field

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from prometheus_client.utils import floatToGoString

from switchboard.queues import db, sql
from switchboard.queues.db import Fetch, Plan
from switchboard.queues.db.availability import log_failure
from switchboard.queues.models import (
    SweeperStatus,
)

log = logging.getLogger("switchboard.metrics")

# How far behind the database clock the fold stops at the least (it also stops at the start
# of any transaction still open, see _FOLD_HORIZON). Tests set it to 0.
FOLD_LAG_SECONDS = 1.0
# How often a web process's background thread writes its claim latency deltas.
FLUSH_INTERVAL_SECONDS = 10.0
# A scrape waits this long for a flush already under way in its process (so it reports every
# claim made before it), then reads without it.
SCRAPE_FLUSH_WAIT_SECONDS = 2.0


def bucket_label(upper: float) -> str:
    return f"le={floatToGoString(upper)}"


@dataclass(frozen=True, slots=True)
class Histogram:
    """A histogram kept in metric_counters: a row ``{name}_bucket`` a bound (cumulative,
    labelled by bucket_label), ``{name}_sum`` and ``{name}_count``; +Inf is implied."""

    name: str
    bounds: tuple[float, ...]  # upper bounds, in seconds

    @property
    def bucket(self) -> str:
        return f"{self.name}_bucket"

    @property
    def total(self) -> str:
        return f"{self.name}_sum"

    @property
    def count(self) -> str:
        return f"{self.name}_count"

    @property
    def labels(self) -> list[str]:
        return [bucket_label(upper) for upper in self.bounds]

    def names(self) -> dict[str, object]:
        """The statement parameters that fold into it (sql.FOLD_QUESTION_ENDINGS)."""
        return {
            "bucket_name": self.bucket,
            "sum_name": self.total,
            "count_name": self.count,
            "uppers": list(self.bounds),
            "labels": self.labels,
        }


# metric_counters names.
ATTEMPTS_CLOSED = "attempts_closed_total"
QUESTIONS_ENDED = "questions_ended_total"
CLAIM_LATENCY = Histogram(
    "claim_latency",
    (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
# 10 s to 30 days, the longest a question may be given (+Inf: one asked without a limit,
# answered later still).
TIME_TO_ANSWER = Histogram(
    "time_to_answer",
    (10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0,
     3 * 86400.0, 7 * 86400.0, 30 * 86400.0),
)  # fmt: skip


# ---------------------------------------------------------------------------------------
# Attempt endings, folded by the sweeper


def fold_attempt_endings(*, lag_seconds: float | None = None) -> dict[str, int]:
    """Add the attempts that ended since the last fold to the ``attempts_closed_total``
    counters and move the mark: up to ``lag_seconds`` ago by the database clock, and not past
    any transaction still open (see queues/sql/counters.py FOLD_HORIZON), plus what history
    pruning carried over (metric_deltas, each with when its attempts ended: counted if in the
    window, dropped if before it, kept if after). One transaction, under a lock on the
    sweeper_status row: a second sweeper waits, then sees the moved mark. So every close is
    counted exactly once, however soon its row is pruned (queues/sql/claim.py, its `carried`
    arm) or deleted by retention (which deletes only counted rows). Returns the counts added,
    by outcome.

    The questions that ended in the same window are folded in the same transaction, so the
    same argument counts each once: ``questions_ended_total`` by ending, and the answered
    ones' waits into the time to answer histogram (queues/sql/counters.py
    ``FOLD_QUESTION_ENDINGS``)."""
    lag = FOLD_LAG_SECONDS if lag_seconds is None else lag_seconds
    with transaction.atomic(durable=True):
        SweeperStatus.objects.bulk_create([SweeperStatus(id=1)], ignore_conflicts=True)
        since = (
            SweeperStatus.objects.select_for_update()
            .filter(pk=1)
            .values_list("metrics_folded_until", flat=True)
            .get()
        )
        [(until,)] = db.fetch(sql.FOLD_HORIZON, {"lag": lag})
        if since is not None and until < since:
            until = since  # the clock went back, or a transaction holds the horizon back
        rows = db.fetch(
            sql.FOLD_ATTEMPT_ENDINGS, {"since": since, "until": until, "name": ATTEMPTS_CLOSED}
        )
        added = {outcome: n for outcome, n in rows if n}
        db.fetch(
            sql.FOLD_QUESTION_ENDINGS,
            {
                "since": since,
                "until": until,
                "ended_name": QUESTIONS_ENDED,
                **TIME_TO_ANSWER.names(),
            },
        )
        SweeperStatus.objects.filter(pk=1).update(metrics_folded_until=until)
    return added


# ---------------------------------------------------------------------------------------
# Claim latency: in memory per process, flushed into metric_counters


@dataclass(slots=True)
class _Deltas:
    counts: list[int]  # per bucket, not cumulative; the last is over the largest bound
    total: float = 0.0

    def rows(self) -> list[tuple[str, str, float]]:
        rows, cumulative = [], 0
        for label, count in zip(CLAIM_LATENCY.labels, self.counts, strict=False):
            cumulative += count
            rows.append((CLAIM_LATENCY.bucket, label, float(cumulative)))
        rows.append((CLAIM_LATENCY.count, "", float(sum(self.counts))))
        rows.append((CLAIM_LATENCY.total, "", self.total))
        return sorted(rows)

    @classmethod
    def none(cls) -> _Deltas:
        return cls(counts=[0] * (len(CLAIM_LATENCY.bounds) + 1))


class ClaimLatency:
    """This process's claim latency observations not yet written to the database. Observing
    is a few list operations under a lock; nothing here queries on the claim path."""

    def __init__(self) -> None:
        self._reset()
        # A forked worker starts with nothing to flush and no thread: the parent's deltas
        # are the parent's to write.
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self.flush_lock = threading.Lock()  # one flush at a time in this process
        self._deltas = _Deltas.none()
        self._thread: threading.Thread | None = None

    def observe(self, seconds: float) -> None:
        # Recorded only while /metrics is on: nobody reads them otherwise.
        if not settings.SWITCHBOARD_METRICS_TOKEN:
            return
        index = bisect_left(CLAIM_LATENCY.bounds, seconds)
        with self._lock:
            self._deltas.counts[index] += 1
            self._deltas.total += seconds
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._flush_every_interval, name="claim-latency-flush", daemon=True
                )
                self._thread.start()

    @property
    def pending(self) -> bool:
        with self._lock:
            return any(self._deltas.counts)

    def take(self) -> _Deltas | None:
        with self._lock:
            if not any(self._deltas.counts):
                return None
            taken, self._deltas = self._deltas, _Deltas.none()
            return taken

    def give_back(self, deltas: _Deltas) -> None:
        with self._lock:
            for index, count in enumerate(deltas.counts):
                self._deltas.counts[index] += count
            self._deltas.total += deltas.total

    def _flush_every_interval(self) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_SECONDS)
            with self._lock:
                if not settings.SWITCHBOARD_METRICS_TOKEN:
                    # /metrics was turned off (tests restore their settings): stop; the next
                    # observation while it is on starts a new thread.
                    self._deltas = _Deltas.none()
                    self._thread = None
                    return
            if not self.pending:
                continue
            try:
                close_old_connections()
                flush_claim_latency()
            except Exception as exc:  # the database is away: the deltas were given back
                log_failure(log, "claim latency flush failed; kept for the next try", exc)
            finally:
                try:
                    connection.close()  # this thread's own; back to the pool between flushes
                except Exception:
                    log.debug("closing the flush thread's connection failed", exc_info=True)


claim_latency = ClaimLatency()


def flush_claim_latency(*, wait: float | None = None) -> bool:
    """Write this process's claim latency deltas (one statement). Waits for a flush already
    under way (up to ``wait`` seconds, ``None``: as long as it takes) so that, once this
    returns True or False, every claim observed before the call is in the database.
    Returns whether anything was written; False too when the wait ran out."""
    if not claim_latency.flush_lock.acquire(timeout=-1 if wait is None else wait):
        return False
    try:
        return db.run(_flush_plan())
    finally:
        claim_latency.flush_lock.release()


async def aflush_claim_latency(*, wait: float) -> bool:
    """``flush_claim_latency`` on the event loop (a scrape): the wait for a flush under way
    polls its lock, and the statement runs on the async pool."""
    deadline = time.monotonic() + wait
    while not claim_latency.flush_lock.acquire(blocking=False):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.01)
    try:
        return await db.arun(_flush_plan())
    finally:
        claim_latency.flush_lock.release()


def _flush_plan() -> Plan[bool]:
    deltas = claim_latency.take()
    if deltas is None:
        return False
    names, labels, values = zip(*deltas.rows(), strict=True)
    try:
        yield Fetch(
            sql.ADD_COUNTERS,
            {"names": list(names), "labels": list(labels), "values": list(values)},
        )
    except BaseException:
        claim_latency.give_back(deltas)
        raise
    return True


# ---------------------------------------------------------------------------------------
# A scrape


@dataclass(frozen=True, slots=True)
class EndpointWaiting:
    """An endpoint (not revoked) and how many of its todos wait on people now."""

    team: str  # the team's slug
    agent_id: str
    todos: int


@dataclass(slots=True)
class Snapshot:
    """What one scrape reports, read in five queries."""

    counters: dict[tuple[str, str], float] = field(default_factory=dict)
    todos_by_state: dict[str, int] = field(default_factory=dict)
    waiting: list[EndpointWaiting] = field(default_factory=list)
    outbox_pending: dict[str, int] = field(default_factory=dict)
    sweeper_passes: int = 0
    sweeper_lag_seconds: float | None = None  # None: no pass has finished yet


def read_snapshot_plan() -> Plan[Snapshot]:
    """What a scrape reports, in five statements whose number does not grow with the rows:
    the counter rows (a handful: outcomes, endings, histogram buckets), todos by state, todos
    waiting on people per endpoint (an index range each), the deliveries still to send (the
    outbox's partial index of due rows), and the sweeper's last pass."""
    snapshot = Snapshot()
    for name, label, value in (yield Fetch(sql.METRIC_COUNTERS, {})):
        snapshot.counters[(name, label)] = value
    snapshot.todos_by_state = dict((yield Fetch(sql.TODOS_BY_STATE, {})))
    snapshot.waiting = [
        EndpointWaiting(team, agent_id, todos)
        for team, agent_id, todos in (yield Fetch(sql.ENDPOINTS_WAITING, {}))
    ]
    snapshot.outbox_pending = dict((yield Fetch(sql.OUTBOX_PENDING, {})))
    for passes, lag in (yield Fetch(sql.SWEEPER_LAG, {})):
        snapshot.sweeper_passes = passes
        if lag is not None:
            snapshot.sweeper_lag_seconds = max(0.0, lag)
    return snapshot
