"""How the ledger's notifications reach the rooms that hear them: the channels and their
payloads as typed records (``channels``), the process's one LISTEN connection that hands them
on by channel (``listener``), a holder's watched teams (``watches``: which teams' changes
``switchboard_board`` says), and one-per-event-loop holders (``loop``) for it and for each
room's long-lived part (the agents' doorbell and token cache, the Board's hub, the caps on
long-polls, the async pool). The rooms subscribe; this package knows none of them."""

from switchboard.queues.loops import LoopLocal
from switchboard.queues.notify.channels import (
    BOARD,
    CHANNELS,
    ENDPOINT_CHANGED,
    TODO_READY,
    BoardNotice,
    Channel,
    EndpointChanged,
    TodoReady,
)
from switchboard.queues.notify.listener import DEAF, Listener, hearing, listener, listeners

__all__ = [
    "BOARD",
    "CHANNELS",
    "DEAF",
    "ENDPOINT_CHANGED",
    "TODO_READY",
    "BoardNotice",
    "Channel",
    "EndpointChanged",
    "Listener",
    "LoopLocal",
    "TodoReady",
    "hearing",
    "listener",
    "listeners",
]
