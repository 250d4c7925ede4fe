"""The queue health admin page's numbers: aggregates only, each computed by the database."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Q
from django.db.models.functions import Greatest, Now

from switchboard.queues.models import (
    Delivery,
    Endpoint,
    Outcome,
    QuestionEnding,
    SweeperStatus,
    Todo,
    TodoAttempt,
    TodoQuestion,
    TodoState,
)

# ---------------------------------------------------------------------------------------
# The queue health admin page: aggregates only, each computed by the database


@dataclass(slots=True)
class Questions:
    """Questions asked of people (issue 43), counted: open now, and ended in the last day by
    how. Never a question's text or an answer."""

    waiting: int = 0
    answered_last_day: int = 0
    unanswered_last_day: int = 0
    withdrawn_last_day: int = 0
    oldest_waiting_age: timedelta | None = None  # None: none open

    @property
    def any(self) -> bool:
        return bool(
            self.waiting
            or self.answered_last_day
            or self.unanswered_last_day
            or self.withdrawn_last_day
        )

    def add(self, other: Questions) -> None:
        self.waiting += other.waiting
        self.answered_last_day += other.answered_last_day
        self.unanswered_last_day += other.unanswered_last_day
        self.withdrawn_last_day += other.withdrawn_last_day
        ages = [a for a in (self.oldest_waiting_age, other.oldest_waiting_age) if a is not None]
        self.oldest_waiting_age = max(ages) if ages else None


@dataclass(slots=True)
class EndpointHealth:
    endpoint_id: int
    agent_id: str
    team_slug: str
    revoked: bool
    by_state: dict[str, int] = field(default_factory=dict)
    questions: Questions = field(default_factory=Questions)

    @property
    def total(self) -> int:
        return sum(self.by_state.values())


@dataclass(slots=True)
class QueueHealth:
    endpoints: list[EndpointHealth]
    by_state: dict[str, int]  # over every endpoint
    closed_last_hour: dict[str, int]  # by outcome, every outcome present
    closed_last_day: dict[str, int]
    dead_letters: int
    dead_letters_last_day: int
    oldest_pending_age: timedelta | None  # None: nothing claimable is waiting
    outbox_pending: dict[str, int]
    outbox_retrying: int  # pending deliveries that have failed at least once
    sweeper: dict | None  # None: no sweeper has ever run
    questions: Questions = field(default_factory=Questions)  # over every endpoint

    @property
    def total(self) -> int:
        return sum(self.by_state.values())

    @property
    def lease_expiries_last_hour(self) -> int:
        return sum(self.closed_last_hour[o] for o in (Outcome.LEASE_EXPIRED, Outcome.REAPED))

    @property
    def lease_expiries_last_day(self) -> int:
        return sum(self.closed_last_day[o] for o in (Outcome.LEASE_EXPIRED, Outcome.REAPED))


