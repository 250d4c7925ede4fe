"""The channels the ledger speaks on, each with its payload as a typed record, declared once
here beside where it is said. A listener subscribes to a ``Channel`` and is handed the
record (``Channel.read``), never the text; a payload that does not read as its record is
dropped with a warning, never half-read.

| channel | said by | record |
|---|---|---|
| ``switchboard_todo_ready`` | ``sql.RING_DOORBELL(S)``, in the transaction that made a todo claimable; ``sql.RING_IF_WAITING`` and ``switchboard_waits_follow()`` for a claim freed under a limit | ``TodoReady`` |
| ``switchboard_endpoint`` | ``switchboard_endpoint_changed()`` (queues/schema/functions.sql) | ``EndpointChanged`` |
| ``switchboard_board`` | ``switchboard_board_todos()``, ``switchboard_board_changed()`` (functions.sql), for a watched team | ``BoardNotice`` |
| ``switchboard_ping`` | ``sql.PING_SELF``: the listener's own proof that it hears | ``Ping`` |
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import msgspec

from switchboard.queues import sql
from switchboard.queues.db.plans import Statement

log = logging.getLogger(__name__)


class TodoReady(msgspec.Struct, frozen=True):
    """A todo of this endpoint became claimable (created, released, reaped, requeued…)."""

    endpoint: int


class EndpointChanged(msgspec.Struct, frozen=True):
    """An endpoint changed what a request's answer depends on (a revoke, a rotation, a pause,
    its verbs); ``endpoint`` None: every endpoint (the table was emptied)."""

    endpoint: int | None


class BoardNotice(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Something a watched team's Board shows changed: a todo (``new``: made; ``ended``: an
    attempt of it ended; ``changed``: anything else), an endpoint (``endpoint``: made or
    changed), or the audit trail (``event``: a person or an agent acted, on ``todo``)."""

    team: int
    what: Literal["new", "ended", "changed", "endpoint", "event"]
    endpoint: int | None = None
    todo: int | None = None

    @property
    def moves_the_feed(self) -> bool:
        """Does the team's feed (its ticker, Activity) have a new line?"""
        return self.what in ("new", "ended", "event")


class Ping(msgspec.Struct, frozen=True):
    nonce: str


def _endpoint_id(text: str) -> TodoReady:
    return TodoReady(endpoint=int(text))


def _endpoint_changed(text: str) -> EndpointChanged:
    return EndpointChanged(endpoint=None if text == "*" else int(text))


def _json[T](record: type[T]) -> Callable[[str], T]:
    decoder = msgspec.json.Decoder(record)
    return lambda text: decoder.decode(text)


@dataclass(frozen=True, slots=True)
class Channel[T]:
    """One channel: its name, the statement that listens to it, and how its payload reads."""

    name: str
    listen: Statement
    decode: Callable[[str], T]

    def read(self, payload: str) -> T | None:
        """The payload as its record; None (said in the log) when it does not read as one."""
        try:
            return self.decode(payload)
        except (ValueError, msgspec.ValidationError, msgspec.DecodeError) as exc:
            log.warning("a %s notification did not read as its record: %s", self.name, exc)
            return None


TODO_READY: Channel[TodoReady] = Channel(sql.DOORBELL_CHANNEL, sql.LISTEN_DOORBELL, _endpoint_id)
ENDPOINT_CHANGED: Channel[EndpointChanged] = Channel(
    sql.ENDPOINT_CHANNEL, sql.LISTEN_ENDPOINTS, _endpoint_changed
)
BOARD: Channel[BoardNotice] = Channel(sql.BOARD_CHANNEL, sql.LISTEN_BOARD, _json(BoardNotice))
PING: Channel[Ping] = Channel(sql.PING_CHANNEL, sql.LISTEN_PING, lambda text: Ping(nonce=text))

CHANNELS: tuple[Channel, ...] = (TODO_READY, ENDPOINT_CHANGED, BOARD, PING)
