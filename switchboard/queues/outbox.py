"""The outbox's sender: signed webhooks for dead-letter sinks and doorbells (dead letters,
doorbells, and ``todo.waiting`` when an agent asks a person), and A2A push notifications
(``task.push``: a task's status, to each push config of its todo, queues/push.py).

Rows are written by PostgreSQL triggers in the transaction that made them necessary
(queues/schema/functions.sql); this module sends them, from the sweeper (``sweeper.sweep_once``
calls ``deliver_due`` every pass). One batch:

1. **Lease**, in one short transaction: take due rows (undelivered, not given up,
   ``next_attempt_at`` passed) with ``FOR UPDATE SKIP LOCKED``, give up at once on those whose
   target is gone (sink deleted or deactivated, notify URL removed, endpoint revoked), push
   ``next_attempt_at`` of the rest a lease ahead and count the try; commit. Another sweeper
   now skips them, and a sender that dies mid-POST only delays its rows by the lease.
2. **POST** outside any transaction, a few at a time in threads (queues/webhooks.py: SSRF
   guard, signature, no redirects, a deadline).
3. **Record** each answer: a 2xx sets ``delivered_at`` (only while it is still unset), and a
   row with ``delivered_at`` is never taken again; anything else records the status and a
   short error and schedules the next try with exponential backoff and jitter, giving up
   after ``MAX_TRIES``.

So a delivery is sent at least once, and never again after its 2xx was recorded. Between a
2xx and the recording commit (a crash, a lost database connection) it can be sent twice;
receivers dedupe on ``X-Switchboard-Delivery``. docs/notifications.md says this to users.

Finished deliveries are kept (the Board shows each sink's and endpoint's last one) as long as
terminal todos, ``SWITCHBOARD_RETENTION_DAYS``, then deleted a batch per call.

A doorbell rung again while its row was in flight has a new payload (see
``switchboard_outbox_doorbell`` in queues/schema/functions.sql): its 2xx then also writes a
new doorbell, due at once, so the receiver hears the later ring.
"""

from __future__ import annotations

import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from switchboard.queues import db, sql, webhooks
from switchboard.queues.models import Delivery

log = logging.getLogger("switchboard.outbox")

# Tries before a delivery is given up: about 1.7 to 3.4 hours after the first (the sum of the
# backoffs below, with their jitter).
MAX_TRIES = 12
BACKOFF_BASE_SECONDS = 10
BACKOFF_MAX_SECONDS = 3600
# A leased row is not taken again before this. It must outlast a batch's POSTs:
# ceil(batch / SENDERS) * webhooks.DEADLINE_SECONDS = ceil(50 / 10) * 10 s = 50 s.
LEASE_SECONDS = 60
SENDERS = 10
# One call drains full batches for at most this long; the rest waits for the next pass.
BUDGET_SECONDS = 30
# Finished deliveries looked at per call for deletion (prune_finished).
PRUNE_BATCH = 1000


@dataclass(frozen=True, slots=True)
class _Job:
    id: int
    kind: str
    url: str
    secret: str
    payload: dict
    tries: int  # including this one
    headers: dict[str, str] | None = None  # an A2A push's token and authentication


@dataclass(frozen=True, slots=True)
class DeliveryStatus:
    """Where a delivery stands, as the Board shows it: delivered, gave up, retrying (a try
    failed; another is scheduled) or waiting (not tried yet)."""

    status: int | None
    error: str
    attempts: int
    created_at: datetime
    delivered_at: datetime | None
    gave_up_at: datetime | None

    @classmethod
    def of(cls, delivery: Delivery | None) -> DeliveryStatus | None:
        if delivery is None:
            return None
        return cls(
            delivery.last_status,
            delivery.last_error,
            delivery.attempts,
            delivery.created_at,
            delivery.delivered_at,
            delivery.gave_up_at,
        )

    @classmethod
    def from_json(cls, row: dict | None) -> DeliveryStatus | None:
        """From a ``JSONObject`` of those columns (timestamps as ISO 8601 text)."""
        if row is None:
            return None
        times = {
            key: datetime.fromisoformat(row[key]) if row[key] else None
            for key in ("created_at", "delivered_at", "gave_up_at")
        }
        return cls(
            row["status"],
            row["error"],
            row["attempts"],
            created_at=times["created_at"] or datetime.fromisoformat(row["created_at"]),
            delivered_at=times["delivered_at"],
            gave_up_at=times["gave_up_at"],
        )

    @property
    def state(self) -> str:
        if self.delivered_at:
            return "delivered"
        if self.gave_up_at:
            return "gave up"
        return "retrying" if self.attempts else "waiting"


