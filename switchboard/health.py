"""``/healthz``: the truth about this process for a load balancer. 200 only while it can
write to the ledger; 503, saying why in the body and in the log (once, and again every
LOG_EVERY_SECONDS while it lasts; never Django's own error line per probe), while it drains
(SIGTERM: agents.waiting.Drain), while PostgreSQL cannot be reached or the pool gives no
connection, while the database it reaches cannot take writes (a standby in recovery, or a
read-only session: after a failover, a node whose host list still leads to the old
primary), and while a write cannot commit within COMMIT_SECONDS (a synchronous standby gone:
every agent's close would hang). Plain text always, the breaker's 503 included; no session,
no user data."""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from django.db import Error as DatabaseError
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from switchboard.agents.waiting import drain
from switchboard.queues import db, sql
from switchboard.queues.db import pooler
from switchboard.queues.db.availability import breaker, connection_params
from switchboard.queues.errors import RETRY_AFTER_SECONDS
from switchboard.queues.notify import DEAF, hearing

log = logging.getLogger("switchboard.health")

# A reason is logged when it changes, and again at most this often while it lasts.
LOG_EVERY_SECONDS = 30.0
# A write that takes longer than this to commit is a stall, not a slow moment.
COMMIT_SECONDS = 1.0
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
    response = HttpResponse(f"{reason}\n", status=503, content_type="text/plain")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response._has_been_logged = True  # type: ignore[attr-defined]  # said above, once
    return response


def _unhealthy() -> str | None:
    if drain.started:
        return "draining: this server is stopping"
    if pooler.lost.seen:
        return f"misconfigured: {pooler.FIX}"
    if not breaker.admit():
        return "database unavailable (the last connection failed; retrying)"
    try:
        [(in_recovery, read_only)] = db.fetch(sql.WRITABLE, {})
        if in_recovery:
            return "database read-only: it is a standby in recovery, not the primary"
        if read_only:
            return "database read-only: this session cannot write"
        took = _commit_seconds()
    except (DatabaseError, psycopg.Error) as exc:
        breaker.note(exc)
        return f"database unavailable ({type(exc).__name__})"
    if took >= COMMIT_SECONDS:
        return (
            f"database commits stalled: a write took {took:.1f} s to commit (a synchronous"
            " standby gone?)"
        )
    return None


def _commit_seconds() -> float:
    """How long one small write takes to commit, at most about COMMIT_SECONDS: on a
    connection of its own, whose commit is canceled then (PostgreSQL's statement timeout
    does not bound a commit's wait for a standby; a canceled wait commits locally), so that
    the cancel can never reach a pooled connection's next statement."""
    with psycopg.connect(**connection_params(), connect_timeout=2) as conn:
        conn.execute(sql.HEALTH_WRITE.text)
        timer = threading.Timer(COMMIT_SECONDS, conn.cancel_safe)
        started = time.monotonic()
        timer.start()
        try:
            conn.commit()
        finally:
            timer.cancel()
        return time.monotonic() - started
