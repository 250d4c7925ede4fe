"""The Activity feed written as sentences: "try 2 of #123 'rebuild docs' by
harness/buildbox/ci-fixer/run-42 died after its last heartbeat at 2026-12-01 14:21:07 PST —
reaped, requeued".

A sentence is a few plain strings around a link to the todo and, where it names one, a
time (a ``<time>`` element, shown in the reader's time zone like every other time on the
Board); the template autoescapes each string.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from switchboard.board.drawer import Marker, marker_for_outcome
from switchboard.queues.models import EventKind
from switchboard.queues.selectors import Activity

_DISPOSITIONS = {
    "done": "done",
    "retry_scheduled": "retry scheduled",
    "requeued": "requeued",
    "dead_lettered": "dead-lettered",
    "canceled": "canceled",
    "taken_over": "taken over",
}

_OUTCOME_VERBS = {
    "completed": "completed",
    "failed": "failed",
    "released": "released it",
    "canceled": "was canceled",
    "revoked": "was ended by revoking its endpoint",
    "taken_over": "was taken over by a person",
}

# A person's (or a requester's) action on a todo: the verb before the todo's title.
_TODO_EVENT_VERBS = {
    EventKind.CREATE: "created",
    EventKind.CLAIM: "claimed",
    EventKind.EXTEND: "extended the lease on",
    EventKind.RELEASE: "released",
    EventKind.COMPLETE: "completed",
    EventKind.FAIL: "failed",
    EventKind.CANCEL: "canceled",
    EventKind.RETRY_NOW: "retried now",
    EventKind.RERUN: "reran",
    EventKind.REVOKE_DEAD_LETTER: "dead-lettered",
    EventKind.TAKE_OVER: "took over",
    EventKind.ANSWER: "answered the question on",
    EventKind.UNANSWERED: "stopped waiting for an answer on",
    EventKind.START_NOW: "started",
    EventKind.CANCEL_CHILD: "canceled",
}
_CLOSING_KINDS = (EventKind.RELEASE, EventKind.COMPLETE, EventKind.FAIL, EventKind.CANCEL)


@dataclass(frozen=True, slots=True)
class Sentence:
    at: datetime
    todo_id: int | None
    lead: str  # before the todo link
    title: str  # the todo's title, quoted after the link
    rest: str  # after the title
    marker: Marker | None
    kind: str  # "attempt" or the event kind
    rest_at: datetime | None = None  # a time the sentence names, after ``rest``
    tail: str = ""  # after that time
    team_id: int = 0  # whose feed it is in (the live ticker merges the teams' lines)


def sentence(item: Activity) -> Sentence:
    said = _attempt_sentence(item) if item.attempt is not None else _event_sentence(item)
    return replace(said, team_id=item.team_id)


def _attempt_sentence(item: Activity) -> Sentence:
    a = item.attempt
    # The names come as the feed's columns (queues/sql/activity.py), not as rows.
    who = a.claimant or a.claimer_agent
    who = who or (f"{a.claimer_name} (by hand)" if a.claimer_name else "someone")
    in_round = f" (round {a.round})" if a.round > 1 else ""
    at, tail = None, ""
    if a.outcome in ("lease_expired", "reaped"):
        how = "reaped" if a.outcome == "reaped" else "lease expired, taken over"
        how = f" — {how}, {_DISPOSITIONS.get(a.disposition, a.disposition)}"
        if a.last_heartbeat_at:
            happened, at, tail = "died after its last heartbeat at", a.last_heartbeat_at, how
        else:
            happened, at = "died without a heartbeat (claimed at", a.claimed_at
            tail = f"){how}"
        tail += in_round
    else:
        happened = _OUTCOME_VERBS.get(a.outcome, a.outcome)
        if a.disposition not in ("done", "canceled"):
            happened += f" — {_DISPOSITIONS.get(a.disposition, a.disposition)}"
        happened += in_round
    return Sentence(
        at=item.at,
        todo_id=item.todo_id,
        lead=f"try {a.attempt} of",
        title=item.title,
        rest=f"by {who} {happened}",
        marker=marker_for_outcome(a.outcome),
        kind="attempt",
        rest_at=at,
        tail=tail,
    )


def _event_sentence(item: Activity) -> Sentence:
    e = item.event
    if e.actor_name is not None:
        who = e.actor_name
    elif e.actor_agent is not None:
        who = f"{e.actor_agent} (requester)"
    else:
        who = "Switchboard"
    detail = e.detail or {}
    kind = EventKind(e.kind)
    if e.todo_id is not None:
        verb = _TODO_EVENT_VERBS[kind]
        rest = ""
        if kind in _CLOSING_KINDS and detail.get("disposition"):
            rest = f"— {_DISPOSITIONS.get(detail['disposition'], detail['disposition'])}"
        if kind == EventKind.RERUN:
            rest = "— a new round"
        if kind == EventKind.REVOKE_DEAD_LETTER:
            rest = "— its endpoint was revoked"
        if kind == EventKind.UNANSWERED:
            gone = detail.get("to_state") == "dead"
            rest = (
                "— its time ran out: dead-lettered"
                if gone
                else "— its time ran out: back in the queue"
            )
        if kind == EventKind.START_NOW:
            rest = "now, without waiting for " + (
                "its children" if detail.get("waiting_for") == "children" else "the todos before it"
            )
        if kind == EventKind.CANCEL_CHILD:
            rest = f"— its parent #{detail.get('parent', '?')} was canceled"
        if kind == EventKind.TAKE_OVER and detail.get("from_endpoint"):
            rest = f"from {detail['from_endpoint']}, which held it"
        return Sentence(
            at=item.at,
            todo_id=item.todo_id,
            lead=f"{who} {verb}",
            title=item.title,
            rest=rest,
            marker=marker_for_outcome(detail.get("outcome")),
            kind=e.kind,
        )
    return Sentence(
        at=item.at,
        todo_id=None,
        lead=f"{who} {_team_event(kind, detail)}",
        title="",
        rest="",
        marker=None,
        kind=e.kind,
    )


def _team_event(kind: EventKind, detail: dict) -> str:
    """A team-level row (no todo), keyed by its kind."""
    agent = detail.get("agent_id", "")
    host = detail.get("host", "")
    role = detail.get("role", "member")
    dead = detail.get("todos_dead_lettered", 0)
    schedule = repr(detail.get("schedule", ""))
    timing = _timing_words(detail)
    words = {
        EventKind.ENDPOINT_VEND: lambda: f"vended endpoint {agent}",
        EventKind.ENDPOINT_ROTATE: lambda: f"rotated the token of {agent}",
        EventKind.ENDPOINT_REVOKE: lambda: (
            f"revoked endpoint {agent}; {dead} todo{'s' if dead != 1 else ''} dead-lettered"
        ),
        EventKind.MEMBER_ADD: lambda: f"added a member ({role}) to the team",
        EventKind.MEMBER_REMOVE: lambda: "removed a member from the team",
        EventKind.MEMBER_INVITE: lambda: (
            f"invited {detail.get('username', '')} to the team as {role}"
        ),
        EventKind.INVITE_ACCEPT: lambda: f"accepted an invitation and joined the team as {role}",
        EventKind.INVITE_DECLINE: lambda: "declined an invitation to the team",
        EventKind.INVITE_REVOKE: lambda: f"withdrew the invitation of {detail.get('username', '')}",
        EventKind.NOTIFY_URL: lambda: (
            f"set the notify URL of {agent} to {host}"
            if host
            else f"cleared the notify URL of {agent}"
        ),
        EventKind.NOTIFY_SECRET_ROTATE: lambda: f"rotated the doorbell secret of {agent}",
        EventKind.ENDPOINT_PAUSE: lambda: f"paused endpoint {agent}: its agents claim nothing",
        EventKind.ENDPOINT_RESUME: lambda: f"resumed endpoint {agent}",
        EventKind.ENDPOINT_LIMITS: lambda: (
            f"set the limits of {agent}: "
            f"{_limit_words(detail.get('max_claimed'), detail.get('max_claimed_per_key'))}"
        ),
        EventKind.SCHEDULE_ADD: lambda: f"added the schedule {schedule} to {agent}{timing}",
        EventKind.SCHEDULE_EDIT: lambda: f"changed the schedule {schedule} of {agent}{timing}",
        EventKind.SCHEDULE_PAUSE: lambda: f"paused the schedule {schedule} of {agent}",
        EventKind.SCHEDULE_RESUME: lambda: f"resumed the schedule {schedule} of {agent}",
        EventKind.SCHEDULE_REMOVE: lambda: f"removed the schedule {schedule} of {agent}",
        EventKind.SINK_ADD: lambda: f"added a dead-letter sink ({host})",
        EventKind.SINK_DEACTIVATE: lambda: f"paused the dead-letter sink ({host})",
        EventKind.SINK_ACTIVATE: lambda: f"resumed the dead-letter sink ({host})",
        EventKind.SINK_REMOVE: lambda: f"removed the dead-letter sink ({host})",
    }
    return words[kind]()


def _limit_words(max_claimed, max_claimed_per_key) -> str:
    held = f"at most {max_claimed} claimed" if max_claimed else "no cap on claimed todos"
    keyed = f"at most {max_claimed_per_key} a key" if max_claimed_per_key else "no cap a key"
    return f"{held}, {keyed}"


def _timing_words(detail: dict) -> str:
    """A schedule's when, as its add or edit row records it ("" when the edit left it)."""
    if detail.get("cron"):
        return f" ({detail['cron']}, {detail.get('timezone', 'UTC')})"
    if detail.get("interval_seconds"):
        return f" (every {detail['interval_seconds']} s)"
    return ""


# Every kind has words, on a todo or for a team (tests/board/test_activity.py checks it too).
_TEAM_KINDS = set(EventKind) - set(_TODO_EVENT_VERBS)
