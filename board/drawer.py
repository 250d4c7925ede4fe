"""What the todo drawer shows, worked out from a TodoDetail: the rail of rounds, the strip
of tries in the selected round, the selected attempt, and which actions a person may take.
Pure functions over records (no queries), so the view stays thin and the rules testable."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone

from queues.arguments import id_from_text
from queues.models import ClaimerKind, Outcome, TodoState
from queues.records import AttemptRecord, TodoDetail, TodoRecord

# Outcome → (marker kind, glyph, words). Shape, glyph and colour all come from the kind.
MARKERS = {
    Outcome.COMPLETED: ("completed", "✓", "completed"),
    Outcome.FAILED: ("failed", "✕", "failed"),
    Outcome.LEASE_EXPIRED: ("died", "!", "died: lease lapsed, taken over"),
    Outcome.REAPED: ("died", "!", "died: lease lapsed, reaped"),
    Outcome.RELEASED: ("released", "↺", "released"),
    Outcome.CANCELED: ("canceled", "–", "canceled"),
    Outcome.REVOKED: ("revoked", "⊘", "revoked"),
}
OPEN_MARKER = ("open", "…", "open: holds the lease")

# A run of this many identical outcomes (not containing the selected try) collapses.
COLLAPSE_RUN = 5


@dataclass(frozen=True, slots=True)
class Marker:
    kind: str
    glyph: str
    words: str


def marker(attempt: AttemptRecord) -> Marker:
    return Marker(*(OPEN_MARKER if attempt.is_open else MARKERS[attempt.outcome]))


def marker_for_outcome(outcome: str | None) -> Marker | None:
    return Marker(*MARKERS[outcome]) if outcome in MARKERS else None


@dataclass(frozen=True, slots=True)
class Round:
    number: int
    tries: int
    live: bool
    last: Marker | None


@dataclass(frozen=True, slots=True)
class StripItem:
    attempt: AttemptRecord | None  # None: a collapsed run
    marker: Marker
    hidden: int = 0  # how many tries a collapsed run stands for


@dataclass(frozen=True, slots=True)
class Actions:
    claim: bool
    mine: bool  # the user holds the open attempt: complete, fail, release, extend
    theirs: bool  # someone else holds it: release their lease
    cancel: bool
    retry_now: bool
    rerun: bool


@dataclass(frozen=True, slots=True)
class Drawer:
    todo: TodoRecord
    rounds: list[Round]
    round: int
    strip: list[StripItem]
    selected: AttemptRecord | None
    open_attempt: AttemptRecord | None
    result_of_record: object
    has_result_of_record: bool
    actions: Actions
    seen: str

    @property
    def selected_marker(self) -> Marker | None:
        return marker(self.selected) if self.selected else None

    @property
    def reported_nothing(self) -> bool:
        s = self.selected
        return (
            s is not None and not s.is_open and not (s.summary or s.artifact) and s.result is None
        )

    @property
    def artifact_is_link(self) -> bool:
        s = self.selected
        return bool(
            s and s.artifact and not s.artifact_truncated and s.artifact.startswith("https://")
        )


def seen_stamp(todo: TodoRecord) -> str:
    """What a form saw: an action is stale when the todo's state, attempt or round moved."""
    return f"{todo.state}.{todo.last_attempt_seq}.{todo.round}"


def build(detail: TodoDetail, *, user, attempt_param=None, round_param=None) -> Drawer:
    todo, attempts = detail.todo, detail.attempts  # attempts newest first
    open_attempt = next((a for a in attempts if a.is_open), None)
    by_seq = {a.seq: a for a in attempts}

    selected = by_seq.get(id_from_text(attempt_param))
    round_no = id_from_text(round_param)
    round_numbers = sorted({a.round for a in attempts} | {todo.round}, reverse=True)
    if round_no not in round_numbers:
        round_no = selected.round if selected else todo.round
    if selected is None or selected.round != round_no:
        selected = next((a for a in attempts if a.round == round_no), None)

    rounds = []
    for number in round_numbers:
        in_round = [a for a in attempts if a.round == number]
        rounds.append(
            Round(
                number=number,
                tries=len(in_round),
                live=number == todo.round and todo.state in _LIVE,
                last=marker(in_round[0]) if in_round else None,
            )
        )

    completing = next(
        (a for a in attempts if a.round == todo.round and a.outcome == Outcome.COMPLETED), None
    )
    done = todo.state == TodoState.DONE
    return Drawer(
        todo=todo,
        rounds=rounds,
        round=round_no,
        strip=_strip([a for a in reversed(attempts) if a.round == round_no], selected),
        selected=selected,
        open_attempt=open_attempt,
        result_of_record=(completing.result if completing else todo.result) if done else None,
        has_result_of_record=done,
        actions=_actions(todo, open_attempt, user),
        seen=seen_stamp(todo),
    )


def _strip(tries: list[AttemptRecord], selected: AttemptRecord | None) -> list[StripItem]:
    """Tries oldest first; a long run of one outcome collapses to first, count, last."""
    items: list[StripItem] = []
    i = 0
    while i < len(tries):
        j = i
        kind = marker(tries[i]).kind
        while j + 1 < len(tries) and marker(tries[j + 1]).kind == kind:
            j += 1
        run = tries[i : j + 1]
        if len(run) >= COLLAPSE_RUN and selected not in run[1:-1]:
            items.append(StripItem(run[0], marker(run[0])))
            items.append(StripItem(None, marker(run[0]), hidden=len(run) - 2))
            items.append(StripItem(run[-1], marker(run[-1])))
        else:
            items.extend(StripItem(a, marker(a)) for a in run)
        i = j + 1
    return items


def _actions(todo: TodoRecord, open_attempt: AttemptRecord | None, user) -> Actions:
    now = timezone.now()
    state = todo.state
    lapsed = (
        state == TodoState.CLAIMED
        and todo.lease_expires_at is not None
        and (todo.lease_expires_at <= now)
    )
    claimable = (
        (state == TodoState.PENDING and (todo.not_before is None or todo.not_before <= now))
        or (
            state == TodoState.RETRY_WAIT
            and todo.next_retry_at is not None
            and todo.next_retry_at <= now
        )
        or lapsed
    )
    mine = bool(
        open_attempt
        and open_attempt.claimer_kind == ClaimerKind.PERSON
        and open_attempt.user == user.get_username()
    )
    return Actions(
        claim=claimable and not mine,
        mine=mine,
        theirs=open_attempt is not None and not mine,
        cancel=state in _LIVE,
        retry_now=state == TodoState.RETRY_WAIT,
        rerun=state in (TodoState.DONE, TodoState.DEAD, TodoState.CANCELED),
    )


_LIVE = (TodoState.PENDING, TodoState.CLAIMED, TodoState.RETRY_WAIT)
