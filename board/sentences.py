"""The Activity feed written as sentences: "try 2 of #123 'rebuild docs' by
harness/buildbox/ci-fixer/run-42 died after its last heartbeat at 14:21 — reaped, requeued".

A sentence is a few plain strings around a link to the todo; the template autoescapes each.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from board.drawer import Marker, marker_for_outcome
from queues.selectors import Activity

_DISPOSITIONS = {
    "done": "done",
    "retry_scheduled": "retry scheduled",
    "requeued": "requeued",
    "dead_lettered": "dead-lettered",
    "canceled": "canceled",
}

_OUTCOME_VERBS = {
    "completed": "completed",
    "failed": "failed",
    "released": "released it",
    "canceled": "was canceled",
    "revoked": "was ended by revoking its endpoint",
}

_EVENT_VERBS = {
    "create": "created",
    "claim": "claimed",
    "extend": "extended the lease on",
    "release": "released",
    "complete": "completed",
    "fail": "failed",
    "cancel": "canceled",
    "retry_now": "retried now",
    "rerun": "reran",
    "revoked": "dead-lettered",
}


@dataclass(frozen=True, slots=True)
class Sentence:
    at: datetime
    todo_id: int | None
    lead: str  # before the todo link
    title: str  # the todo's title, quoted after the link
    rest: str  # after the title
    marker: Marker | None
    kind: str  # "attempt" or the event kind


def _clock(value: datetime | None) -> str:
    return timezone.localtime(value).strftime("%H:%M") if value else ""


def sentence(item: Activity) -> Sentence:
    if item.attempt is not None:
        return _attempt_sentence(item)
    return _event_sentence(item)


def _attempt_sentence(item: Activity) -> Sentence:
    a = item.attempt
    who = a.claimant or (a.endpoint.agent_id if a.endpoint else None)
    who = who or (f"{a.user.get_username()} (by hand)" if a.user else "someone")
    if a.outcome in ("lease_expired", "reaped"):
        if a.last_heartbeat_at:
            happened = f"died after its last heartbeat at {_clock(a.last_heartbeat_at)}"
        else:
            happened = f"died without a heartbeat (claimed at {_clock(a.claimed_at)})"
        how = "reaped" if a.outcome == "reaped" else "lease expired, taken over"
        happened = f"{happened} — {how}, {_DISPOSITIONS.get(a.disposition, a.disposition)}"
    else:
        happened = _OUTCOME_VERBS.get(a.outcome, a.outcome)
        if a.disposition not in ("done", "canceled"):
            happened += f" — {_DISPOSITIONS.get(a.disposition, a.disposition)}"
    return Sentence(
        at=item.at,
        todo_id=item.todo_id,
        lead=f"try {a.attempt} of",
        title=item.title,
        rest=f"by {who} {happened}" + (f" (round {a.round})" if a.round > 1 else ""),
        marker=marker_for_outcome(a.outcome),
        kind="attempt",
    )


def _event_sentence(item: Activity) -> Sentence:
    e = item.event
    if e.actor_user is not None:
        who = e.actor_user.get_username()
    elif e.actor_endpoint is not None:
        who = f"{e.actor_endpoint.agent_id} (requester)"
    else:
        who = "Switchboard"
    detail = e.detail or {}
    if e.todo_id is not None:
        verb = _EVENT_VERBS.get(e.kind, e.kind.replace("_", " "))
        rest = ""
        if e.kind in ("release", "complete", "fail", "cancel") and detail.get("disposition"):
            rest = f"— {_DISPOSITIONS.get(detail['disposition'], detail['disposition'])}"
        if e.kind == "rerun":
            rest = "— a new round"
        if e.kind == "revoked":
            rest = "— its endpoint was revoked"
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
        lead=f"{who} {_team_event(e.kind, detail)}",
        title="",
        rest="",
        marker=None,
        kind=e.kind,
    )


def _team_event(kind: str, detail: dict) -> str:
    agent = detail.get("agent_id", "")
    match kind:
        case "vend":
            return f"vended endpoint {agent}"
        case "rotate":
            return f"rotated the token of {agent}"
        case "revoke":
            n = detail.get("todos_dead_lettered", 0)
            return f"revoked endpoint {agent}; {n} todo{'s' if n != 1 else ''} dead-lettered"
        case "member_add":
            return f"added a member ({detail.get('role', 'member')}) to the team"
        case "member_remove":
            return "removed a member from the team"
        case "member_invite":
            return f"invited {detail.get('username', '')} to the team as {detail.get('role', 'member')}"
        case "invite_accept":
            return f"accepted an invitation and joined the team as {detail.get('role', 'member')}"
        case "invite_decline":
            return "declined an invitation to the team"
        case "invite_revoke":
            return f"withdrew the invitation of {detail.get('username', '')}"
        case "notify_url":
            host = detail.get("host")
            return (
                f"set the notify URL of {agent} to {host}"
                if host
                else (f"cleared the notify URL of {agent}")
            )
        case "notify_secret_rotate":
            return f"rotated the doorbell secret of {agent}"
        case "sink_add":
            return f"added a dead-letter sink ({detail.get('host', '')})"
        case "sink_deactivate":
            return f"paused the dead-letter sink ({detail.get('host', '')})"
        case "sink_activate":
            return f"resumed the dead-letter sink ({detail.get('host', '')})"
        case "sink_remove":
            return f"removed the dead-letter sink ({detail.get('host', '')})"
    return kind.replace("_", " ")
