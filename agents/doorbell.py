"""The doorbell: wakes claim_next long-polls when a todo of their endpoint becomes claimable.

Transitions ``pg_notify`` the endpoint's id on ``switchboard_todo_ready`` inside their
transaction (PostgreSQL delivers it at commit). One LISTEN connection per process, on its own
thread, counts the rings per endpoint; waiting requests block on a condition variable and
hold no database connection or transaction. If the LISTEN connection drops, it reconnects and
wakes every waiter (they look again; nothing is lost, at worst one extra claim query).
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict

from queues import sql

log = logging.getLogger(__name__)


class Doorbell:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._rings: dict[int, int] = defaultdict(int)
        self._epoch = 0  # bumped on reconnect: every waiter wakes
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._stopping = threading.Event()
        self.listening = threading.Event()

    def ticket(self, endpoint_id: int) -> tuple[int, int]:
        """Where the rings stand now; ``wait`` returns once they move past it."""
        self._ensure_listening()
        with self._cond:
            return (self._epoch, self._rings[endpoint_id])

    def wait(self, endpoint_id: int, ticket: tuple[int, int], timeout: float) -> bool:
        """Block until this endpoint's doorbell rang after ``ticket``, or ``timeout``."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (self._epoch, self._rings[endpoint_id]) != ticket, timeout=timeout
            )

    def ring_locally(self, endpoint_id: int) -> None:
        with self._cond:
            self._rings[endpoint_id] += 1
            self._cond.notify_all()

    def _ensure_listening(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._listen_forever, name="switchboard-doorbell", daemon=True
                )
                self._thread.start()

    def _listen_forever(self) -> None:
        import time

        import psycopg
        from django.db import connection

        backoff = 0.5
        while not self._stopping.is_set():
            try:
                params = connection.get_connection_params()
                for key in ("cursor_factory", "context", "prepare_threshold", "pool"):
                    params.pop(key, None)
                with psycopg.connect(**params, autocommit=True) as conn:
                    conn.execute(sql.LISTEN_DOORBELL.text)
                    self.listening.set()
                    self._wake_everyone()  # rings missed while reconnecting
                    backoff = 0.5
                    while not self._stopping.is_set():
                        for notify in conn.notifies(timeout=1.0):
                            try:
                                endpoint_id = int(notify.payload)
                            except ValueError:
                                continue
                            self.ring_locally(endpoint_id)
                self.listening.clear()
            except Exception:
                self.listening.clear()
                log.warning("doorbell: LISTEN connection lost; reconnecting", exc_info=True)
                self._wake_everyone()
                time.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    def stop(self) -> None:
        """Close the LISTEN connection (tests drop their database afterwards)."""
        self._stopping.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        self._thread = None
        self._stopping.clear()

    def _wake_everyone(self) -> None:
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()


doorbell = Doorbell()
