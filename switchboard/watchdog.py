"""A watchdog for the event loop: every web worker answers its long-polls, its agents' verbs
and its Board streams on one asyncio loop, so a blocking call on it (a synchronous connect,
a lock held by a thread) stops all of them at once, and past gunicorn's timeout the worker
is killed with every connection it held. The watchdog makes such a stall say where it is.

A callback on the loop notes the time every TICK_SECONDS; a thread of its own looks every
TICK_SECONDS too, and when the loop has not noted the time for longer than the threshold
(``SWITCHBOARD_LOOP_WATCHDOG_SECONDS``; 0 turns it off) it logs the loop thread's stack as
it stands, once per stall, and how long the stall lasted when it ends. The stack is logged
as plain lines (not a traceback: the crash tests fail on tracebacks, and a loaded machine
can pause a loop without any bug)."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

log = logging.getLogger("switchboard.watchdog")

TICK_SECONDS = 0.25


class LoopWatchdog:
    def __init__(self, loop: asyncio.AbstractEventLoop, threshold: float) -> None:
        self.loop = loop
        self.threshold = threshold
        self.noted = time.monotonic()
        self.stalls = 0  # stalls seen (tests read it)
        self._loop_thread: int | None = None
        self._stopped = threading.Event()

    def start(self) -> None:
        """Start watching (called on the loop)."""
        self._loop_thread = threading.get_ident()
        self._note()
        threading.Thread(target=self._watch, name="switchboard-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def _note(self) -> None:
        self.noted = time.monotonic()
        if not self._stopped.is_set():
            self.loop.call_later(TICK_SECONDS, self._note)

    def _watch(self) -> None:
        stalled_since: float | None = None
        while not self._stopped.wait(TICK_SECONDS):
            if self.loop.is_closed() or not self.loop.is_running():
                return  # the loop ended (a server stopped): nothing to watch
            late = time.monotonic() - self.noted
            if late > self.threshold and stalled_since is None:
                stalled_since = self.noted
                self.stalls += 1
                log.warning(
                    "event loop blocked for %.1f s so far; where it is now:\n%s",
                    late,
                    self._stack(),
                )
            elif late <= self.threshold and stalled_since is not None:
                log.warning("event loop ran again after %.1f s blocked", self.noted - stalled_since)
                stalled_since = None

    def _stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread or 0)
        if frame is None:
            return "  (the loop's thread is gone)"
        return "".join(
            "  " + line.replace("\n", "\n  ").rstrip() + "\n"
            for line in traceback.format_stack(frame)
        )


_watchdogs: dict[int, LoopWatchdog] = {}


def watch(threshold: float) -> LoopWatchdog | None:
    """Watch the running loop (once per loop); None when ``threshold`` is 0 (off)."""
    if threshold <= 0:
        return None
    loop = asyncio.get_running_loop()
    found = _watchdogs.get(id(loop))
    if found is None or found.loop is not loop:  # a closed loop's id may be taken again
        found = _watchdogs[id(loop)] = LoopWatchdog(loop, threshold)
        found.start()
    return found
