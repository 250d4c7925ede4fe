"""An endpoint's health at a glance (the Board's endpoint page): its queue now, what its
agents' tries did over the last hour (per minute) and the last day (per hour), how long a
claim takes to complete, and when its agents were last seen.

Two statements (queues/sql/health.py), each reading only what it needs: the endpoint's live
todos (``todos_claimable``), then the tries it ended in the last day
(``todo_attempts_endpoint_ended``). Neither grows with the ledger's size; the second grows
with the endpoint's last day of endings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from switchboard.queues import db, sql
from switchboard.queues.db.plans import Fetch, Plan
from switchboard.queues.models import Endpoint, TodoState

MINUTES = 60  # the last hour, per minute
HOURS = 24  # the last day, per hour


@dataclass(frozen=True, slots=True)
class Endings:
    """Tries ended per bucket, oldest bucket first (the last one ends now)."""

    completed: list[int]
    failed: list[int]
    died: list[int]

    @classmethod
    def empty(cls, size: int) -> Endings:
        return cls([0] * size, [0] * size, [0] * size)

    @property
    def totals(self) -> dict[str, int]:
        return {
            "completed": sum(self.completed),
            "failed": sum(self.failed),
            "died": sum(self.died),
        }


@dataclass(frozen=True, slots=True)
class EndpointHealth:
    claimable: int  # claim_next would take these now (due pending, due retries, lapsed leases)
    held: int  # claimed, the lease live
    retry_wait: int  # waiting for their retry time
    scheduled: int  # pending, not before a later time
    oldest_claimable_age: timedelta | None  # since it became claimable; None: nothing waits
    per_minute: Endings  # MINUTES buckets
    per_hour: Endings  # HOURS buckets
    completed_last_day: int
    took_p50: float | None  # seconds from claim to complete, the last day's completions
    took_p95: float | None
    # When its agents were last seen: a lease held now, or a try that ended in the last day
    # (None: neither; older tries are not read).
    last_claim_at: datetime | None
    last_heartbeat_at: datetime | None
    last_ended_at: datetime | None
    # The newest claim and heartbeat of the tries its agents hold now (a stall's inputs).
    open_claim_at: datetime | None = None
    open_heartbeat_at: datetime | None = None
    # Of its waiting todos, those waiting on a person (a question asked, not answered yet).
    people: int = 0


def endpoint_health(endpoint: Endpoint) -> EndpointHealth:
    """The endpoint page's numbers, in two statements whatever the ledger's size."""
    params = {"endpoint_id": endpoint.pk}
    [now] = db.fetch(sql.ENDPOINT_QUEUE_NOW, params)
    (claimable, held, retry_wait, scheduled, oldest, open_claim, open_heartbeat) = now

    per_minute, per_hour = Endings.empty(MINUTES), Endings.empty(HOURS)
    day = None
    for row in db.fetch(sql.ENDPOINT_ENDINGS, params):
        grouped, hours_ago, minutes_ago, completed, failed, died = row[:6]
        if grouped == 3:  # the whole day (always one row)
            day = row
        elif grouped == 1 and hours_ago is not None and 0 <= hours_ago < HOURS:
            _put(per_hour, HOURS - 1 - hours_ago, completed, failed, died)
        elif grouped == 2 and minutes_ago is not None and 0 <= minutes_ago < MINUTES:
            _put(per_minute, MINUTES - 1 - minutes_ago, completed, failed, died)
    # The whole day's row: (grouped, -, -, completed, failed, died, p50, p95, last claim,
    # last heartbeat, last end); none when nothing ended.
    day = day or (3, None, None, 0, 0, 0, None, None, None, None, None)
    completed_day = day[3]
    p50, p95, day_claim, day_heartbeat, day_end = day[6:11]
    return EndpointHealth(
        claimable=claimable,
        held=held,
        retry_wait=retry_wait,
        scheduled=scheduled,
        oldest_claimable_age=oldest,
        per_minute=per_minute,
        per_hour=per_hour,
        completed_last_day=completed_day,
        took_p50=p50,
        took_p95=p95,
        last_claim_at=_newest(open_claim, day_claim),
        last_heartbeat_at=_newest(open_heartbeat, day_heartbeat),
        last_ended_at=day_end,
        open_claim_at=open_claim,
        open_heartbeat_at=open_heartbeat,
    )


def _put(endings: Endings, at: int, completed: int, failed: int, died: int) -> None:
    endings.completed[at] = completed
    endings.failed[at] = failed
    endings.died[at] = died


def _newest(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return max(known) if known else None


# ---------------------------------------------------------------------------------------
# A whole team at once (the Board's overview and its live stream): one statement for every
# endpoint's queue now, one for every endpoint's last hour.

AGENTS_SHOWN = 12  # per endpoint, the most recently seen first


@dataclass(frozen=True, slots=True)
class EndpointNow:
    """An endpoint of a team, its todos by state (each count stopped past ``cap``, as the
    queue's tabs count them) and its live todos' numbers."""

    pk: int
    team_id: int
    agent_id: str
    name: str
    paused_at: datetime | None
    revoked_at: datetime | None
    by_state: dict[str, int]
    claimable: int
    held: int
    retry_wait: int
    scheduled: int
    oldest_claimable_age: timedelta | None
    # The newest claim and heartbeat of the tries its agents hold now (None: none held).
    open_claim_at: datetime | None = None
    open_heartbeat_at: datetime | None = None
    # Of its waiting todos, those waiting on a person (a question asked, not answered yet).
    people: int = 0


def team_now(team_id: int, *, cap: int) -> list[EndpointNow]:
    """Every endpoint of the team, oldest first. One statement (queues/sql/live.py)."""
    rows = db.fetch(sql.TEAM_NOW, team_now_params(team_id, cap=cap))
    return [endpoint_now(team_id, row) for row in rows]


# What TEAM_NOW counts: each state, then the waiting todos that wait on a person ("state:
# waiting_for"), which the Board's nav counts apart from waits for todos and children.
COUNTED = [*TodoState.values, "waiting:people"]


def team_now_params(team_id: int, *, cap: int) -> dict:
    return {"team_id": team_id, "states": COUNTED, "cap": cap}


def endpoint_now(team_id: int, row) -> EndpointNow:
    """One row of ``TEAM_NOW``."""
    pk, agent_id, name, paused_at, revoked_at, counts, *live, claim, heartbeat = row
    claimable, held, retry_wait, scheduled, oldest = live
    *by_state, people = counts
    states = TodoState.values
    return EndpointNow(
        pk,
        team_id,
        agent_id,
        name,
        paused_at,
        revoked_at,
        dict(zip(states, by_state, strict=True)),
        claimable,
        held,
        retry_wait,
        scheduled,
        oldest,
        claim,
        heartbeat,
        people=people,
    )


@dataclass(frozen=True, slots=True)
class LastHour:
    """What an endpoint's agents did in the last hour: tries ended per minute, and who was
    seen in the last five minutes (claimant or agent id, when), the latest first."""

    per_minute: Endings
    agents: list[tuple[str, datetime]]


def team_last_hour(team_id: int) -> dict[int, LastHour]:
    """Endpoint id → its last hour, for the team's endpoints that did anything in it. One
    statement (queues/sql/live.py)."""
    found: dict[int, LastHour] = {}

    def of(endpoint_id: int) -> LastHour:
        if endpoint_id not in found:
            found[endpoint_id] = LastHour(Endings.empty(MINUTES), [])
        return found[endpoint_id]

    for part, endpoint_id, minutes_ago, completed, failed, died, who, at in db.fetch(
        sql.TEAM_LAST_HOUR, {"team_id": team_id}
    ):
        hour = of(endpoint_id)
        if part == 1 and 0 <= minutes_ago < MINUTES:
            _put(hour.per_minute, MINUTES - 1 - minutes_ago, completed, failed, died)
        elif part == 2:
            hour.agents.append((who, at))
    for hour in found.values():
        hour.agents.sort(key=lambda seen: seen[1], reverse=True)
        del hour.agents[AGENTS_SHOWN:]
    return found


# ---------------------------------------------------------------------------------------
# Stalls: an endpoint whose work waits and whose agents are not seen. The overview, the
# endpoint page, the Board's nav and /metrics all ask the same way.

STALL_HORIZON = timedelta(minutes=MINUTES)  # no threshold past what the overview reads


@dataclass(frozen=True, slots=True)
class Stall:
    """Claimable work has waited ``waiting`` (at least ``threshold``) and no agent of the
    endpoint claimed, heartbeat or ended a try (completed or failed: a death is the sweeper's
    act, not the agent's) in that time; ``seen_ago`` is when one last did, None when not in
    the last hour."""

    waiting: timedelta
    threshold: timedelta
    seen_ago: timedelta | None


def stall_threshold(agent_id: str) -> timedelta:
    """``SWITCHBOARD_STALL_SECONDS``, or the endpoint's own from
    ``SWITCHBOARD_STALL_SECONDS_BY_ENDPOINT`` (by agent id), at most an hour."""
    seconds = settings.SWITCHBOARD_STALL_SECONDS_BY_ENDPOINT.get(
        agent_id, settings.SWITCHBOARD_STALL_SECONDS
    )
    return min(timedelta(seconds=seconds), STALL_HORIZON)


def ended_ago(per_minute: Endings) -> timedelta | None:
    """The newest minute of the last hour in which the endpoint's agents completed or failed
    a try (to the minute: the last hour is read per minute); None: none did."""
    pairs = zip(reversed(per_minute.completed), reversed(per_minute.failed), strict=True)
    for ago, (completed, failed) in enumerate(pairs):
        if completed or failed:
            return timedelta(minutes=ago)
    return None


def stall(
    *,
    agent_id: str,
    paused: bool,
    revoked: bool,
    oldest_claimable_age: timedelta | None,
    open_claim_at: datetime | None,
    open_heartbeat_at: datetime | None,
    ended_ago: timedelta | None,
    at: datetime,
) -> Stall | None:
    """The endpoint's stall, or None: nothing has waited that long, an agent was seen in
    that time, or it is paused (its agents held back on purpose) or revoked."""
    if paused or revoked or oldest_claimable_age is None:
        return None
    threshold = stall_threshold(agent_id)
    if oldest_claimable_age < threshold:
        return None
    ages = [at - moment for moment in (open_claim_at, open_heartbeat_at) if moment is not None]
    if ended_ago is not None:
        ages.append(ended_ago)
    seen = max(min(ages), timedelta(0)) if ages else None
    if seen is not None and seen < threshold:
        return None
    return Stall(waiting=oldest_claimable_age, threshold=threshold, seen_ago=seen)


def endpoint_stall(
    endpoint: Endpoint | EndpointNow,
    *,
    waits: EndpointHealth | EndpointNow,
    per_minute: Endings,
    at: datetime,
) -> Stall | None:
    """An endpoint's stall, from what the overview (``team_now``, ``team_last_hour``) or the
    endpoint page (``endpoint_health``) read: the endpoint (its agent id, paused, revoked),
    its live todos' numbers (``waits``) and its last hour per minute."""
    return stall(
        agent_id=endpoint.agent_id,
        paused=endpoint.paused_at is not None,
        revoked=endpoint.revoked_at is not None,
        oldest_claimable_age=waits.oldest_claimable_age,
        open_claim_at=waits.open_claim_at,
        open_heartbeat_at=waits.open_heartbeat_at,
        ended_ago=ended_ago(per_minute),
        at=at,
    )


@dataclass(frozen=True, slots=True)
class OldestClaimable:
    """/metrics' gauge: an endpoint (not revoked) and its oldest claimable todo's wait."""

    team: str  # the team's slug
    agent_id: str
    seconds: float  # 0 when nothing is claimable


def oldest_claimable_plan() -> Plan[list[OldestClaimable]]:
    """Every live endpoint's oldest claimable wait, in one statement (queues/sql/health.py
    ``ENDPOINTS_OLDEST_CLAIMABLE``: each endpoint's live todos through todos_claimable, as
    the overview reads them)."""
    rows = yield Fetch(sql.ENDPOINTS_OLDEST_CLAIMABLE, {})
    return [
        OldestClaimable(team, agent_id, oldest.total_seconds() if oldest else 0.0)
        for team, agent_id, oldest in rows
    ]
