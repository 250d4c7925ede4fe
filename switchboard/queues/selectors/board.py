"""The Board's other reads: Activity, endpoints, people, teams and their sinks, scoped by the
team ids the caller took from the user's own memberships."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import (
    Count,
    F,
    IntegerField,
    Max,
    OuterRef,
    Q,
    Subquery,
)
from django.db.models.functions import Coalesce, JSONObject

from switchboard.queues import db, sql
from switchboard.queues.endpoint_health import EndpointNow, endpoint_now, team_now_params
from switchboard.queues.models import (
    DIED_OUTCOMES,
    LIVE_STATES,
    DeadLetterSink,
    Delivery,
    Endpoint,
    Membership,
    Outcome,
    Team,
    Todo,
    TodoState,
)
from switchboard.queues.records import (
    ActivityEnding,
    ActivityEvent,
)
from switchboard.queues.sql.activity import ENDING_WIDTH
from switchboard.queues.sql.live import TEAM_NOW_WIDTH


@dataclass(frozen=True, slots=True)
class Activity:
    """One line of the Activity feed: an attempt that ended, or something a person (or a
    requester) did. ``attempt`` or ``event`` is set."""

    at: datetime
    todo_id: int | None
    title: str
    agent_id: str
    team_id: int
    attempt: ActivityEnding | None = None
    event: ActivityEvent | None = None


@dataclass(frozen=True, slots=True)
class ActivityFilters:
    """Activity narrowed to one todo, one endpoint's queue (and the endpoint's own team-level
    events: vend, rotate, revoke, notify URL), or one person (what they did, and how the tries
    they held by hand ended). Ids the caller took from the teams' own lists."""

    todo_id: int | None = None
    endpoint: Endpoint | None = None
    person_id: int | None = None
    kind: str = ""  # a key of ACTIVITY_KINDS ("" everything)

    @property
    def active(self) -> bool:
        return bool(self.todo_id or self.endpoint or self.person_id or self.kind)


@dataclass(frozen=True, slots=True)
class ActivityKind:
    """What one of Activity's kinds reads: tries that ended with these outcomes (None: any;
    an empty tuple: none), and events (a person's only, or none)."""

    label: str
    outcomes: tuple[str, ...] | None
    events: bool
    people_only: bool = False


# Activity narrowed to what went wrong or to what people did. (Questions and answers, once
# agents can ask a person, are one more kind here: their events, by kind.)
ACTIVITY_KINDS = {
    "": ActivityKind("Everything", None, events=True),
    "failures": ActivityKind("Failures", (Outcome.FAILED.value,), events=False),
    "deaths": ActivityKind(
        "Deaths", tuple(outcome.value for outcome in DIED_OUTCOMES), events=False
    ),
    "people": ActivityKind("People's acts", (), events=True, people_only=True),
}


def board_activity(
    team_ids: list[int],
    *,
    before: datetime | None = None,
    limit: int = 50,
    filters: ActivityFilters | None = None,
) -> list[Activity]:
    """Recent attempt endings and audited actions across the teams' queues, newest first.
    One statement (queues/sql/activity.py ``ACTIVITY``: each endpoint's endings and each
    team's events walked newest first, side by side)."""
    if not team_ids:
        return []
    params = _activity_params(team_ids, before=before, limit=limit, filters=filters)
    return [_activity(row) for row in db.fetch(sql.ACTIVITY, params)]


def _activity_params(
    team_ids: list[int], *, before: datetime | None, limit: int, filters: ActivityFilters | None
) -> dict:
    """``ACTIVITY``'s parameters."""
    filters = filters or ActivityFilters()
    endpoint = filters.endpoint
    return {
        "team_ids": team_ids,
        "before": before,
        "todo_id": filters.todo_id,
        "endpoint_id": endpoint.pk if endpoint else None,
        "endpoint_team": endpoint.team_id if endpoint else None,
        "endpoint_agent": endpoint.agent_id if endpoint else None,
        "person_id": filters.person_id,
        "limit": limit,
        **_kind_params(ACTIVITY_KINDS.get(filters.kind, ACTIVITY_KINDS[""])),
    }


def _kind_params(kind: ActivityKind) -> dict:
    return {
        "endings": kind.outcomes != (),
        "outcomes": list(kind.outcomes) if kind.outcomes else None,
        "events": kind.events,
        "people_only": kind.people_only,
    }


def board_team_now_and_feed(
    team_id: int, *, cap: int, limit: int
) -> tuple[list[EndpointNow], list[Activity]]:
    """A team's endpoints now (``queues.endpoint_health.team_now``) and its newest feed lines
    (``board_activity`` of the one team), in one statement: the Board stream's read for a
    change that moves counts and ended a try."""
    params = {
        **team_now_params(team_id, cap=cap),
        **_activity_params([team_id], before=None, limit=limit, filters=None),
    }
    now, feed = [], []
    for row in db.fetch(sql.TEAM_NOW_AND_FEED, params):
        if row[0] == 1:
            now.append(endpoint_now(team_id, row[1 : 1 + TEAM_NOW_WIDTH]))
        else:
            feed.append(_activity(row[1 + TEAM_NOW_WIDTH :]))
    now.sort(key=lambda e: e.pk)
    feed.sort(key=lambda line: line.at, reverse=True)
    return now, feed