def queue_health() -> QueueHealth:
    """Six queries, whatever the number of rows: todos grouped by endpoint and state (one
    pass over todos), those endpoints' names, attempts closed in the last day by outcome
    (the ended_at index), questions open or ended in the last day by endpoint (the open
    question's and the ended questions' partial indexes), the outbox backlog (its due-rows
    index) and the sweeper's row. Times by the database clock."""
    day_ago, hour_ago = Now() - timedelta(days=1), Now() - timedelta(hours=1)

    # 1. Todos by endpoint and state, with the dead letters of the last day and the age of
    # the oldest todo that is claimable and waiting (pending, its claimable_at passed).
    # Grouped on the two narrow columns alone (a hash aggregate); the endpoints' names come
    # from their own small table in query 2, not through a join sorted on text.
    rows = list(
        Todo.objects.with_claimable_at()
        .order_by()
        .values("endpoint_id", "state")
        .annotate(
            n=Count("*"),
            died_last_day=Count("id", filter=Q(state=TodoState.DEAD, ended_at__gt=day_ago)),
            oldest_wait=Max(
                # since it became claimable: a not_before long past counts from creation
                ExpressionWrapper(
                    Now() - Greatest(F("claimable_at"), F("created_at")), DurationField()
                ),
                filter=Q(state=TodoState.PENDING, claimable_at__lte=Now()),
            ),
        )
    )
    # 2. The names of the endpoints that have todos.
    endpoints = {
        pk: EndpointHealth(
            endpoint_id=pk,
            agent_id=agent_id,
            team_slug=team_slug,
            revoked=revoked_at is not None,
            by_state=dict.fromkeys(TodoState.values, 0),
        )
        for pk, agent_id, team_slug, revoked_at in Endpoint.objects.filter(
            pk__in={row["endpoint_id"] for row in rows}
        ).values_list("pk", "agent_id", "team__slug", "revoked_at")
    }
    by_state = dict.fromkeys(TodoState.values, 0)
    dead_last_day, oldest = 0, None
    for row in rows:
        endpoints[row["endpoint_id"]].by_state[row["state"]] = row["n"]
        by_state[row["state"]] += row["n"]
        dead_last_day += row["died_last_day"]
        if row["oldest_wait"] is not None and (oldest is None or row["oldest_wait"] > oldest):
            oldest = row["oldest_wait"]

    # 3. Attempts closed in the last day and hour, by outcome.
    closed_hour = dict.fromkeys(Outcome.values, 0)
    closed_day = dict.fromkeys(Outcome.values, 0)
    for outcome, day, hour in (
        TodoAttempt.objects.filter(ended_at__gt=day_ago)
        .order_by()
        .values_list("outcome")
        .annotate(day=Count("*"), hour=Count("id", filter=Q(ended_at__gt=hour_ago)))
        .values_list("outcome", "day", "hour")
    ):
        closed_day[outcome], closed_hour[outcome] = day, hour

    # 4. Questions by endpoint: open now, and ended in the last day by how (counts and an
    # age only: never a question's text or an answer).
    questions = Questions()
    for endpoint_id, waiting, answered, unanswered, withdrawn, oldest_question in (
        TodoQuestion.objects.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=day_ago))
        .order_by()
        .values_list("todo__endpoint_id")
        .annotate(
            waiting=Count("id", filter=Q(ended_at__isnull=True)),
            answered=Count("id", filter=Q(ending=QuestionEnding.ANSWERED)),
            unanswered=Count("id", filter=Q(ending=QuestionEnding.UNANSWERED)),
            withdrawn=Count("id", filter=Q(ending=QuestionEnding.WITHDRAWN)),
            oldest=Max(
                ExpressionWrapper(Now() - F("asked_at"), DurationField()),
                filter=Q(ended_at__isnull=True),
            ),
        )
        .values_list(
            "todo__endpoint_id", "waiting", "answered", "unanswered", "withdrawn", "oldest"
        )
    ):
        counted = Questions(waiting, answered, unanswered, withdrawn, oldest_question)
        if endpoint_id in endpoints:  # not if its first todo came after query 1 read
            endpoints[endpoint_id].questions = counted
        questions.add(counted)

    # 5. The outbox backlog.
    outbox_pending = dict.fromkeys(Delivery.Kind.values, 0)
    retrying = 0
    for kind, n, failed in (
        Delivery.objects.filter(delivered_at__isnull=True, gave_up_at__isnull=True)
        .order_by()
        .values_list("kind")
        .annotate(n=Count("*"), failed=Count("id", filter=Q(attempts__gt=0)))
        .values_list("kind", "n", "failed")
    ):
        outbox_pending[kind], retrying = n, retrying + failed

    # 6. The sweeper's last pass.
    sweeper = (
        SweeperStatus.objects.filter(pk=1)
        .annotate(lag=ExpressionWrapper(Now() - F("last_finished_at"), DurationField()))
        .values("last_started_at", "last_finished_at", "passes", "last_report", "last_error", "lag")
        .first()
    )

    return QueueHealth(
        endpoints=sorted(endpoints.values(), key=lambda h: (h.team_slug, h.agent_id)),
        by_state=by_state,
        closed_last_hour=closed_hour,
        closed_last_day=closed_day,
        dead_letters=by_state[TodoState.DEAD],
        dead_letters_last_day=dead_last_day,
        oldest_pending_age=oldest,
        outbox_pending=outbox_pending,
        outbox_retrying=retrying,
        sweeper=dict(sweeper) if sweeper is not None else None,
        questions=questions,
    )