def deliver_due(*, batch: int = 50) -> int:
    """Send the due deliveries; returns how many were accepted (a 2xx). Also drops finished
    deliveries older than SWITCHBOARD_RETENTION_DAYS (``prune_finished``)."""
    prune_finished(days=settings.SWITCHBOARD_RETENTION_DAYS)
    delivered = 0
    started = time.monotonic()
    while True:
        jobs, taken = _lease(batch)
        delivered += _send(jobs)
        if taken < batch or time.monotonic() - started > BUDGET_SECONDS:
            return delivered


def prune_finished(*, days: int, batch: int = PRUNE_BATCH) -> int:
    """Delete delivered and given-up deliveries created more than ``days`` ago, as terminal
    todos are; rows still to be sent stay. Returns how many went.

    Only the oldest ``batch`` rows by id are looked at, so a pass reads the head of the
    primary key and no more, however large the table (ids grow with ``created_at``)."""
    return len(db.fetch(sql.OUTBOX_PRUNE, {"days": days, "batch": batch}))


def backoff_seconds(tries: int) -> float:
    """Wait after the ``tries``-th failed try: exponential, capped, with equal jitter (half
    fixed, half random), so receivers that failed together do not all come back together."""
    delay = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** min(tries - 1, 30))
    return delay / 2 + random.uniform(0, delay / 2)


def _lease(batch: int) -> tuple[list[_Job], int]:
    with transaction.atomic(durable=True):
        due = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(delivered_at__isnull=True, gave_up_at__isnull=True, next_attempt_at__lte=Now())
            .select_related("sink", "endpoint", "push_config")
            .order_by("next_attempt_at", "id")[:batch]
        )
        jobs: list[_Job] = []
        for delivery in due:
            reason = _why_not(delivery)
            if reason:
                Delivery.objects.filter(pk=delivery.pk).update(gave_up_at=Now(), last_error=reason)
                continue
            # _why_not gave up on a delivery whose sink, endpoint or push config is gone.
            headers = None
            if delivery.kind == Delivery.Kind.TASK_PUSH:
                config = delivery.push_config
                assert config is not None
                url, secret, headers = config.url, config.secret, _push_headers(config)
            elif _to_sink(delivery):
                assert delivery.sink is not None
                url, secret = delivery.sink.url, delivery.sink.secret
            else:
                assert delivery.endpoint is not None
                url, secret = delivery.endpoint.notify_url, delivery.endpoint.notify_secret
            jobs.append(
                _Job(
                    delivery.pk,
                    delivery.kind,
                    url,
                    secret,
                    delivery.payload,
                    delivery.attempts + 1,
                    headers,
                )
            )
        if jobs:
            Delivery.objects.filter(pk__in=[job.id for job in jobs]).update(
                next_attempt_at=Now() + timedelta(seconds=LEASE_SECONDS),
                attempts=F("attempts") + 1,
            )
    return jobs, len(due)


def _push_headers(config) -> dict[str, str]:
    """What A2A says a push carries: the client's token, and its authentication if it gave
    one."""
    headers = {"X-A2A-Notification-Token": config.token} if config.token else {}
    if config.auth_scheme:
        headers["Authorization"] = f"{config.auth_scheme} {config.auth_credentials}".strip()
    return headers


def _to_sink(delivery: Delivery) -> bool:
    """Whether a delivery goes to a dead-letter sink, else to its endpoint's notify URL: a
    dead letter always, a doorbell never; a ``todo.waiting`` to the one it names (the
    trigger names one, never both; one whose sink was deleted names neither)."""
    if delivery.kind == Delivery.Kind.TODO_WAITING:
        return delivery.endpoint_id is None
    return delivery.kind == Delivery.Kind.DEAD_LETTER


