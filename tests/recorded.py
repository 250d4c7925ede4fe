"""What several threads record as it happens and a test reads while they go on."""

from __future__ import annotations

import threading


class Recorded[T]:
    """Items added from any thread, copied out whole under the same lock."""

    def __init__(self) -> None:
        self._items: list[T] = []
        self._lock = threading.Lock()

    def add(self, item: T) -> None:
        with self._lock:
            self._items.append(item)

    def snapshot(self) -> list[T]:
        with self._lock:
            return list(self._items)
