"""``/metrics`` in the Prometheus text format: a scrape reads the ledger's counters and a few
aggregates (queues.counters) on the async pool and renders them with a fresh
``CollectorRegistry``, behind the SWITCHBOARD_METRICS_TOKEN bearer token (the same bearer
parsing as the agent API)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator

from django.conf import settings
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from switchboard.agents import wire
from switchboard.agents.auth import token_from_header
from switchboard.queues import counters, db, endpoint_health
from switchboard.queues.db.availability import breaker
from switchboard.queues.errors import DATABASE_ERRORS, DomainError, Unavailable, from_database_error
from switchboard.queues.models import (
    Delivery,
    Outcome,
    QuestionEnding,
    TodoState,
)


class SwitchboardCollector(Collector):
    """Turns a counters.Snapshot into metric families; reads nothing itself."""

    def __init__(
        self,
        snapshot: counters.Snapshot,
        oldest: list[endpoint_health.OldestClaimable] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.oldest = oldest or []

    def collect(self) -> Iterator[Metric]:
        stored = self.snapshot.counters
        closed = {o: stored.get((counters.ATTEMPTS_CLOSED, o), 0.0) for o in Outcome.values}

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

        yield _histogram(
            "switchboard_claim_latency_seconds",
            "Server time of claim and claim_next's claim (not a long-poll's waiting), all web"
            " processes; each process writes its observations at least every 10 s.",
            stored,
            counters.CLAIM_LATENCY,
        )

        # Asking a person (issue 43): what waits on people now, how questions ended, how long
        # an answer took. Counts and times only, never a question or an answer.
        waiting = GaugeMetricFamily(
            "switchboard_waiting",
            "Todos waiting on people (a question asked, not yet answered), per endpoint not"
            " revoked.",
            labels=["team", "endpoint"],
        )
        for asking in self.snapshot.waiting:
            waiting.add_metric([asking.team, asking.agent_id], asking.todos)
        yield waiting

        yield CounterMetricFamily(
            "switchboard_questions_asked",
            "Questions asked (attempts closed asked); lags like switchboard_attempts_closed_total.",
            value=closed[Outcome.ASKED],
        )
        ended = CounterMetricFamily(
            "switchboard_questions_ended",
            "Questions ended, by ending: answered, unanswered (its time ran out), withdrawn"
            " (the todo claimed by a person, canceled or revoked while waiting); lags like"
            " switchboard_attempts_closed_total.",
            labels=["ending"],
        )
        for ending in QuestionEnding.values:
            ended.add_metric([ending], stored.get((counters.QUESTIONS_ENDED, ending), 0.0))
        yield ended

        yield _histogram(
            "switchboard_time_to_answer_seconds",
            "Time from a question to its answer, answered questions only; lags like"
            " switchboard_attempts_closed_total.",
            stored,
            counters.TIME_TO_ANSWER,
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

        # A stalled queue's first sign (the Board's "stalled", docs/board.md): alert on it,
        # e.g. above SWITCHBOARD_STALL_SECONDS.
        oldest = GaugeMetricFamily(
            "switchboard_oldest_claimable_seconds",
            "Seconds the oldest claimable todo of each endpoint (not revoked) has waited;"
            " 0 when none is claimable.",
            labels=["team", "endpoint"],
        )
        for endpoint in self.oldest:
            oldest.add_metric([endpoint.team, endpoint.agent_id], endpoint.seconds)
        yield oldest


def _histogram(
    name: str,
    documentation: str,
    stored: dict[tuple[str, str], float],
    histogram: counters.Histogram,
) -> HistogramMetricFamily:
    """``histogram`` as metric_counters holds it; a missing row is 0."""
    counted = stored.get((histogram.count, ""), 0.0)
    buckets = [
        (floatToGoString(upper), stored.get((histogram.bucket, label), 0.0))
        for upper, label in zip(histogram.bounds, histogram.labels, strict=True)
    ]
    return HistogramMetricFamily(
        name,
        documentation,
        buckets=[*buckets, ("+Inf", counted)],
        sum_value=stored.get((histogram.total, ""), 0.0),
    )


def _token_ok(authorization: str, expected: str) -> bool:
    given = token_from_header(authorization) or ""
    # Digests first: compare_digest is constant time only for inputs of equal length.
    given_digest = hashlib.sha256(given.encode()).digest()
    return hmac.compare_digest(given_digest, hashlib.sha256(expected.encode()).digest())


async def scrape(method: str, authorization: str) -> tuple[int, bytes, list[tuple[str, str]]]:
    """``/metrics``, on the event loop: 401 without the right bearer token, else the
    exposition (``unavailable`` while the database is away, as the verbs say it). The front
    sends it here only while SWITCHBOARD_METRICS_TOKEN is set; unset, ``/metrics`` is the
    site's, which has no such page (switchboard/asgi.py)."""
    expected = settings.SWITCHBOARD_METRICS_TOKEN
    if not _token_ok(authorization, expected):
        return (
            401,
            b"A valid metrics token is required (Authorization: Bearer \xe2\x80\xa6).\n",
            [
                ("content-type", "text/plain; charset=utf-8"),
                ("www-authenticate", 'Bearer realm="metrics"'),
            ],
        )
    if method not in ("GET", "HEAD"):
        return 405, b"", [("allow", "GET, HEAD")]
    try:
        if not await breaker.aadmit():  # known to be away: said at once
            raise Unavailable("The database is unavailable; retry shortly.")
        await counters.aflush_claim_latency(wait=counters.SCRAPE_FLUSH_WAIT_SECONDS)
        snapshot = await db.arun(counters.read_snapshot_plan())
        oldest = await db.arun(endpoint_health.oldest_claimable_plan())
    except DomainError as error:
        return wire.error_parts(error)
    except DATABASE_ERRORS as exc:
        return wire.error_parts(from_database_error(exc, verb="metrics"))
    registry = CollectorRegistry()
    registry.register(SwitchboardCollector(snapshot, oldest))
    return (
        200,
        generate_latest(registry),
        [("content-type", CONTENT_TYPE_LATEST), ("cache-control", "no-store")],
    )
