"""The process's one LISTEN connection (one per event loop: a web worker has one), which every
room that hears the ledger subscribes to by channel (queues/notify/channels.py): the agents'
doorbell and token cache, the Board's hub. It knows none of them.

It listens on every channel, hands each notification to the channel's subscribers as its
record, and proves, every PING_SECONDS, both that the connection is there (a ping that does
not return within PING_TIMEOUT_SECONDS is a connection lost) and that it *hears*: a fresh
nonce is said from another session (a connection made for it) and must come back on this
one. A
connection through a transaction pooler answers queries and hears nothing (PgBouncer drops
every notification that reaches a server connection between its client's transactions, and
hands a session its own at once: so the nonce comes from elsewhere). What the subscribers
may trust follows it: ``on_trust`` hooks are told when hearing starts (a nonce came back) and
stops (a round passed without it, or the connection was lost). A process that cannot hear
says so once in its log and in /healthz's body (``hearing``).

A lost connection is tried again about once a second (RECONNECT_*), said once when lost and
once when back; each new connection runs the ``on_connect`` hooks (what was said while there
was none is lost) and wakes ``next_connection()``'s waiters (the database is back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import defaultdict
from collections.abc import Callable

import psycopg

from switchboard.queues import sql
from switchboard.queues.db.availability import PING, breaker, connection_params, log_failure
from switchboard.queues.loops import LoopLocal
from switchboard.queues.notify.channels import CHANNELS, Channel
from switchboard.queues.notify.channels import PING as PING_CHANNEL

log = logging.getLogger(__name__)

# How often the connection proves itself, and how long a ping may take before the connection
# is given up for lost: what a connection cut without a word hides is bounded by their sum.
PING_SECONDS = 5.0
PING_TIMEOUT_SECONDS = 5.0
# A lost connection is tried again after this, doubling up to the most: one try a second at
# most while the database is away, so its return is heard within about a second.
RECONNECT_FIRST_SECONDS = 0.25
RECONNECT_MAX_SECONDS = 1.0
# The connection's name in pg_stat_activity.
APPLICATION_NAME = "switchboard listener"

DEAF = (
    "this process does not hear its own notifications on its LISTEN connection (through a"
    " transaction pooler, every notification is dropped): every request looks its token up"
    " and long-polls wake only at their recheck; set SWITCHBOARD_LISTEN_DATABASE_URL to a"
    " direct connection (docs/deploy.md)"
)


class Hearing:
    """Whether this process hears its own notifications (for /healthz): ``deaf_since`` is
    when a connected LISTEN last failed to hear its own ping, None while it hears (or while
    it is not connected at all, which the breaker and /healthz say otherwise)."""

    deaf_since: float | None = None


hearing = Hearing()


class Listener:
    def __init__(self) -> None:
        self._subscribers: dict[str, list[Callable]] = defaultdict(list)
        self._on_connect: list[Callable[[], None]] = []
        self._on_trust: list[Callable[[bool], None]] = []
        self._task: asyncio.Task | None = None
        self._connected: asyncio.Future | None = None
        self.listening = asyncio.Event()  # connected, and listening on every channel
        self.trusted = False  # a nonce of the current connection came back

    # -- subscribing

    def subscribe[T](self, channel: Channel[T], hear: Callable[[T], None]) -> None:
        """Hand each notification on ``channel`` to ``hear``, as its record."""
        self._subscribers[channel.name].append(hear)

    def on_connect(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` on each new connection: what was said while there was none is lost."""
        self._on_connect.append(hook)

    def on_trust(self, hook: Callable[[bool], None]) -> None:
        """Tell ``hook`` when hearing starts (True) and stops (False); told at once now."""
        self._on_trust.append(hook)
        hook(self.trusted)

    # -- running

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._listen_forever(), name="switchboard-listener"
            )

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        self._task = None
        self.listening.clear()
        self._trust(False)

    def next_connection(self) -> asyncio.Future:
        """A future done when the connection is next made (after a loss: the database is
        back). Shared by everyone who asks until then; not to be canceled."""
        if self._connected is None or self._connected.done():
            self._connected = asyncio.get_running_loop().create_future()
        return self._connected

    def heard(self, notify: psycopg.Notify) -> None:
        """Hand one notification to its channel's subscribers (the ping's is the listener's)."""
        subscribers = self._subscribers.get(notify.channel)
        if not subscribers:
            return
        channel = _BY_NAME[notify.channel]
        record = channel.read(notify.payload)
        if record is None:
            return
        for hear in subscribers:
            hear(record)

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
                    for channel in CHANNELS:
                        await conn.execute(channel.listen.text)
                    self.listening.set()
                    if self._connected is not None and not self._connected.done():
                        self._connected.set_result(None)
                    breaker.reset()
                    for hook in self._on_connect:
                        hook()
                    if lost_at is not None:
                        log.warning(
                            "listener: LISTEN connection back after %.1f s",
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
                    log_failure(
                        log, "listener: LISTEN connection lost; reconnecting", exc, listen=True
                    )
                # Not a trip of the breaker: a LISTEN connection lost in a restart nobody
                # sent a request through would have every request refused until a probe
                # passed (tests/crash/test_database_restart.py, the quiet restart); the
                # requests' own failures say whether the database is down.
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RECONNECT_MAX_SECONDS)

    async def _hear_forever(self, conn: psycopg.AsyncConnection) -> None:
        """Hand on what the connection hears; every PING_SECONDS, ping it (raised if it does
        not answer in time) and say a nonce from another session, which must come back."""
        loop = asyncio.get_running_loop()
        while True:
            async with asyncio.timeout(PING_TIMEOUT_SECONDS):
                await conn.execute(PING.text)
            nonce = secrets.token_hex(8)
            said = await _say(nonce)
            heard = False
            ends = loop.time() + PING_SECONDS
            while (left := ends - loop.time()) > 0:
                # What arrives between two rounds is kept by psycopg for the next one.
                async for notify in conn.notifies(timeout=left):
                    if notify.channel != PING_CHANNEL.name:
                        self.heard(notify)
                    elif notify.payload == nonce and not heard:
                        heard = True
                        self._hearing()
            if not heard:
                self._deaf(said)

    def _hearing(self) -> None:
        self._trust(True)
        if hearing.deaf_since is not None:
            log.warning("listener: this process hears its own notifications again")
        hearing.deaf_since = None

    def _deaf(self, said: bool = False) -> None:
        """Nothing said on the connection can be trusted to arrive; and when a nonce was said
        and never heard, the process is deaf (said once)."""
        self._trust(False)
        if said and self.listening.is_set() and hearing.deaf_since is None:
            hearing.deaf_since = time.monotonic()
            log.warning("listener: %s", DEAF)

    def _trust(self, yes: bool) -> None:
        was, self.trusted = self.trusted, yes
        if was != yes or not yes:  # a loss is told every time: whatever was kept may be stale
            for hook in self._on_trust:
                hook(yes)


_BY_NAME = {channel.name: channel for channel in CHANNELS}


async def _say(nonce: str) -> bool:
    """Say ``nonce`` on the ping channel from another session: a connection of its own, made
    for it and closed after (one a ping round; the async pool's connections are the
    requests', and a pool closed under it would be opened again by the ping). False if it
    could not be said (the database is away: the requests' own failures say so)."""
    try:
        conn = await psycopg.AsyncConnection.connect(
            **connection_params(), autocommit=True, prepare_threshold=None, connect_timeout=2
        )
        async with conn:
            await conn.execute(sql.PING_SELF.text, {"nonce": nonce})
    except Exception as exc:
        log_failure(log, "listener: could not say its ping", exc)
        return False
    return True


listeners: LoopLocal[Listener] = LoopLocal(lambda loop: Listener())


def listener() -> Listener:
    """This event loop's listener, started."""
    found = listeners.get()
    found.start()
    return found
