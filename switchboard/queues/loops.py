"""One of a thing per event loop: a web worker runs one loop, and each of its long-lived
parts (the LISTEN connection, the doorbell, the Board's hub, the long-polls' caps, the async
pool) is made once for it, on first use; a test may run several loops, each with its own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class LoopLocal[T]:
    """``get()``: this running loop's T, made by ``make(loop)`` on first use; ``of(loop)``: a
    given loop's (a signal handler's, a test's thread)."""

    def __init__(self, make: Callable[[asyncio.AbstractEventLoop], T]) -> None:
        self._make = make
        self._made: dict[int, tuple[asyncio.AbstractEventLoop, T]] = {}

    def get(self) -> T:
        return self.of(asyncio.get_running_loop())

    def of(self, loop: asyncio.AbstractEventLoop) -> T:
        found = self._made.get(id(loop))
        if found is None or found[0] is not loop:  # a closed loop's id may be taken again
            found = self._made[id(loop)] = (loop, self._make(loop))
        return found[1]

    def all(self) -> list[T]:
        """Every loop's (a test's, or the bench's, look across the loops it started)."""
        return [made for _, made in list(self._made.values())]

    def pop(self) -> T | None:
        """Forget this running loop's, returning it (None if it had none)."""
        found = self._made.pop(id(asyncio.get_running_loop()), None)
        return found[1] if found is not None else None
