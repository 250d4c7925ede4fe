"""Operators' numbers: ``/metrics`` in the Prometheus text format, and the counters behind it.

Counters must survive a restart and agree across every web process, so they live in the
database (``metric_counters``), never in one process's memory:

- **Attempts closed, by outcome.** The sweeper folds attempt endings into
  ``metric_counters`` (``fold_attempt_endings``): each pass counts the attempts that ended
  since the last fold, up to a second ago and never past a transaction still open (whose
  closes would commit behind the mark), under a lock on the one ``sweeper_status`` row, so two
  sweepers never count a window twice. Rows the per-todo history cap prunes before they are
  counted leave their counts in ``metric_deltas`` for the fold; retention deletes only todos
  already counted. So every close is counted exactly once, and the counters trail reality by
  about one sweep interval.
- **Claim latency.** Each web process times its claim calls in memory (no query on the claim
  path) and adds the deltas to ``metric_counters`` in one statement: at every scrape it
  serves, and from a daemon thread every ``FLUSH_INTERVAL_SECONDS`` while it has any. Deltas
  not yet flushed when a process dies are lost (at most that interval's worth).

A scrape reads those rows plus a few cheap aggregates (todos by state, the outbox backlog,
the sweeper's last pass) and renders them with a fresh ``CollectorRegistry``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Q
from django.db.models.functions import Now
from django.http import Http404, HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from queues.models import (
    Delivery,
    Endpoint,
    MetricCounter,
    Outcome,
    SweeperStatus,
    Todo,
    TodoAttempt,
    TodoState,
)

log = logging.getLogger("switchboard.metrics")

# Upper bounds of the claim latency buckets, in seconds (+Inf is implied).
BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
# How far behind the database clock the fold stops at the least (it also stops at the start
# of any transaction still open, see _FOLD_HORIZON). Tests set it to 0.
FOLD_LAG_SECONDS = 1.0
# How often a web process's background thread writes its claim latency deltas.
FLUSH_INTERVAL_SECONDS = 10.0
# A scrape waits this long for a flush already under way in its process (so it reports every
# claim made before it), then reads without it.
SCRAPE_FLUSH_WAIT_SECONDS = 2.0

# metric_counters names.
ATTEMPTS_CLOSED = "attempts_closed_total"
CLAIM_LATENCY_BUCKET = "claim_latency_bucket"
CLAIM_LATENCY_SUM = "claim_latency_sum"
CLAIM_LATENCY_COUNT = "claim_latency_count"


def bucket_label(upper: float) -> str:
    return f"le={floatToGoString(upper)}"


# ---------------------------------------------------------------------------------------
# Attempt endings, folded by the sweeper

# Why SQL: an INSERT … SELECT … ON CONFLICT DO UPDATE that adds to the stored value is beyond
# the ORM. The range on ended_at walks the todo_attempts_ended_recent index. The window is
# half-open, [since, until): a row is counted by the fold whose mark has passed its ended_at.
_FOLD_ATTEMPT_ENDINGS = """
WITH counted AS (
    SELECT a.outcome, count(*) AS n
      FROM todo_attempts a
     WHERE a.ended_at >= COALESCE(%(since)s::timestamptz, '-infinity'::timestamptz)
       AND a.ended_at < %(until)s
     GROUP BY a.outcome
), carried AS (
    -- Attempts the per-todo history cap deleted before this fold could count them: the claim
    -- that pruned them left their counts here (queues/sql.py, _CLAIM's `carried` arm).
    DELETE FROM metric_deltas d WHERE d.name = %(name)s RETURNING d.label AS outcome, d.value
), together AS (
    SELECT outcome, n::float8 AS n FROM counted
    UNION ALL
    SELECT outcome, value FROM carried
), summed AS (
    SELECT outcome, sum(n) AS n FROM together GROUP BY outcome
), added AS (
    INSERT INTO metric_counters (name, label, value)
    SELECT %(name)s, outcome, n FROM summed ORDER BY outcome
        ON CONFLICT (name, label) DO UPDATE SET value = metric_counters.value + EXCLUDED.value
)
SELECT outcome, n::bigint FROM summed
"""

# Why SQL: pg_stat_activity. How far the fold may count: ``lag`` behind the database clock,
# and never past the start of a transaction still open in another session of this database.
# A closing statement stamps ended_at when it starts and commits later, possibly much later
# in a long transaction (a revocation of thousands of todos); a row it stamped is invisible to
# the fold until then, and would be passed over for good if the mark moved past it first.
# Read in a statement before the count, so a transaction that commits in between is in the
# count's snapshot, and one that starts after this has a start beyond the horizon.
_FOLD_HORIZON = """
SELECT LEAST(
    statement_timestamp() - make_interval(secs => %(lag)s),
    (SELECT min(s.xact_start) FROM pg_stat_activity s
      WHERE s.datname = current_database() AND s.pid <> pg_backend_pid()
        AND s.backend_type = 'client backend' AND s.xact_start IS NOT NULL))
"""


def fold_attempt_endings(*, lag_seconds: float | None = None) -> dict[str, int]:
    """Add the attempts that ended since the last fold to the ``attempts_closed_total``
    counters and move the mark: up to ``lag_seconds`` ago by the database clock, and not past
    any transaction still open (see _FOLD_HORIZON), plus what history pruning carried over
    (metric_deltas). One transaction, under a lock on the sweeper_status row: a second sweeper
    waits, then sees the moved mark; a claim that prunes rows this fold has not counted yet
    waits for it too (queues/sql.py, _CLAIM). So every close is counted exactly once, however
    soon its row is pruned or deleted by retention (which deletes only counted rows). Returns
    the counts added, by outcome."""
    lag = FOLD_LAG_SECONDS if lag_seconds is None else lag_seconds
    with transaction.atomic(durable=True):
        SweeperStatus.objects.bulk_create([SweeperStatus(id=1)], ignore_conflicts=True)
        since = (
            SweeperStatus.objects.select_for_update()
            .filter(pk=1)
            .values_list("metrics_folded_until", flat=True)
            .get()
        )
        with connection.cursor() as cursor:
            cursor.execute(_FOLD_HORIZON, {"lag": lag})
            (until,) = cursor.fetchone()
            if since is not None and until < since:
                until = since  # the clock went back, or a transaction holds the horizon back
            cursor.execute(
                _FOLD_ATTEMPT_ENDINGS, {"since": since, "until": until, "name": ATTEMPTS_CLOSED}
            )
            added = {outcome: n for outcome, n in cursor.fetchall() if n}
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
        for upper, count in zip(BUCKETS, self.counts, strict=False):
            cumulative += count
            rows.append((CLAIM_LATENCY_BUCKET, bucket_label(upper), float(cumulative)))
        rows.append((CLAIM_LATENCY_COUNT, "", float(sum(self.counts))))
        rows.append((CLAIM_LATENCY_SUM, "", self.total))
        return sorted(rows)


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
        self._deltas = _Deltas(counts=[0] * (len(BUCKETS) + 1))
        self._thread: threading.Thread | None = None

    def observe(self, seconds: float) -> None:
        # Recorded only while /metrics is on: nobody reads them otherwise.
        if not settings.SWITCHBOARD_METRICS_TOKEN:
            return
        index = bisect_left(BUCKETS, seconds)
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
            taken, self._deltas = self._deltas, _Deltas(counts=[0] * (len(BUCKETS) + 1))
            return taken

    def give_back(self, deltas: _Deltas) -> None:
        with self._lock:
            for index, count in enumerate(deltas.counts):
                self._deltas.counts[index] += count
            self._deltas.total += deltas.total

    def discard(self) -> None:
        self.take()

    def _flush_every_interval(self) -> None:
        while True:
            time.sleep(FLUSH_INTERVAL_SECONDS)
            with self._lock:
                if not settings.SWITCHBOARD_METRICS_TOKEN:
                    # /metrics was turned off (tests restore their settings): stop; the next
                    # observation while it is on starts a new thread.
                    self._deltas = _Deltas(counts=[0] * (len(BUCKETS) + 1))
                    self._thread = None
                    return
            if not self.pending:
                continue
            try:
                close_old_connections()
                flush_claim_latency()
            except Exception:  # the database is away: the deltas were given back
                log.warning("claim latency flush failed; kept for the next try", exc_info=True)
            finally:
                try:
                    connection.close()  # this thread's own; back to the pool between flushes
                except Exception:
                    log.debug("closing the flush thread's connection failed", exc_info=True)


claim_latency = ClaimLatency()

# Why SQL: the same increment-on-conflict upsert, for many rows in one statement. Rows go in
# (name, label) order, so two processes flushing at once lock them in the same order.
_ADD_COUNTERS = """
INSERT INTO metric_counters (name, label, value)
SELECT d.name, d.label, d.value
  FROM unnest(%(names)s::text[], %(labels)s::text[], %(values)s::float8[]) AS d(name, label, value)
 ORDER BY d.name, d.label
    ON CONFLICT (name, label) DO UPDATE SET value = metric_counters.value + EXCLUDED.value
"""


def flush_claim_latency(*, wait: float | None = None) -> bool:
    """Write this process's claim latency deltas (one statement). Waits for a flush already
    under way (up to ``wait`` seconds, ``None``: as long as it takes) so that, once this
    returns True or False, every claim observed before the call is in the database.
    Returns whether anything was written; False too when the wait ran out."""
    if not claim_latency.flush_lock.acquire(timeout=-1 if wait is None else wait):
        return False
    try:
        deltas = claim_latency.take()
        if deltas is None:
            return False
        names, labels, values = zip(*deltas.rows(), strict=True)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    _ADD_COUNTERS,
                    {"names": list(names), "labels": list(labels), "values": list(values)},
                )
        except BaseException:
            claim_latency.give_back(deltas)
            raise
        return True
    finally:
        claim_latency.flush_lock.release()


# ---------------------------------------------------------------------------------------
# A scrape


@dataclass(slots=True)
class Snapshot:
    """What one scrape reports, read in four queries."""

    counters: dict[tuple[str, str], float] = field(default_factory=dict)
    todos_by_state: dict[str, int] = field(default_factory=dict)
    outbox_pending: dict[str, int] = field(default_factory=dict)
    sweeper_passes: int = 0
    sweeper_lag_seconds: float | None = None  # None: no pass has finished yet


def read_snapshot() -> Snapshot:
    snapshot = Snapshot()
    # 1. Every counter row: a handful (outcomes, histogram buckets).
    for name, label, value in MetricCounter.objects.values_list("name", "label", "value"):
        snapshot.counters[(name, label)] = value
    # 2. Todos by state: one count over todos (index-only where the visibility map allows).
    snapshot.todos_by_state = dict(
        Todo.objects.order_by()
        .values_list("state")
        .annotate(n=Count("*"))
        .values_list("state", "n")
    )
    # 3. Deliveries still to send, from the outbox's partial index of due rows.
    snapshot.outbox_pending = dict(
        Delivery.objects.filter(delivered_at__isnull=True, gave_up_at__isnull=True)
        .order_by()
        .values_list("kind")
        .annotate(n=Count("*"))
        .values_list("kind", "n")
    )
    # 4. The sweeper's last pass, its lag by the database clock.
    status = (
        SweeperStatus.objects.filter(pk=1)
        .annotate(lag=ExpressionWrapper(Now() - F("last_finished_at"), DurationField()))
        .values_list("passes", "lag")
        .first()
    )
    if status is not None:
        snapshot.sweeper_passes = status[0]
        if status[1] is not None:
            snapshot.sweeper_lag_seconds = max(0.0, status[1].total_seconds())
    return snapshot


class SwitchboardCollector(Collector):
    """Turns a Snapshot into metric families; reads nothing itself."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        counters = self.snapshot.counters
        closed = {o: counters.get((ATTEMPTS_CLOSED, o), 0.0) for o in Outcome.values}

        family = CounterMetricFamily(
            "switchboard_attempts_closed",
            "Attempts closed, by outcome (folded from the ledger by the sweeper: lags by up"
            " to one sweep interval plus 5 s).",
            labels=["outcome"],
        )
        for outcome, value in closed.items():
            family.add_metric([outcome], value)
        yield family

        yield CounterMetricFamily(
            "switchboard_lease_expired",
            "Attempts whose lease lapsed (outcomes lease_expired and reaped); lags like"
            " switchboard_attempts_closed_total.",
            value=closed[Outcome.LEASE_EXPIRED] + closed[Outcome.REAPED],
        )

        todos = GaugeMetricFamily("switchboard_todos", "Todos now, by state.", labels=["state"])
        for state in TodoState.values:
            todos.add_metric([state], self.snapshot.todos_by_state.get(state, 0))
        yield todos

        count = counters.get((CLAIM_LATENCY_COUNT, ""), 0.0)
        buckets = [
            (floatToGoString(upper), counters.get((CLAIM_LATENCY_BUCKET, bucket_label(upper)), 0.0))
            for upper in BUCKETS
        ]
        yield HistogramMetricFamily(
            "switchboard_claim_latency_seconds",
            "Server time of claim and claim_next's claim (not a long-poll's waiting), all web"
            " processes; each process writes its observations at least every 10 s.",
            buckets=[*buckets, ("+Inf", count)],
            sum_value=counters.get((CLAIM_LATENCY_SUM, ""), 0.0),
        )

        lag = self.snapshot.sweeper_lag_seconds
        yield GaugeMetricFamily(
            "switchboard_sweeper_lag_seconds",
            "Seconds since a sweeper pass last finished (+Inf before the first).",
            value=float("inf") if lag is None else lag,
        )
        yield CounterMetricFamily(
            "switchboard_sweeper_passes",
            "Sweeper passes finished, by every sweeper process.",
            value=self.snapshot.sweeper_passes,
        )

        outbox = GaugeMetricFamily(
            "switchboard_outbox_pending",
            "Webhook deliveries not yet sent nor given up, by kind.",
            labels=["kind"],
        )
        for kind in Delivery.Kind.values:
            outbox.add_metric([kind], self.snapshot.outbox_pending.get(kind, 0))
        yield outbox


def _token_ok(request: HttpRequest, expected: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    # Digests first: compare_digest is constant time only for inputs of equal length.
    given_digest = hashlib.sha256(given.strip().encode()).digest()
    return hmac.compare_digest(given_digest, hashlib.sha256(expected.encode()).digest())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``/metrics``: 404 while SWITCHBOARD_METRICS_TOKEN is unset (as any unknown URL), 401
    without the right bearer token."""
    expected = settings.SWITCHBOARD_METRICS_TOKEN
    if not expected:
        raise Http404
    if not _token_ok(request, expected):
        response = HttpResponse(
            "A valid metrics token is required (Authorization: Bearer …).\n",
            status=401,
            content_type="text/plain; charset=utf-8",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if request.method not in ("GET", "HEAD"):
        response = HttpResponse(status=405)
        response["Allow"] = "GET, HEAD"
        return response
    flush_claim_latency(wait=SCRAPE_FLUSH_WAIT_SECONDS)
    registry = CollectorRegistry()
    registry.register(SwitchboardCollector(read_snapshot()))
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response


# ---------------------------------------------------------------------------------------
# The queue health admin page: aggregates only, each computed by the database


@dataclass(slots=True)
class EndpointHealth:
    endpoint_id: int
    agent_id: str
    team_slug: str
    revoked: bool
    by_state: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_state.values())


@dataclass(slots=True)
class QueueHealth:
    endpoints: list[EndpointHealth]
    by_state: dict[str, int]  # over every endpoint
    closed_last_hour: dict[str, int]  # by outcome, every outcome present
    closed_last_day: dict[str, int]
    dead_letters: int
    dead_letters_last_day: int
    oldest_pending_age: timedelta | None  # None: nothing claimable is waiting
    outbox_pending: dict[str, int]
    outbox_retrying: int  # pending deliveries that have failed at least once
    sweeper: dict | None  # None: no sweeper has ever run

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    @property
    def lease_expiries_last_hour(self) -> int:
        return sum(self.closed_last_hour[o] for o in (Outcome.LEASE_EXPIRED, Outcome.REAPED))

    @property
    def lease_expiries_last_day(self) -> int:
        return sum(self.closed_last_day[o] for o in (Outcome.LEASE_EXPIRED, Outcome.REAPED))


def queue_health() -> QueueHealth:
    """Five queries, whatever the number of rows: todos grouped by endpoint and state (one
    pass over todos), those endpoints' names, attempts closed in the last day by outcome
    (the ended_at index), the outbox backlog (its due-rows index) and the sweeper's row.
    Times by the database clock."""
    day_ago, hour_ago = Now() - timedelta(days=1), Now() - timedelta(hours=1)

    # 1. Todos by endpoint and state, with the dead letters of the last day and the age of
    # the oldest todo that is claimable and waiting (pending, its claimable_at passed).
    # Grouped on the two narrow columns alone (a hash aggregate); the endpoints' names come
    # from their own small table in query 2, not through a join sorted on text.
    rows = list(
        Todo.objects.order_by()
        .values("endpoint_id", "state")
        .annotate(
            n=Count("*"),
            died_last_day=Count("id", filter=Q(state=TodoState.DEAD, ended_at__gt=day_ago)),
            oldest_wait=Max(
                ExpressionWrapper(Now() - F("claimable_at"), DurationField()),
                filter=Q(state=TodoState.PENDING, claimable_at__lte=Now()),
            ),
        )
    )
    # 2. The names of the endpoints that have todos.
    endpoints = {
        pk: EndpointHealth(
            endpoint_id=pk,
            agent_id=agent_id,
            team_slug=team_slug,
            revoked=revoked_at is not None,
            by_state=dict.fromkeys(TodoState.values, 0),
        )
        for pk, agent_id, team_slug, revoked_at in Endpoint.objects.filter(
            pk__in={row["endpoint_id"] for row in rows}
        ).values_list("pk", "agent_id", "team__slug", "revoked_at")
    }
    by_state = dict.fromkeys(TodoState.values, 0)
    dead_last_day, oldest = 0, None
    for row in rows:
        endpoints[row["endpoint_id"]].by_state[row["state"]] = row["n"]
        by_state[row["state"]] += row["n"]
        dead_last_day += row["died_last_day"]
        if row["oldest_wait"] is not None and (oldest is None or row["oldest_wait"] > oldest):
            oldest = row["oldest_wait"]

    # 3. Attempts closed in the last day and hour, by outcome.
    closed_hour = dict.fromkeys(Outcome.values, 0)
    closed_day = dict.fromkeys(Outcome.values, 0)
    for outcome, day, hour in (
        TodoAttempt.objects.filter(ended_at__gt=day_ago)
        .order_by()
        .values_list("outcome")
        .annotate(day=Count("*"), hour=Count("id", filter=Q(ended_at__gt=hour_ago)))
        .values_list("outcome", "day", "hour")
    ):
        closed_day[outcome], closed_hour[outcome] = day, hour

    # 4. The outbox backlog.
    outbox_pending = dict.fromkeys(Delivery.Kind.values, 0)
    retrying = 0
    for kind, n, failed in (
        Delivery.objects.filter(delivered_at__isnull=True, gave_up_at__isnull=True)
        .order_by()
        .values_list("kind")
        .annotate(n=Count("*"), failed=Count("id", filter=Q(attempts__gt=0)))
        .values_list("kind", "n", "failed")
    ):
        outbox_pending[kind], retrying = n, retrying + failed

    # 5. The sweeper's last pass.
    sweeper = (
        SweeperStatus.objects.filter(pk=1)
        .annotate(lag=ExpressionWrapper(Now() - F("last_finished_at"), DurationField()))
        .values("last_started_at", "last_finished_at", "passes", "last_report", "last_error", "lag")
        .first()
    )

    return QueueHealth(
        endpoints=sorted(endpoints.values(), key=lambda h: (h.team_slug, h.agent_id)),
        by_state=by_state,
        closed_last_hour=closed_hour,
        closed_last_day=closed_day,
        dead_letters=by_state[TodoState.DEAD],
        dead_letters_last_day=dead_last_day,
        oldest_pending_age=oldest,
        outbox_pending=outbox_pending,
        outbox_retrying=retrying,
        sweeper=sweeper,
    )
