"""``/healthz``: the truth about this process for a load balancer. 200 only while it can
write to the ledger; 503, saying why in the body and in the log, while it drains (SIGTERM:
agents.waiting.Drain), while PostgreSQL cannot be reached or the pool gives no connection,
and while the database it reaches cannot take writes (a standby in recovery, or a read-only
session: after a failover, a node whose host list still leads to the old primary).
Plain text, no session, no user data."""

from __future__ import annotations

import logging
import time

from django.db import Error as DatabaseError
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agents.doorbell import DEAF, hearing
from agents.waiting import drain
from queues import db, sql
from queues.db import pooler

log = logging.getLogger("switchboard.health")

# A reason is logged when it changes, and again at most this often while it lasts.
LOG_EVERY_SECONDS = 30.0
_last: dict[str, float] = {}


@never_cache
@require_GET
def healthz(request):
    reason = _unhealthy()
    if reason is None:
        _last.clear()
        # Serving, but not as well as it could: said in the body, not in the status (a load
        # balancer that took this process out would gain nothing; docs/deploy.md).
        warning = f"warning: {DEAF}\n" if hearing.deaf_since is not None else ""
        return HttpResponse(f"ok\n{warning}", content_type="text/plain")
    now = time.monotonic()
    if now - _last.get(reason, -LOG_EVERY_SECONDS) >= LOG_EVERY_SECONDS:
        _last.clear()
        _last[reason] = now
        log.warning("/healthz answers 503: %s", reason)
    return HttpResponse(f"{reason}\n", status=503, content_type="text/plain")


def _unhealthy() -> str | None:
    if drain.started:
        return "draining: this server is stopping"
    if pooler.lost.seen:
        return f"misconfigured: {pooler.FIX}"
    try:
        [(in_recovery, read_only)] = db.fetch(sql.WRITABLE, {})
    except DatabaseError as exc:
        return f"database unavailable ({type(exc).__name__})"
    if in_recovery:
        return "database read-only: it is a standby in recovery, not the primary"
    if read_only:
        return "database read-only: this session cannot write"
    return None
