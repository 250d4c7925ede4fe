"""An endpoint's health at a glance (the Board's endpoint page): its queue now, what its
agents' tries did over the last hour (per minute) and the last day (per hour), how long a
claim takes to complete, and when its agents were last seen.

Two statements (queues/sql/health.py), each reading only what it needs: the endpoint's live
todos (``todos_claimable``), then the tries it ended in the last day
(``todo_attempts_endpoint_ended``). Neither grows with the ledger's size; the second grows
with the endpoint's last day of endings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from queues import db, sql
from queues.models import Endpoint

MINUTES = 60  # the last hour, per minute
HOURS = 24  # the last day, per hour


@dataclass(frozen=True, slots=True)
class Endings:
    """Tries ended per bucket, oldest bucket first (the last one ends now)."""

    completed: list[int]
    failed: list[int]
    died: list[int]

    @classmethod
    def empty(cls, size: int) -> Endings:
        return cls([0] * size, [0] * size, [0] * size)

    @property
    def totals(self) -> dict[str, int]:
        return {
            "completed": sum(self.completed),
            "failed": sum(self.failed),
            "died": sum(self.died),
        }


@dataclass(frozen=True, slots=True)
class EndpointHealth:
    claimable: int  # claim_next would take these now (due pending, due retries, lapsed leases)
    held: int  # claimed, the lease live
    retry_wait: int  # waiting for their retry time
    scheduled: int  # pending, not before a later time
    oldest_claimable_age: timedelta | None  # since it became claimable; None: nothing waits
    per_minute: Endings  # MINUTES buckets
    per_hour: Endings  # HOURS buckets
    completed_last_day: int
    took_p50: float | None  # seconds from claim to complete, the last day's completions
    took_p95: float | None
    # When its agents were last seen: a lease held now, or a try that ended in the last day
    # (None: neither; older tries are not read).
    last_claim_at: datetime | None
    last_heartbeat_at: datetime | None
    last_ended_at: datetime | None


def endpoint_health(endpoint: Endpoint) -> EndpointHealth:
    """The endpoint page's numbers, in two statements whatever the ledger's size."""
    params = {"endpoint_id": endpoint.pk}
    [now] = db.fetch(sql.ENDPOINT_QUEUE_NOW, params)
    (claimable, held, retry_wait, scheduled, oldest, open_claim, open_heartbeat) = now

    per_minute, per_hour = Endings.empty(MINUTES), Endings.empty(HOURS)
    day = None
    for row in db.fetch(sql.ENDPOINT_ENDINGS, params):
        grouped, hours_ago, minutes_ago, completed, failed, died = row[:6]
        if grouped == 3:  # the whole day (always one row)
            day = row
        elif grouped == 1 and hours_ago is not None and 0 <= hours_ago < HOURS:
            _put(per_hour, HOURS - 1 - hours_ago, completed, failed, died)
        elif grouped == 2 and minutes_ago is not None and 0 <= minutes_ago < MINUTES:
            _put(per_minute, MINUTES - 1 - minutes_ago, completed, failed, died)
    # The whole day's row: (grouped, -, -, completed, failed, died, p50, p95, last claim,
    # last heartbeat, last end); none when nothing ended.
    day = day or (3, None, None, 0, 0, 0, None, None, None, None, None)
    completed_day = day[3]
    p50, p95, day_claim, day_heartbeat, day_end = day[6:11]
    return EndpointHealth(
        claimable=claimable,
        held=held,
        retry_wait=retry_wait,
        scheduled=scheduled,
        oldest_claimable_age=oldest,
        per_minute=per_minute,
        per_hour=per_hour,
        completed_last_day=completed_day,
        took_p50=p50,
        took_p95=p95,
        last_claim_at=_newest(open_claim, day_claim),
        last_heartbeat_at=_newest(open_heartbeat, day_heartbeat),
        last_ended_at=day_end,
    )


def _put(endings: Endings, at: int, completed: int, failed: int, died: int) -> None:
    endings.completed[at] = completed
    endings.failed[at] = failed
    endings.died[at] = died


def _newest(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return max(known) if known else None
