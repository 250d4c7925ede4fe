"""The doorbell: wakes claim_next long-polls when a todo of their endpoint becomes claimable.

Transitions ``pg_notify`` the endpoint's id on ``switchboard_todo_ready`` inside their
transaction (PostgreSQL delivers it at commit). One LISTEN connection per process counts the
rings per endpoint, and its waiters are futures in the event loop: no thread, no database
connection and no transaction held while waiting. If the LISTEN connection drops, it
reconnects (about once a second while the database is away) and, once it is back, wakes
every waiter (they look again: what was rung meanwhile is lost, nothing else).

The same connection hears the Board's stream channel (``switchboard_board``, board/live.py)
and the endpoints' changes (``switchboard_endpoint``, for the token cache,
agents/token_cache.py): one LISTEN connection per process, whatever it serves. The Board's
notifications are handed to ``board_hearer`` and each (re)connection is told to
``board_listening``, since what was said while it was away is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from asyncio import FIRST_COMPLETED
from collections import defaultdict, deque
from collections.abc import Callable

import psycopg

from agents.token_cache import TokenCache
from queues import db, sql
from queues.db.availability import PING, breaker, connection_params, log_failure

log = logging.getLogger(__name__)

# How often a waiting endpoint's newest waiter looks again although nothing rang (jittered),
# and how often the async doorbell checks which endpoints are due.
RECHECK_SECONDS = 5.0
RECHECK_TICK_SECONDS = 0.5
# How often the LISTEN connection is asked a ``SELECT 1``, and how long that may take before
# the connection is given up for lost (and a new one made): what a connection cut without a
# word could hide from the token cache is bounded by their sum.
LISTEN_PING_SECONDS = 5.0
LISTEN_PING_TIMEOUT_SECONDS = 5.0
# A lost LISTEN connection is tried again after this, doubling up to the most: one try a
# second at most while the database is away, so its return is heard within about a second.
RECONNECT_FIRST_SECONDS = 0.25
RECONNECT_MAX_SECONDS = 1.0
# The LISTEN connection's name in pg_stat_activity.
APPLICATION_NAME = "switchboard doorbell"


class _Waiter:
    __slots__ = ("future",)

    def __init__(self, future: asyncio.Future) -> None:
        self.future = future


class AsyncDoorbell:
    """One per event loop (each ASGI worker process has one). A ring for endpoint E wakes one
    waiter of E, not every waiter: N rings wake about N waiters, the newest first. Newest,
    not longest-waiting: a client that went away behind a proxy that does not pass the
    disconnect on leaves its long-poll open (a ghost, docs/deploy.md), and a ghost only ages,
    while a live agent polls again after every todo; so a ring goes to a live agent first
    whenever one began waiting after the ghost. A waiter whose claim found work passes the
    ring on (``pass_on``) to the next one, since PostgreSQL folds identical notifications of
    one transaction into one (a transaction that makes three todos claimable rings once), and
    a woken waiter that finds nothing stops the chain. A new LISTEN connection wakes everyone
    (they look again)."""

    def __init__(self) -> None:
        self._waiters: dict[int, deque[_Waiter]] = defaultdict(deque)
        self._rings: dict[int, int] = defaultdict(int)
        self._epoch = 0
        self._task: asyncio.Task | None = None
        self._recheck_task: asyncio.Task | None = None
        self.listening = asyncio.Event()
        self._connected: asyncio.Future | None = None  # see next_connection
        self.waiting = 0
        # The Board stream's hooks (board/live.py sets them): a payload heard, and a new
        # LISTEN connection (everything since the last one may have been missed).
        self.board_hearer: Callable[[str], None] | None = None
        self.board_listening: Callable[[], None] | None = None
        # The endpoints agents' tokens named, trusted only while this connection listens.
        self.tokens = TokenCache()

    def next_connection(self) -> asyncio.Future:
        """A future done when the LISTEN connection is next made (after a loss: the database
        is back). Shared by everyone who asks until then; not to be canceled."""
        if self._connected is None or self._connected.done():
            self._connected = asyncio.get_running_loop().create_future()
        return self._connected

    def ticket(self, endpoint_id: int) -> tuple[int, int]:
        """Where the rings of this endpoint stand now; ``wait`` returns at once if they moved
        past it (a ring between a claim that found nothing and the wait is kept)."""
        self.ensure_listening()
        return (self._epoch, self._rings[endpoint_id])

    async def wait(
        self,
        endpoint_id: int,
        ticket: tuple[int, int],
        timeout: float,
        *,
        gone: asyncio.Future | None = None,
    ) -> bool:
        """Wait until this endpoint's doorbell rings for this waiter, ``timeout`` passes, or
        ``gone`` (the client left) is done. Returns whether it rang. A ring that reached a
        waiter whose client had left is passed on to the next waiter."""
        if (self._epoch, self._rings[endpoint_id]) != ticket:
            return True
        future = asyncio.get_running_loop().create_future()
        waiter = _Waiter(future)
        queue = self._waiters[endpoint_id]
        queue.append(waiter)
        self.waiting += 1
        try:
            pending = {future} if gone is None else {future, gone}
            done, _ = await asyncio.wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            return future in done
        finally:
            self.waiting -= 1
            if not future.done():
                future.cancel()
            elif gone is not None and gone.done():
                self.pass_on(endpoint_id)  # it rang for a waiter no longer there
            try:
                queue.remove(waiter)
            except ValueError:
                pass  # woken: already taken off
            if not queue and self._waiters.get(endpoint_id) is queue:
                del self._waiters[endpoint_id]

    def ring(self, endpoint_id: int) -> None:
        self._rings[endpoint_id] += 1
        self.pass_on(endpoint_id)

    def pass_on(self, endpoint_id: int) -> None:
        """Wake the newest waiter of this endpoint, if any."""
        queue = self._waiters.get(endpoint_id)
        while queue:
            waiter = queue.pop()
            if not waiter.future.done():
                waiter.future.set_result(None)
                return

    def wake_everyone(self) -> None:
        self._epoch += 1
        for queue in self._waiters.values():
            for waiter in queue:
                if not waiter.future.done():
                    waiter.future.set_result(None)
            queue.clear()

    def ensure_listening(self) -> None:
        if self._task is None or self._task.done():
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._listen_forever(), name="switchboard-doorbell")
            self._recheck_task = loop.create_task(self._recheck_forever(), name="recheck")

    async def _recheck_forever(self) -> None:
        """Todos also become claimable by the clock alone (not_before passing, a lease
        lapsing, a retry coming due), which rings nothing. So every RECHECK_SECONDS (with
        jitter, so thousands of waiters of many endpoints do not look in one instant) the
        newest waiter of each endpoint is woken to look; if it finds work it passes
        the ring on. One look per endpoint, not one per waiter."""
        due: dict[int, float] = {}
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(RECHECK_TICK_SECONDS)
            now = loop.time()
            for endpoint_id in list(self._waiters):
                at = due.setdefault(endpoint_id, now + RECHECK_SECONDS * random.uniform(0.5, 1))
                if now >= at:
                    due[endpoint_id] = now + RECHECK_SECONDS * random.uniform(0.8, 1.2)
                    self.pass_on(endpoint_id)
            for endpoint_id in list(due):
                if endpoint_id not in self._waiters:
                    del due[endpoint_id]

    async def stop(self) -> None:
        for task in (self._task, self._recheck_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._task = self._recheck_task = None
        self.listening.clear()
        self.tokens.listening(False)
        self.wake_everyone()

    def _heard(self, notify: psycopg.Notify) -> None:
        if notify.channel == sql.BOARD_CHANNEL:
            if self.board_hearer is not None:
                self.board_hearer(notify.payload)
        elif notify.channel == sql.ENDPOINT_CHANNEL:
            self.tokens.heard(notify.payload)
        elif notify.payload.isdigit():
            self.ring(int(notify.payload))

    async def _listen_forever(self) -> None:
        backoff = RECONNECT_FIRST_SECONDS
        lost_at: float | None = None  # when the connection was lost, until it is back
        while True:
            try:
                params = connection_params(listen=True)
                conn = await psycopg.AsyncConnection.connect(
                    **{**params, "application_name": APPLICATION_NAME},
                    autocommit=True,
                    prepare_threshold=None,  # one plain statement at a time, poolers included
                )
                async with conn:
                    for listen in LISTENS:
                        await conn.execute(listen.text)
                    self.listening.set()
                    if self._connected is not None and not self._connected.done():
                        self._connected.set_result(None)
                    breaker.reset()
                    self.wake_everyone()  # rings missed while (re)connecting
                    if self.board_listening is not None:
                        self.board_listening()
                    if lost_at is not None:
                        log.warning(
                            "doorbell: LISTEN connection back after %.1f s",
                            time.monotonic() - lost_at,
                        )
                    backoff, lost_at = RECONNECT_FIRST_SECONDS, None
                    await self._hear_forever(conn)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.listening.clear()
                self._deaf()
                if lost_at is None:  # said once an outage; its end is said too
                    lost_at = time.monotonic()
                    _log_lost(exc)
                # Not a trip of the breaker: a LISTEN connection lost in a restart nobody
                # sent a request through would have every request refused until a probe
                # passed (tests/crash/test_database_restart.py, the quiet restart); the
                # requests' own failures say whether the database is down. Nor a wake of
                # the waiters: what they would look at may be gone too (they look when it
                # is back, woken then, or at their recheck).
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RECONNECT_MAX_SECONDS)

    async def _hear_forever(self, conn: psycopg.AsyncConnection) -> None:
        """Hand on what the connection hears, and every LISTEN_PING_SECONDS prove both that
        it is there (a ping that does not return in time is a connection lost: raised) and
        that it hears: a fresh nonce is said from another session (the async pool's) and must
        come back on this one. The token cache is trusted from the moment a nonce comes back
        until a round passes without it. A connection that answers queries and hears nothing
        (a transaction pooler drops every notification that arrives between its client's
        transactions, and hands a session its own at once, so the nonce must come from
        elsewhere) leaves the process looking every token up, and saying so (``hearing``)."""
        loop = asyncio.get_running_loop()
        while True:
            async with asyncio.timeout(LISTEN_PING_TIMEOUT_SECONDS):
                await conn.execute(PING.text)
            nonce = secrets.token_hex(8)
            said = await _say(nonce)
            heard = False
            ends = loop.time() + LISTEN_PING_SECONDS
            while (left := ends - loop.time()) > 0:
                # What arrives between two rounds is kept by psycopg for the next one.
                async for notify in conn.notifies(timeout=left):
                    if notify.channel != sql.PING_CHANNEL:
                        self._heard(notify)
                    elif notify.payload == nonce and not heard:
                        heard = True
                        self._hearing()
            if not heard:
                self._deaf(said)

    def _hearing(self) -> None:
        if not self.tokens.trusted:
            self.tokens.listening(True)
        if hearing.deaf_since is not None:
            log.warning("doorbell: this process hears its own notifications again")
        hearing.deaf_since = None

    def _deaf(self, said: bool = False) -> None:
        """Nothing said on the connection can be trusted to arrive: forget every token; and
        when a nonce was said and never heard, the process is deaf (said once)."""
        self.tokens.listening(False)
        if said and self.listening.is_set() and hearing.deaf_since is None:
            hearing.deaf_since = time.monotonic()
            log.warning("doorbell: %s", DEAF)


async def _say(nonce: str) -> bool:
    """Say ``nonce`` on the ping channel from another session (the async pool's); False if it
    could not be said (the database is away: the requests' own failures say so)."""
    try:
        # On a pooled connection, not through a plan: a request's statements are counted
        # by the executor (tests, the bench), and this is none of theirs.
        pool = await db.async_pool()
        async with pool.connection() as conn:
            await conn.execute(sql.PING_SELF.text, {"nonce": nonce})
    except Exception as exc:
        log_failure(log, "doorbell: could not say its ping", exc)
        return False
    return True


class Hearing:
    """Whether this process hears its own notifications (for /healthz): ``deaf_since`` is
    when a connected LISTEN last failed to hear its own ping, None while it hears (or while
    it is not connected at all, which the breaker and /healthz say otherwise)."""

    deaf_since: float | None = None


hearing = Hearing()
DEAF = (
    "this process does not hear its own notifications on its LISTEN connection (through a"
    " transaction pooler, every notification is dropped): every request looks its token up"
    " and long-polls wake only at their recheck; set SWITCHBOARD_LISTEN_DATABASE_URL to a"
    " direct connection (docs/deploy.md)"
)
# What the connection listens to: the doorbell's, the Board's and the endpoints' channels,
# and its own ping.
LISTENS = (sql.LISTEN_DOORBELL, sql.LISTEN_BOARD, sql.LISTEN_ENDPOINTS, sql.LISTEN_PING)


def _log_lost(exc: Exception) -> None:
    log_failure(log, "doorbell: LISTEN connection lost; reconnecting", exc, listen=True)


_async_doorbells: dict[int, AsyncDoorbell] = {}


def async_doorbell() -> AsyncDoorbell:
    """The doorbell of the running event loop (one per loop: a worker process has one)."""
    return async_doorbell_of(asyncio.get_running_loop())


def async_doorbell_of(loop: asyncio.AbstractEventLoop) -> AsyncDoorbell:
    bell = _async_doorbells.get(id(loop))
    if bell is None:
        bell = _async_doorbells[id(loop)] = AsyncDoorbell()
    return bell