def _activity(row) -> Activity:
    """One row of ``ACTIVITY``: (part, at, the ending's columns, the event's)."""
    part, at = row[0], row[1]
    ending, event = row[2 : 2 + ENDING_WIDTH], row[2 + ENDING_WIDTH :]
    if part == 1:
        attempt, title, agent, team_id = ActivityEnding.from_row(ending)
        return Activity(at, attempt.todo_id, title, agent, team_id, attempt=attempt)
    happened, title, agent, team_id = ActivityEvent.from_row(event)
    return Activity(at, happened.todo_id, title, agent, team_id, event=happened)


# ---------------------------------------------------------------------------------------
# The Board's other reads: endpoints, teams and their sinks, scoped by the team ids the
# caller took from the user's own memberships.


def board_endpoint(team_ids: list[int], endpoint_id: int) -> Endpoint | None:
    """An endpoint of one of these teams, or None (unknown and foreign alike)."""
    return (
        Endpoint.objects.filter(pk=endpoint_id, team_id__in=team_ids)
        .select_related("team", "paused_by")
        .first()
    )


def board_endpoint_choices(team_ids: list[int]) -> list[Endpoint]:
    """The queue page's endpoint filter: id, agent id, team name, whether revoked or paused."""
    return list(
        Endpoint.objects.filter(team_id__in=team_ids)
        .select_related("team")
        .only("id", "agent_id", "revoked_at", "paused_at", "team__name")
        .order_by("agent_id")
    )


def board_endpoint_list(team_ids: list[int]):
    """The endpoints page: each endpoint with its live todo counts and last activity, in one
    GROUP BY query for the whole list (not a query per row); active ones first."""
    live = Q(todos__state__in=LIVE_STATES)
    return (
        Endpoint.objects.filter(team_id__in=team_ids)
        .select_related("team")
        .defer("token_hash")
        .annotate(
            last_activity=Max("todos__updated_at"),
            live=Count("todos", filter=live),
            pending=Count("todos", filter=Q(todos__state=TodoState.PENDING)),
            claimed=Count("todos", filter=Q(todos__state=TodoState.CLAIMED)),
            retry_wait=Count("todos", filter=Q(todos__state=TodoState.RETRY_WAIT)),
        )
        .order_by(F("revoked_at").asc(nulls_first=True), "team__name", "agent_id")
    )


def endpoint_todo_counts(endpoint: Endpoint) -> dict[str, int]:
    """Todos of one endpoint, by state (one GROUP BY)."""
    return dict(
        Todo.objects.filter(endpoint=endpoint)
        .values("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )


def endpoint_live_todos(endpoint: Endpoint) -> int:
    return Todo.objects.filter(endpoint=endpoint, state__in=LIVE_STATES).count()


def endpoint_newest_doorbell(endpoint: Endpoint) -> Delivery | None:
    return (
        Delivery.objects.filter(endpoint=endpoint, kind=Delivery.Kind.DOORBELL)
        .order_by("-id")
        .first()
    )


def board_people(team_ids: list[int]) -> list[tuple[int, str]]:
    """(user id, username) of every member of these teams, by name: Activity's person
    filter. One query."""
    rows = (
        Membership.objects.filter(team_id__in=team_ids)
        .values_list("user_id", "user__username")
        .distinct()
        .order_by("user__username")
    )
    return list(rows)


def is_team_owner(user, team_id: int) -> bool:
    return Membership.objects.filter(
        user=user, team_id=team_id, role=Membership.Role.OWNER
    ).exists()


def owned_team_ids(user, team_ids: list[int]) -> set[int]:
    """Those of the teams the user owns (one query)."""
    rows = Membership.objects.filter(user=user, team_id__in=team_ids, role=Membership.Role.OWNER)
    return set(rows.values_list("team_id", flat=True))


def team_members(team: Team) -> list[Membership]:
    """A team's members, owners first, then by username."""
    rows = Membership.objects.filter(team=team).select_related("user")
    return sorted(
        rows, key=lambda m: (m.role != Membership.Role.OWNER, m.user.get_username().lower())
    )


def team_sink(team: Team, sink_id: int) -> DeadLetterSink | None:
    """One of this team's sinks, or None (another team's sink id reads as unknown)."""
    return DeadLetterSink.objects.filter(pk=sink_id, team=team).first()


def team_sinks(team: Team) -> list[DeadLetterSink]:
    """The team's sinks, each with its newest delivery (``last_delivery``, a JSON object) and
    how many wait to be sent, in one query (correlated subqueries on the outbox's sink index),
    active ones first. Never the secret."""
    deliveries = Delivery.objects.filter(sink=OuterRef("pk"))
    newest = deliveries.order_by("-id").values(
        last=JSONObject(
            status="last_status",
            error="last_error",
            attempts="attempts",
            created_at="created_at",
            delivered_at="delivered_at",
            gave_up_at="gave_up_at",
        )
    )[:1]
    waiting = (
        deliveries.filter(delivered_at__isnull=True, gave_up_at__isnull=True)
        .values("sink")
        .annotate(n=Count("id"))
        .values("n")
    )
    return list(
        DeadLetterSink.objects.filter(team=team)
        .defer("secret")
        .annotate(
            last_delivery=Subquery(newest),
            waiting=Coalesce(Subquery(waiting, output_field=IntegerField()), 0),
        )
        .order_by("-active", "-created_at", "-id")
    )
