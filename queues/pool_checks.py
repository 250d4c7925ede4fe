"""How a pooled connection is checked as it is lent, for the sync pool (Django's, built from
settings) and the async one (``queues.db``): after PostgreSQL restarts, every idle
connection in a pool is dead at once, and the pool must find that out in one go.

psycopg_pool checks a connection as it lends it (its ``check`` callback) and, when the check
fails, lends the next one, sleeping 0, then about 1, 2, 4 … seconds between failed checks:
so a request that meets the pool's stale connections one by one after a restart waits
1 + 2 + 4 s past the fourth and is refused past the fifth (the pool's 10 s timeout, a 503),
while the database is up (tests/crash/test_stale_pool.py). So when a check fails, these
check every other idle connection of that pool at once (psycopg_pool's own ``check()``: the
broken ones are dropped and replaced) before saying so: the pool's next try is its first
retry, with no sleep, and finds a working or a new connection.

Imported by the settings: nothing of Django here.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

log = logging.getLogger("switchboard.database")

# A connection back in the async pool for longer than this is checked (one empty round
# trip) before it is lent again; one used just now is not.
CHECK_IDLE_SECONDS = 0.25
last_used: weakref.WeakKeyDictionary[psycopg.AsyncConnection, float] = weakref.WeakKeyDictionary()


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
    round trip per plan, two per verb (auth, then the verb): half again the web process's
    and PostgreSQL's CPU per claim_next + complete (bench/fleet.py)."""
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
    """Is the database known to be away (queues.availability's breaker tripped)? Then a
    broken connection is expected and checking the others would only queue reconnections
    that fail; the sweep is for a restart the process has not noticed."""
    from queues.availability import breaker

    return breaker.tripped


def _pool_of(conn: Any) -> Any:
    # psycopg_pool marks a connection it lends with its pool (``conn._pool``, set before the
    # check runs and cleared when it is returned); no public accessor says so.
    return getattr(conn, "_pool", None)
