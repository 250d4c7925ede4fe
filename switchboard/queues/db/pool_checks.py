"""How a pooled connection is checked as it is lent, for the sync pool (Django's, built from
settings) and the async one (``queues.db.executor``): after PostgreSQL restarts, every idle
connection in a pool is dead at once, and the pool must find that out in one go.

psycopg_pool checks a connection as it lends it (its ``check`` callback) and, when the check
fails, lends the next one, sleeping 0, then about 1, 2, 4 … seconds between failed checks:
so a request that meets the pool's stale connections one by one after a restart waits
1 + 2 + 4 s past the fourth and is refused past the fifth (the pool's 10 s timeout, a 503),
while the database is up (tests/crash/test_stale_pool.py). So when a check fails, these
check every other idle connection of that pool at once (psycopg_pool's own ``check()``: the
broken ones are dropped and replaced) before saying so: the pool's next try is its first
retry, with no sleep, and finds a working or a new connection.

A request that waits for a pooled connection waits at most ``OUTAGE_WAIT_SECONDS`` before it
asks whether the database is there (``OutageAwarePool``): a fresh connection refused is an
outage, and the request is refused at once (the breaker trips), where it waited out the
pool's 10 s timeout before; a fresh connection that connects means the pool is only busy,
and the request waits on for the rest of the timeout (issue 27: the first page or verb after
PostgreSQL stopped answered 503 only once the whole timeout had passed).

Imported by the settings: nothing of Django here.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from switchboard.queues.db.availability import breaker, first_line

log = logging.getLogger("switchboard.database")

# A connection back in the async pool for longer than this is checked (one empty round
# trip) before it is lent again; one used just now is not.
CHECK_IDLE_SECONDS = 0.25
last_used: weakref.WeakKeyDictionary[psycopg.AsyncConnection, float] = weakref.WeakKeyDictionary()


# Seconds a request waits for a pooled connection before it asks whether the database is there.
OUTAGE_WAIT_SECONDS = 1.0


class _SteadyAttempt(AttemptWithBackoff):
    """A pool's reconnection tries every quarter second (the breaker's probe interval) until
    it gives up (``reconnect_timeout``), where psycopg_pool's own double from 1 s: a pool
    whose last try failed just before PostgreSQL came back waited for its next, and every
    request with it (tests/crash/test_database_restart.py, told within two seconds and
    forgotten within one; docs/benchmarks.md, "The crash tests").
    Its own log lines are quietened in the settings: the breaker says when the database went
    and came back."""

    INITIAL_DELAY = 0.25
    DELAY_BACKOFF = 1.0


class OutageTimeout(PoolTimeout):
    """No pooled connection in time, and a fresh one refused too: the database is away
    (the breaker trips on it without asking again)."""


def _outage(waited: float) -> PoolTimeout:
    why = breaker.last_refusal
    because = f" ({first_line(why)})" if why is not None and str(why) else ""
    return OutageTimeout(
        f"couldn't get a connection after {waited:.2f} sec, and a fresh connection failed"
        f" too{because}"
    )


class OutageAwarePool(ConnectionPool):
    """Django's sync pool (made so by switchboard.postgresql), whose ``getconn`` asks after
    OUTAGE_WAIT_SECONDS whether the database is there instead of waiting out the timeout."""

    def getconn(self, timeout: float | None = None):
        total = self.timeout if timeout is None else timeout
        if total <= OUTAGE_WAIT_SECONDS:
            return super().getconn(timeout)
        started = time.monotonic()
        try:
            return super().getconn(OUTAGE_WAIT_SECONDS)
        except PoolTimeout:
            if not breaker.reachable():
                raise _outage(time.monotonic() - started) from None
        return super().getconn(max(0.0, total - (time.monotonic() - started)))

    def _add_connection(self, attempt, growing: bool = False) -> None:
        super()._add_connection(attempt or _SteadyAttempt(timeout=self.reconnect_timeout), growing)


class AsyncOutageAwarePool(AsyncConnectionPool):
    """The async pool (queues.db.executor), the same way; the probe does not block the loop."""

    async def getconn(self, timeout: float | None = None):
        total = self.timeout if timeout is None else timeout
        if total <= OUTAGE_WAIT_SECONDS:
            return await super().getconn(timeout)
        started = time.monotonic()
        try:
            return await super().getconn(OUTAGE_WAIT_SECONDS)
        except PoolTimeout:
            if not await breaker.areachable():
                raise _outage(time.monotonic() - started) from None
        return await super().getconn(max(0.0, total - (time.monotonic() - started)))

    async def _add_connection(self, attempt, growing: bool = False) -> None:
        await super()._add_connection(
            attempt or _SteadyAttempt(timeout=self.reconnect_timeout), growing
        )


def check_pooled(conn: psycopg.Connection) -> None:
    """The sync pool's check (every lend: the Board's pages are not the hot path)."""
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        pool = _pool_of(conn)
        if isinstance(pool, ConnectionPool) and not _known_down():
            log.info("a pooled connection was broken; checking the pool's others")
            pool.check()
        raise


async def acheck_if_idle(conn: psycopg.AsyncConnection) -> None:
    """The async pool's check, for a connection that sat idle. Checking every lend cost a
    round trip per plan, two per verb (auth, then the verb), a large share of the web
    process's and PostgreSQL's CPU per claim_next + complete (docs/benchmarks.md, "A pooled
    connection checked when it sat idle")."""
    if time.monotonic() - last_used.get(conn, 0.0) <= CHECK_IDLE_SECONDS:
        return
    try:
        await AsyncConnectionPool.check_connection(conn)
    except Exception:
        pool = _pool_of(conn)
        if isinstance(pool, AsyncConnectionPool) and not _known_down():
            log.info("a pooled connection was broken; checking the pool's others")
            await pool.check()
        raise


def _known_down() -> bool:
    """Is the database known to be away (the breaker, ``queues.db.availability``, tripped)? Then a
    broken connection is expected and checking the others would only queue reconnections
    that fail; the sweep is for a restart the process has not noticed."""
    return breaker.tripped


def _pool_of(conn: Any) -> Any:
    # psycopg_pool marks a connection it lends with its pool (``conn._pool``, set before the
    # check runs and cleared when it is returned); no public accessor says so.
    return getattr(conn, "_pool", None)
