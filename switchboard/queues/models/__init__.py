"""The ledger's schema, by table family: teams, endpoints, todos and their attempts (with
the enums of their states and outcomes), and what operators need. Every change of a todo's
``state`` goes through ``queues.transitions``."""

from switchboard.queues.models import states
from switchboard.queues.models.endpoints import VERBS, Endpoint, EndpointQuerySet
from switchboard.queues.models.operations import (
    DeadLetterSink,
    Delivery,
    MetricCounter,
    MetricDelta,
    SignInThrottle,
    SweeperStatus,
    TaskPushConfig,
)
from switchboard.queues.models.schedules import CatchUp, Schedule
from switchboard.queues.models.states import *  # noqa: F403 (the words, listed in states.__all__)
from switchboard.queues.models.teams import Membership, Team, TeamInvitation, TeamInvitationQuerySet
from switchboard.queues.models.todos import (
    CLAIMABLE_AT,
    STANDING,
    SUMMARY_SEARCHABLE,
    Todo,
    TodoAttempt,
    TodoEvent,
    TodoQuerySet,
    TodoQuestion,
    TodoSearchDocument,
    TodoTotals,
    row_rules,
)
from switchboard.queues.models.waits import TodoAfter

__all__ = [
    "CatchUp",
    "Schedule",
    "TodoAfter",
    "CLAIMABLE_AT",
    "STANDING",
    "SUMMARY_SEARCHABLE",
    "VERBS",
    "DeadLetterSink",
    "Delivery",
    "Endpoint",
    "EndpointQuerySet",
    "Membership",
    "MetricCounter",
    "MetricDelta",
    "SignInThrottle",
    "SweeperStatus",
    "TaskPushConfig",
    "Team",
    "TeamInvitation",
    "TeamInvitationQuerySet",
    "Todo",
    "TodoAttempt",
    "TodoEvent",
    "TodoQuerySet",
    "TodoQuestion",
    "TodoSearchDocument",
    "TodoTotals",
    "row_rules",
]
__all__ += states.__all__
