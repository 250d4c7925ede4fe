"""After PostgreSQL restarts, every idle connection of a pool is dead; the product's checks
(queues/db/pool_checks.py) must have the pool drop them all at once, so the first requests
after a quiet restart get a working connection at once rather than walking the dead ones
behind psycopg_pool's 1, 2, 4 s backoff into its 10 s timeout (a 503 while the database is
up). The sync pool is Django's (the Board, admin, sign-in), the async one the agents'."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from switchboard.queues.db.pool_checks import acheck_if_idle, check_pooled

pytestmark = [pytest.mark.slow]

POOL_SIZE = 8
# The product's pool timeout (switchboard/settings.py, queues/db/executor.py).
POOL_TIMEOUT_SECONDS = 10
# A working connection after the restart within this long: a new connection and a round
# trip, with slack for two loaded cores (the backoff alone would be 1 + 2 + 4 s).
PROMPT_SECONDS = 2.5
# Both pools as the product sizes them, each with its own check.
POOL_OPTIONS = {
    "min_size": 1,
    "max_size": POOL_SIZE,
    "timeout": POOL_TIMEOUT_SECONDS,
    "kwargs": {"autocommit": True},
}


def _restart(pg) -> None:
    pg.stop()
    pg.start()


def test_the_sync_pool_lends_a_working_connection_at_once_after_a_restart(dedicated_postgres):
    pg = dedicated_postgres
    pool = ConnectionPool(pg.url, check=check_pooled, open=True, **POOL_OPTIONS)
    try:
        held = [pool.getconn() for _ in range(POOL_SIZE)]  # the pool at its full size
        for conn in held:
            pool.putconn(conn)
        _restart(pg)

        started = time.monotonic()
        with pool.connection() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        took = time.monotonic() - started
        assert took < PROMPT_SECONDS, took

        # And a burst right after: every request answered, none of them slowly.
        def one(_):
            began = time.monotonic()
            with pool.connection() as conn:
                conn.execute("SELECT 1")
            return time.monotonic() - began

        _restart(pg)
        with ThreadPoolExecutor(max_workers=POOL_SIZE * 2) as threads:
            times = list(threads.map(one, range(POOL_SIZE * 4)))
        assert max(times) < PROMPT_SECONDS, sorted(times)
    finally:
        pool.close()


def test_the_async_pool_lends_a_working_connection_at_once_after_a_restart(dedicated_postgres):
    pg = dedicated_postgres

    async def scenario() -> tuple[float, list[float]]:
        pool = AsyncConnectionPool(pg.url, check=acheck_if_idle, open=False, **POOL_OPTIONS)
        await pool.open()
        try:
            held = [await pool.getconn() for _ in range(POOL_SIZE)]
            for conn in held:
                await pool.putconn(conn)
            await asyncio.to_thread(_restart, pg)

            started = time.monotonic()
            async with pool.connection() as conn:
                assert await (await conn.execute("SELECT 1")).fetchone() == (1,)
            first = time.monotonic() - started

            async def one() -> float:
                began = time.monotonic()
                async with pool.connection() as conn:
                    await conn.execute("SELECT 1")
                return time.monotonic() - began

            await asyncio.to_thread(_restart, pg)
            burst = await asyncio.gather(*(one() for _ in range(POOL_SIZE * 4)))
            return first, list(burst)
        finally:
            await pool.close()

    first, burst = asyncio.run(scenario())
    assert first < PROMPT_SECONDS, first
    assert max(burst) < PROMPT_SECONDS, sorted(burst)
