"""Is PostgreSQL there? A per-process breaker, so that while the database is down every page
and verb answers "unavailable" at once instead of each waiting out the pool's timeout.

The breaker trips on a connection-level failure (connection refused or lost, the server
shutting down, no pooled connection within the pool's timeout) and never on a query's own
error (a deadlock, a timeout, bad data). While it is tripped, callers ask ``admit()``: at most
once a second one of them probes with a fresh connection of its own (outside the pool, a
one-second connect timeout); if the probe connects, the breaker closes and the request goes
on; otherwise every caller is refused at once. So recovery needs no restart, and costs one
connection attempt a second while the database is away.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg

log = logging.getLogger("switchboard.database")

PROBE_INTERVAL_SECONDS = 1.0
PROBE_CONNECT_TIMEOUT_SECONDS = 1
# SQLSTATEs of a server that is going or not there yet: connection exceptions (class 08),
# admin/crash shutdown, cannot connect now.
_DOWN_SQLSTATES = ("57P01", "57P02", "57P03")


def is_connection_failure(exc: BaseException | None) -> bool:
    """Does this error (a Django database error or a psycopg one) mean the database cannot
    be reached, rather than that one query failed?"""
    from django.db import InterfaceError, OperationalError

    if exc is None:
        return False
    if not isinstance(exc, OperationalError | InterfaceError | psycopg.Error):
        return False
    cause = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else exc
    if isinstance(cause, psycopg.InterfaceError | InterfaceError):
        return True  # the connection is closed
    if type(cause).__name__ == "PoolTimeout":
        return True
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate is None:
        # Connection refused, reset or dropped mid-query: psycopg gives no SQLSTATE then.
        return isinstance(cause, psycopg.OperationalError | OperationalError)
    return sqlstate.startswith("08") or sqlstate in _DOWN_SQLSTATES


class Breaker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tripped_at: float | None = None
        self._last_probe = 0.0
        self._probing = False

    @property
    def tripped(self) -> bool:
        return self._tripped_at is not None

    def trip(self, why: BaseException | str) -> None:
        with self._lock:
            if self._tripped_at is None:
                self._tripped_at = time.monotonic()
                self._last_probe = self._tripped_at
                log.warning("database unavailable (%s); answering 503 until it is back", _name(why))

    def reset(self) -> None:
        with self._lock:
            if self._tripped_at is not None:
                down = time.monotonic() - self._tripped_at
                self._tripped_at = None
                log.warning("database reachable again after %.1f s", down)

    def admit(self) -> bool:
        """May a request use the database now? True while the breaker is closed; while it is
        tripped, only after a probe this call made (or another made just now) connected."""
        if self._tripped_at is None:
            return True
        with self._lock:
            now = time.monotonic()
            if self._probing or now - self._last_probe < PROBE_INTERVAL_SECONDS:
                return self._tripped_at is None
            self._probing, self._last_probe = True, now
        try:
            reachable = _probe()
        finally:
            with self._lock:
                self._probing = False
        if reachable:
            self.reset()
        return reachable

    def note(self, exc: BaseException | None) -> None:
        """Trip if ``exc`` says the database cannot be reached."""
        if is_connection_failure(exc):
            self.trip(exc)


def _probe() -> bool:
    from django.db import connection

    from queues import sql

    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(key, None)
    params["connect_timeout"] = PROBE_CONNECT_TIMEOUT_SECONDS
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(sql.PING.text)
    except psycopg.Error:
        return False
    return True


def _name(why: BaseException | str) -> str:
    return why if isinstance(why, str) else type(why).__name__


breaker = Breaker()