def _why_not(delivery: Delivery) -> str:
    """Why this delivery can no longer be sent (it is given up), or ""."""
    if delivery.attempts >= MAX_TRIES:
        # Its last try was leased but never recorded (the sender stopped mid-POST).
        return f"gave up after {delivery.attempts} tries; the last one did not finish"
    if delivery.kind == Delivery.Kind.TASK_PUSH:
        return "" if delivery.push_config is not None else "not sent: its push config was deleted"
    if _to_sink(delivery):
        if delivery.sink is None:
            return "not sent: its dead-letter sink was deleted"
        if not delivery.sink.active:
            return "not sent: its dead-letter sink was deactivated"
        return ""
    endpoint = delivery.endpoint
    if endpoint is None or endpoint.revoked_at is not None:
        return "not sent: the endpoint was revoked"
    if not endpoint.notify_url:
        return "not sent: the endpoint's notify URL was removed"
    if not endpoint.notify_secret:
        return "not sent: the endpoint has no notify secret (save its notify URL again)"
    return ""


def _send(jobs: list[_Job]) -> int:
    if not jobs:
        return 0
    # The POSTs only: no database work in these threads. Each answer is recorded (here, in
    # the calling thread) as soon as its POST returns, so a sweeper killed mid-batch re-sends
    # only what was still in flight, not what a receiver already answered 2xx
    # (tests/crash/test_sweeper_kill.py).
    sent = 0
    with ThreadPoolExecutor(max_workers=min(SENDERS, len(jobs))) as pool:
        futures = {pool.submit(_post, job): job for job in jobs}
        for future in as_completed(futures):
            sent += _record(futures[future], future.result())
    return sent


def _post(job: _Job) -> webhooks.Answer:
    return webhooks.post(
        job.url,
        body=webhooks.encode(job.payload),
        secret=job.secret,
        delivery_id=job.id,
        event=job.kind,
        extra_headers=job.headers,
    )


def _record(job: _Job, answer: webhooks.Answer) -> int:
    undelivered = Delivery.objects.filter(pk=job.id, delivered_at__isnull=True)
    if answer.ok:
        with transaction.atomic():
            # The row lock waits for a ring that is writing into this doorbell right now.
            row = undelivered.select_for_update().first()
            if row is None:
                return 1
            # The payload as sent (a ring may have written a newer one in meanwhile).
            undelivered.update(
                delivered_at=Now(), last_status=answer.status, last_error="", payload=job.payload
            )
            if row.kind == Delivery.Kind.DOORBELL and row.payload != job.payload:
                # Rung again while in flight: the receiver may have looked before that ring's
                # todo committed. Ring once more, as a delivery of its own (a receiver that
                # dedupes on the delivery id must not drop it).
                Delivery.objects.bulk_create(
                    [
                        Delivery(
                            kind=Delivery.Kind.DOORBELL,
                            team_id=row.team_id,
                            endpoint_id=row.endpoint_id,
                            todo_id=row.payload.get("todo_id"),
                            url=row.url,
                            payload=row.payload,
                        )
                    ],
                    ignore_conflicts=True,  # a newer ring made the next one already
                )
        return 1
    host = urlsplit(job.url).hostname or "?"  # never the whole URL: it may carry a secret
    if job.tries >= MAX_TRIES:
        error = f"gave up after {job.tries} tries: {answer.error}"
        undelivered.update(
            gave_up_at=Now(),
            last_status=answer.status,
            last_error=error[: webhooks.ERROR_MAX_CHARS],
        )
        log.warning("delivery #%s (%s) to %s given up: %s", job.id, job.kind, host, answer.error)
        return 0
    undelivered.update(
        next_attempt_at=Now() + timedelta(seconds=backoff_seconds(job.tries)),
        last_status=answer.status,
        last_error=answer.error,
    )
    log.info("delivery #%s (%s) to %s failed: %s", job.id, job.kind, host, answer.error)
    return 0
