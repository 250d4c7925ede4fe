"""The doorbell: wakes claim_next long-polls when a todo of their endpoint becomes claimable.

Transitions ``pg_notify`` the endpoint's id on ``switchboard_todo_ready`` inside their
transaction (PostgreSQL delivers it at commit). The doorbell subscribes to that channel on
the process's LISTEN connection (queues/notify: one per event loop, which the Board's hub and
the token cache hear too), counts the rings per endpoint, and its waiters are futures in the
event loop: no thread, no database connection and no transaction held while waiting. When
the LISTEN connection is made again after a loss, every waiter is woken (they look again:
what was rung meanwhile is lost, nothing else).
"""

from __future__ import annotations

import asyncio
import random
from asyncio import FIRST_COMPLETED
from collections import defaultdict, deque

from switchboard.queues.notify import TODO_READY, Listener, LoopLocal, TodoReady, listeners

# How often a waiting endpoint's newest waiter looks again although nothing rang (jittered),
# and how often the async doorbell checks which endpoints are due.
RECHECK_SECONDS = 5.0
RECHECK_TICK_SECONDS = 0.5


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

    def __init__(self, listener: Listener) -> None:
        self._waiters: dict[int, deque[_Waiter]] = defaultdict(deque)
        self._rings: dict[int, int] = defaultdict(int)
        self._epoch = 0
        self._recheck_task: asyncio.Task | None = None
        self.waiting = 0
        self.listener = listener
        listener.subscribe(TODO_READY, self._rang)
        listener.on_connect(self.wake_everyone)  # rings missed while (re)connecting

    @property
    def listening(self) -> asyncio.Event:
        """The LISTEN connection is made (the first long-poll of a process waits for it)."""
        return self.listener.listening

    def next_connection(self) -> asyncio.Future:
        return self.listener.next_connection()

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
        self.listener.start()
        if self._recheck_task is None or self._recheck_task.done():
            self._recheck_task = asyncio.get_running_loop().create_task(
                self._recheck_forever(), name="recheck"
            )

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
        if self._recheck_task is not None:
            self._recheck_task.cancel()
        self._recheck_task = None
        self.wake_everyone()

    def _rang(self, ready: TodoReady) -> None:
        self.ring(ready.endpoint)


doorbells: LoopLocal[AsyncDoorbell] = LoopLocal(lambda loop: AsyncDoorbell(listeners.of(loop)))


def async_doorbell() -> AsyncDoorbell:
    """The doorbell of the running event loop (one per loop: a worker process has one)."""
    return doorbells.get()
