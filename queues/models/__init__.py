"""The ledger's schema, by table family: teams, endpoints, todos and their attempts (with
the enums of their states and outcomes), and what operators need. Every change of a todo's
``state`` goes through ``queues.transitions``."""

from queues.models.endpoints import VERBS, Endpoint, EndpointQuerySet
from queues.models.operations import (
    DeadLetterSink,
    Delivery,
    MetricCounter,
    MetricDelta,
    SignInThrottle,
    SweeperStatus,
)
from queues.models.states import (
    DIED_OUTCOMES,
    LAPSED_OUTCOMES,
    LIVE_STATES,
    TERMINAL_STATES,
    ClaimerKind,
    Disposition,
    EventKind,
    Outcome,
    TodoState,
)
from queues.models.teams import Membership, Team, TeamInvitation, TeamInvitationQuerySet
from queues.models.todos import (
    CLAIMABLE_AT,
    SUMMARY_SEARCHABLE,
    Todo,
    TodoAttempt,
    TodoEvent,
    TodoQuerySet,
    TodoSearchDocument,
    TodoTotals,
    row_rules,
)

__all__ = [
    "CLAIMABLE_AT",
    "DIED_OUTCOMES",
    "LAPSED_OUTCOMES",
    "LIVE_STATES",
    "SUMMARY_SEARCHABLE",
    "TERMINAL_STATES",
    "VERBS",
    "ClaimerKind",
    "DeadLetterSink",
    "Delivery",
    "Disposition",
    "Endpoint",
    "EndpointQuerySet",
    "EventKind",
    "Membership",
    "MetricCounter",
    "MetricDelta",
    "Outcome",
    "SignInThrottle",
    "SweeperStatus",
    "Team",
    "TeamInvitation",
    "TeamInvitationQuerySet",
    "Todo",
    "TodoAttempt",
    "TodoEvent",
    "TodoQuerySet",
    "TodoSearchDocument",
    "TodoState",
    "TodoTotals",
    "row_rules",
]
