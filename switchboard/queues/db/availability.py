"""Is PostgreSQL there? A per-process breaker, so that while the database is down every page
and verb answers "unavailable" at once instead of each waiting out the pool's timeout.

The breaker trips on a connection-level failure (connection refused or lost, the server
shutting down, no pooled connection within the pool's timeout while a fresh connection fails
too) and never on a query's own error (a deadlock, a timeout, bad data) nor on a pool that is
merely busy. While it is tripped, callers ask ``admit()``: at most
once a probe interval (a quarter of a second) one of them probes with a fresh connection of
its own (outside the pool, a short connect timeout: libpq makes it two seconds at least);
if the probe connects, the breaker closes and the request goes on; otherwise every caller is
refused at once. So recovery needs
no restart, is noticed within a probe interval of the database's return, and costs at most
four connection attempts a second per process while the database is away. A process that
gets no request probes too (a thread, once a probe interval, while tripped): a web worker
nobody asked during the outage is closed again before its next burst, rather than refusing
the burst until its next probe is due. (With one probe a second, a burst soon after
PostgreSQL was back was refused whole by the worker whose last probe had failed just before
it: tests/crash/test_database_restart.py, in CI; docs/benchmarks.md, "The crash tests".)
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import psycopg

from switchboard.queues.db.plans import Statement

log = logging.getLogger("switchboard.database")

# The breaker's own probe: the smallest round trip there is, on a fresh connection.
PING = Statement("ping", "SELECT 1", why="the smallest round trip there is")

PROBE_INTERVAL_SECONDS = 0.25
PROBE_CONNECT_TIMEOUT_SECONDS = 1
PROBE_LOG_SECONDS = 5.0  # a failed probe is logged at most this often
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
    if _is_pool_timeout(cause):
        return True
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate is None:
        # Connection refused, reset or dropped mid-query: psycopg gives no SQLSTATE then.
        return isinstance(cause, psycopg.OperationalError | OperationalError)
    return sqlstate.startswith("08") or sqlstate in _DOWN_SQLSTATES


def log_failure(
    logger: logging.Logger, message: str, exc: BaseException, *, listen: bool = False
) -> None:
    """Log a background loop's failure (a flush, a sweep, a LISTEN): one line when the
    database is away, which a restart makes an expected event, naming every host the
    connection would try (libpq's message names only the last); a traceback otherwise,
    which is a bug to read. The crash tests treat any traceback in a server's log as one."""
    if is_connection_failure(exc) or isinstance(exc, OSError):
        logger.warning(
            "%s (%s: %s; %s)",
            message,
            type(exc).__name__,
            first_line(exc),
            hosts_tried(listen=listen),
        )
    else:
        logger.warning(message, exc_info=exc)


def hosts_tried(*, listen: bool = False) -> str:
    """The hosts a new connection tries, in order, as an operator reads them:
    ``hosts tried: 10.0.0.1:5432, 10.0.0.2:5432`` (a multi-host URL, a failover's list)."""
    try:
        params = connection_params(listen=listen)
    except Exception:  # the settings cannot say: nothing to add
        return "hosts tried: unknown"
    hosts = str(params.get("host") or "localhost").split(",")
    ports = str(params.get("port") or "5432").split(",")
    if len(ports) == 1:
        ports *= len(hosts)
    pairs = [f"{h}:{p}" if not h.startswith("/") else h for h, p in zip(hosts, ports, strict=False)]
    return "hosts tried: " + ", ".join(pairs)


def first_line(exc: BaseException) -> str:
    """An error's first line, at most 200 characters: what a log line or a message says of it."""
    return (str(exc).strip().splitlines() or [""])[0][:200]


def _is_pool_timeout(exc: BaseException) -> bool:
    cause = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else exc
    return type(cause).__name__ in ("PoolTimeout", "OutageTimeout")


def _is_outage(exc: BaseException) -> bool:
    """A pool's timeout that already asked a fresh connection, and found none
    (queues.db.pool_checks ``_outage``)."""
    cause = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else exc
    return type(cause).__name__ == "OutageTimeout"


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Breaker:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tripped_at: float | None = None
        self._last_probe = 0.0
        # A probe in flight: callers that come while it runs wait for its answer rather than
        # be refused (after a restart the first burst of requests must go through).
        self._probed = threading.Event()
        self._probing = False
        self._aprobes: dict[int, asyncio.Future] = {}
        self._last_reached = 0.0  # when a probe last connected
        self.last_refusal: psycopg.Error | None = None  # why the last probe did not
        self._failed_probes = 0  # since the breaker tripped (logged now and then)
        self._failure_logged = 0.0
        self._watcher: threading.Thread | None = None

    @property
    def tripped(self) -> bool:
        return self._tripped_at is not None

    def trip(self, why: BaseException | str) -> None:
        if isinstance(why, BaseException) and _is_pool_timeout(why) and not _is_outage(why):
            # No pooled connection in time: is it there? Asked of a fresh connection, but never
            # on an event loop, where the connect would stop every other request of the
            # process (a crowd of long-polls meeting a stopping PostgreSQL stalled a worker's
            # loop past gunicorn's timeout, red team round 3): there the pool's own wait
            # already asked without blocking (``_outage``: it found nothing), and a plain
            # timeout is a busy pool.
            if _in_event_loop() or self.reachable():
                # The pool is busy (a burst, a loaded machine), the database is there. This
                # request is refused; the next ones are not.
                return
        with self._lock:
            if self._tripped_at is None:
                self._tripped_at = time.monotonic()
                self._last_probe = 0.0  # the next caller probes at once (a restart is quick)
                self._failed_probes = 0
                log.warning(
                    "database unavailable (%s%s; %s); answering 503 until it is back",
                    _name(why),
                    f": {first_line(why)}" if isinstance(why, BaseException) else "",
                    hosts_tried(),
                )
                if self._watcher is None or not self._watcher.is_alive():
                    self._watcher = threading.Thread(
                        target=self._recover, name="switchboard-breaker", daemon=True
                    )
                    self._watcher.start()

    def _recover(self) -> None:
        """While tripped, probe once a probe interval whether or not requests come."""
        while self._tripped_at is not None:
            time.sleep(PROBE_INTERVAL_SECONDS)
            self.admit()

    def _reached_recently(self) -> bool:
        with self._lock:
            return time.monotonic() - self._last_reached < PROBE_INTERVAL_SECONDS

    def reachable(self) -> bool:
        """Does a fresh connection reach the database? Asked at most once a probe interval
        (a pool that is merely busy would otherwise be answered with more connections);
        queues.db.pool_checks asks it for a request that waited a second for a pooled one."""
        if self._reached_recently():
            return True
        if (refused := _probe()) is not None:
            self.last_refusal = refused
            return False
        self._last_reached = time.monotonic()
        return True

    async def areachable(self) -> bool:
        """``reachable`` for the event loop: the probe connects without blocking it."""
        if self._reached_recently():
            return True
        if (refused := await _aprobe()) is not None:
            self.last_refusal = refused
            return False
        self._last_reached = time.monotonic()
        return True

    def _probed_with(self, failure: BaseException | None, took: float) -> None:
        """A probe's outcome: close the breaker, or count (and now and then log) why not."""
        if failure is None:
            self.reset()
            return
        self._failed_probes += 1
        now = time.monotonic()
        if now - self._failure_logged >= PROBE_LOG_SECONDS:
            self._failure_logged = now
            log.info(
                "database probe %d failed in %.2f s: %s: %s (%s)",
                self._failed_probes,
                took,
                _name(failure),
                first_line(failure),
                hosts_tried(),
            )

    def reset(self) -> None:
        with self._lock:
            if self._tripped_at is not None:
                down = time.monotonic() - self._tripped_at
                self._tripped_at = None
                log.warning("database reachable again after %.1f s", down)

    def _probe_due(self) -> bool:
        """Under the lock: start a probe now (True), or refuse at once: the last one failed
        less than PROBE_INTERVAL_SECONDS ago."""
        now = time.monotonic()
        if now - self._last_probe < PROBE_INTERVAL_SECONDS:
            return False
        self._last_probe = now
        return True

    def admit(self) -> bool:
        """May a request use the database now? True while the breaker is closed; while it is
        tripped, only once a probe (this call's, or one in flight it waited for) connected."""
        if self._tripped_at is None:
            return True
        with self._lock:
            if self._probing:
                waiting = True
            elif self._probe_due():
                self._probing, waiting = True, False
                self._probed.clear()
            else:
                return self._tripped_at is None
        if waiting:
            if not self._probed.wait(PROBE_CONNECT_TIMEOUT_SECONDS + 1):
                log.warning("a database probe in flight did not answer in time")
            return self._tripped_at is None
        started = time.monotonic()
        try:
            self._probed_with(_probe(), time.monotonic() - started)
        finally:
            with self._lock:
                self._probing = False
            self._probed.set()
        return self._tripped_at is None

    async def aadmit(self) -> bool:
        """``admit`` for the event loop: the probe connects without blocking it, and callers
        of this loop that come while it runs await the same probe."""
        if self._tripped_at is None:
            return True
        loop = asyncio.get_running_loop()
        key = id(loop)
        probe = self._aprobes.get(key)
        if probe is None:
            with self._lock:
                if self._probing:  # a thread's probe (the watcher's): its answer stands
                    waiting = True
                elif not self._probe_due():
                    return self._tripped_at is None
                else:
                    waiting = False
            if waiting:
                # Polled, not waited for in a thread: while the database hangs rather than
                # refuses, the watcher's probe is in flight most of the time, and a waiting
                # caller holds no executor thread (tests/queues/test_availability.py, the
                # crowd: answered within about one probe either way).
                deadline = loop.time() + PROBE_CONNECT_TIMEOUT_SECONDS + 1
                while self._probing and loop.time() < deadline:
                    await asyncio.sleep(0.01)
                if self._probing:
                    log.warning("a database probe in flight did not answer in time")
                return self._tripped_at is None
            started = time.monotonic()
            probe = self._aprobes[key] = asyncio.ensure_future(_aprobe())
            try:
                self._probed_with(await asyncio.shield(probe), time.monotonic() - started)
            finally:
                self._aprobes.pop(key, None)
        else:
            await asyncio.shield(probe)
        return self._tripped_at is None

    def note(self, exc: BaseException | None) -> None:
        """Trip if ``exc`` says the database cannot be reached."""
        if exc is not None and is_connection_failure(exc):
            self.trip(exc)


def _probe() -> psycopg.Error | None:
    """Connect afresh and ping: None if the database answered, else why not."""
    try:
        with psycopg.connect(**_probe_params(), autocommit=True) as conn:
            conn.execute(PING.text)
    except psycopg.Error as exc:
        return exc
    return None


def connection_params(*, adapters: bool = False, listen: bool = False) -> dict:
    """The parameters of a psycopg connection of our own, outside Django's pool: Django's for
    the default database (with its adapters, ``adapters=True``, so rows read the same as on
    Django's connection); or, for a LISTEN (``listen=True``) while
    SWITCHBOARD_LISTEN_DATABASE_URL is set, that database's: a direct connection past a
    pooler in transaction mode, which would drop the notifications (docs/deploy.md)."""
    from django.conf import settings
    from django.db import connection

    direct = settings.SWITCHBOARD_LISTEN_DATABASE if listen else None
    if direct:
        params = {
            "dbname": direct["NAME"],
            "user": direct["USER"] or None,
            "password": direct["PASSWORD"] or None,
            "host": direct["HOST"] or None,
            "port": direct["PORT"] or None,
            **direct["OPTIONS"],
        }
        return {k: v for k, v in params.items() if v is not None}
    params = connection.get_connection_params()
    # Not Django's cursor class nor its pool; without ``adapters``, not its adapters nor its
    # prepare threshold either (a probe or a LISTEN runs one plain statement).
    unwanted = ("cursor_factory", "pool") + (() if adapters else ("context", "prepare_threshold"))
    for key in unwanted:
        params.pop(key, None)
    return params


def _probe_params() -> dict:
    return {**connection_params(), "connect_timeout": PROBE_CONNECT_TIMEOUT_SECONDS}


async def _aprobe() -> psycopg.Error | None:
    try:
        conn = await psycopg.AsyncConnection.connect(**_probe_params(), autocommit=True)
        async with conn:
            await conn.execute(PING.text)
    except psycopg.Error as exc:
        return exc
    return None


def _name(why: BaseException | str) -> str:
    return why if isinstance(why, str) else type(why).__name__


breaker = Breaker()
