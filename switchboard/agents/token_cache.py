"""The endpoints this process's agents' tokens named, so that an agent's request is not one
statement more for its token (issue 31: with ``then`` the lookup was one of a todo's three
statements; docs/benchmarks.md, "One round trip a todo").

A cached endpoint is trusted only while the process's LISTEN connection is heard to hear
(queues/notify/listener.py): a trigger on ``endpoints`` says on ``switchboard_endpoint``, in
the transaction that made it, every change that could change a request's answer (a revoke, a
rotation, a pause or resume, its verbs; ``switchboard_endpoint_changed``,
queues/schema/functions.sql), and the cache forgets that endpoint when it hears it. A
connection that answers queries is not enough (through a transaction pooler it hears nothing):
the listener trusts it from the moment a nonce it said from another session comes back until a
ping round passes without it. While it is not trusted nothing is kept, and each request looks
its token up as before; trust starts from an empty cache, since what was said meanwhile may be
lost.

What it costs: a change is seen by every process when its notification arrives, a few
milliseconds after the commit (tests/agents/test_token_cache.py measures it), where the lookup
saw it at once. A request already past its lookup when a revoke commits finishes either way.

A lookup racing a change: a lookup that began before the change committed may return the old
row after the notification was heard. So each fill carries the ``generation`` read before its
lookup, and any forgetting moves the generation on: a fill begun before a forgetting is not
kept. A fill heard after it is kept, then forgotten by the notification that follows it.

Only live endpoints are kept (a revoked one is looked up each time, as an unknown token is);
at most MAX_ENDPOINTS, emptied when full.
"""

from __future__ import annotations

from switchboard.queues.notify import (
    ENDPOINT_CHANGED,
    EndpointChanged,
    Listener,
    LoopLocal,
    listeners,
)

MAX_ENDPOINTS = 10_000


class TokenCache:
    """One per event loop (``caches``), hearing the loop's listener. Keyed by the token's digest; each entry is the
    endpoint's row (queues.sql.ENDPOINT_FIELDS' order), from which each request builds its
    own model instance."""

    __slots__ = ("_rows", "_digests", "generation", "trusted")

    def __init__(self) -> None:
        self._rows: dict[str, tuple] = {}
        self._digests: dict[int, str] = {}  # endpoint id -> the digest it is kept under
        self.generation = 0
        self.trusted = False

    def __len__(self) -> int:
        return len(self._rows)

    def get(self, digest: str) -> tuple | None:
        return self._rows.get(digest) if self.trusted else None

    def fill(self, digest: str, endpoint_id: int, row: tuple, generation: int) -> None:
        """Keep ``row`` for ``digest`` unless anything was forgotten since ``generation`` was
        read (before the lookup that found it), or the connection is not listening."""
        if not self.trusted or generation != self.generation:
            return
        if len(self._rows) >= MAX_ENDPOINTS:
            self._rows.clear()
            self._digests.clear()
        old = self._digests.get(endpoint_id)
        if old is not None:
            self._rows.pop(old, None)
        self._rows[digest] = row
        self._digests[endpoint_id] = digest

    def holds(self, endpoint_id: int) -> bool:
        return endpoint_id in self._digests

    def heard(self, changed: EndpointChanged) -> None:
        """A notification on ``switchboard_endpoint``: one endpoint changed, or every one."""
        if changed.endpoint is not None:
            self.forget(changed.endpoint)
        else:
            self.forget_all()

    def forget(self, endpoint_id: int) -> None:
        self.generation += 1
        digest = self._digests.pop(endpoint_id, None)
        if digest is not None:
            self._rows.pop(digest, None)

    def forget_all(self) -> None:
        self.generation += 1
        self._rows.clear()
        self._digests.clear()

    def listening(self, yes: bool) -> None:
        """The LISTEN connection began hearing (True: its nonce came back) or stopped: either
        way, what was kept may have changed unheard."""
        self.forget_all()
        self.trusted = yes


def _listening_on(listener: Listener) -> TokenCache:
    cache = TokenCache()
    listener.subscribe(ENDPOINT_CHANGED, cache.heard)
    listener.on_trust(cache.listening)
    return cache


caches: LoopLocal[TokenCache] = LoopLocal(lambda loop: _listening_on(listeners.of(loop)))
