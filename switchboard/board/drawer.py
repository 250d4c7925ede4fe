"""What the todo drawer shows, worked out from a TodoDetail: the rail of rounds, the strip
of tries in the selected round, the selected attempt, and which actions a person may take.
Pure functions over records (no queries), so the view stays thin and the rules testable."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from switchboard.board.reasons import dead_letter_reason
from switchboard.queues.arguments import id_from_text
from switchboard.queues.models import ClaimerKind, EventKind, Outcome, TodoState, WaitingFor
from switchboard.queues.records import AttemptRecord, EventRecord, TodoDetail, TodoRecord
from switchboard.queues.transitions import by_hand

# Outcome → (marker kind, glyph, words). Shape, glyph and colour all come from the kind.
MARKERS = {
    Outcome.COMPLETED: ("completed", "✓", "completed"),
    Outcome.FAILED: ("failed", "✕", "failed"),
    Outcome.LEASE_EXPIRED: ("died", "!", "died: lease lapsed, taken over"),
    Outcome.REAPED: ("died", "!", "died: lease lapsed, reaped"),
    Outcome.RELEASED: ("released", "↺", "released"),
    Outcome.CANCELED: ("canceled", "–", "canceled"),
    Outcome.REVOKED: ("revoked", "⊘", "revoked"),
    Outcome.TAKEN_OVER: ("released", "⇄", "taken over by a person"),
    # Not a failure: the try handed the todo to people with a question (no try spent).
    Outcome.ASKED: ("asked", "?", "asked a person"),
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
class PersonAct:
    """A person's (or a requester's) action on the todo, shown in place among the tries."""

    who: str
    words: str  # "released try 2", "reran it", "claimed it by hand"
    at: datetime
    kind: str


@dataclass(frozen=True, slots=True)
class StripItem:
    attempt: AttemptRecord | None  # None: a collapsed run, or a person's act
    marker: Marker
    hidden: int = 0  # how many tries a collapsed run stands for
    first_hidden: int = 0  # the per-round index of the first try it stands for
    act: PersonAct | None = None


@dataclass(frozen=True, slots=True)
class Lane:
    """One try on the round's time axis: where its bar starts and how wide it is (percent of
    the axis), and for a death the stretch after its last sign of life (hatched)."""

    attempt: AttemptRecord
    marker: Marker
    left: float
    width: float
    silent_left: float  # a died try: from its last heartbeat (or its claim) to its end
    silent_width: float
    duration: str
    running: bool


@dataclass(frozen=True, slots=True)
class Timeline:
    lanes: list[Lane]
    start: datetime
    end: datetime
    span: str


@dataclass(frozen=True, slots=True)
class Actions:
    claim: bool
    mine: bool  # the user holds the open attempt: complete, fail, release, extend
    theirs: bool  # someone else holds it: release their lease
    cancel: bool
    retry_now: bool
    rerun: bool
    take_over: bool = False  # an agent holds it: take it from them in one step
    start_now: bool = False  # it waits for other todos or its children: end the wait now


@dataclass(frozen=True, slots=True)
class Confirmation:
    """An act that ends someone's work or the todo itself, asked before it is done: with
    JavaScript by htmx (``dialog``), without it on a page of its own (todo_confirm.html)."""

    action: str  # the action's URL slug
    label: str  # the drawer's button
    question: str  # the confirmation page's heading, and the dialog's first sentence
    consequence: str  # the dialog's second sentence (the page says it per todo)
    button: str  # the confirmation page's button
    style: str
    offered: str  # the Actions flag that offers it

    @property
    def dialog(self) -> str:
        return f"{self.question} {self.consequence}"


@dataclass(frozen=True, slots=True)
class Confirmations:
    cancel: Confirmation
    take_over: Confirmation
    release: Confirmation

    def get(self, action: str) -> Confirmation | None:
        return next(
            (c for c in (self.cancel, self.take_over, self.release) if c.action == action), None
        )


CONFIRMATIONS = Confirmations(
    cancel=Confirmation(
        action="cancel",
        label="Cancel",
        question="Cancel this todo for good?",
        consequence="A rerun can bring it back.",
        button="Cancel the todo",
        style="danger",
        offered="cancel",
    ),
    take_over=Confirmation(
        action="take-over",
        label="Take over",
        question="Take this todo over from the agent holding it?",
        consequence="Their try ends (released, by you) and you hold the lease at once: nobody "
        "else can claim it in between, and the agent's next heartbeat or complete is refused.",
        button="Take it over",
        style="primary",
        offered="take_over",
    ),
    release=Confirmation(
        action="release",
        label="Release their lease",
        question="Release the lease held by the current holder?",
        consequence="The todo goes back to pending.",
        button="Release their lease",
        style="",
        offered="theirs",
    ),
)


@dataclass(frozen=True, slots=True)
class Budget:
    """This round's failure budget: what the cap counts (failed and died tries alike), and
    the two kinds apart, from the attempts kept."""

    spent: int
    allowed: int
    failed: int
    died: int

    @property
    def tone(self) -> str:
        return "muted" if not self.spent else "warn"


@dataclass(frozen=True, slots=True)
class Drawer:
    todo: TodoRecord
    rounds: list[Round]
    round: int
    strip: list[StripItem]
    expanded: bool  # the strip shows every try of the round (a collapsed run was opened)
    selected: AttemptRecord | None
    open_attempt: AttemptRecord | None
    result_of_record: object
    has_result_of_record: bool
    record_attempt: AttemptRecord | None  # the try whose result is of record, when kept
    reader: str  # the signed-in user's name: their own text is said to be theirs
    actions: Actions
    seen: str
    budget: Budget
    timeline: Timeline | None
    params: dict  # the query the reader chose (attempt, round, all): the refresh keeps it
    # A past round is read-only: no action is offered while the reader looks at it (only the
    # todo's current round acts; a POST naming another round is refused as stale).
    read_only: bool = False
    keepalive: bool = False  # the reader holds the lease: keep it alive, whatever round shows
    dead_reason: str = ""  # a dead letter, in words ("failed 5 of 5", "died 3 times")
    # What it waits for and what waits for it (issue 44), each {id, title, state, ...}: the
    # todos it was made after, those made after it, its children (queues/sql/waits.py).
    after: list[dict] = field(default_factory=list)
    dependents: list[dict] = field(default_factory=list)
    children: list[dict] = field(default_factory=list)

    @property
    def confirmations(self) -> Confirmations:
        return CONFIRMATIONS

    @property
    def selected_author(self) -> str:
        return author(self.selected, reader=self.reader) if self.selected else ""

    @property
    def record_author(self) -> str:
        return author(self.record_attempt, reader=self.reader) if self.record_attempt else ""

    @property
    def selected_is_record(self) -> bool:
        """The selected try's result is the result of record, shown above: not twice."""
        s, r = self.selected, self.record_attempt
        return s is not None and r is not None and s.seq == r.seq and s.result is not None

    @property
    def selected_framed(self) -> bool:
        """The selected try has text of its own to show, in its one untrusted frame."""
        s = self.selected
        if s is None:
            return False
        return bool(s.summary or s.artifact) or (
            s.result is not None and not self.selected_is_record
        )

    @property
    def selected_marker(self) -> Marker | None:
        return marker(self.selected) if self.selected else None

    @property
    def reported_nothing(self) -> bool:
        s = self.selected
        return (
            s is not None
            and not s.is_open
            and not (s.summary or s.artifact or s.question)
            and s.result is None
        )

    @property
    def selected_duration(self) -> str:
        return duration(self.selected) if self.selected else ""

    @property
    def artifact_is_link(self) -> bool:
        s = self.selected
        return bool(
            s and s.artifact and not s.artifact_truncated and s.artifact.startswith("https://")
        )


def author(attempt: AttemptRecord, *, reader: str) -> str:
    """Who wrote a try's summary, artifact and result, in the frame's words: a person's
    text is theirs, typed by hand; an agent's is its worker's."""
    if attempt.claimer_kind == ClaimerKind.PERSON:
        if attempt.user and attempt.user == reader:
            return "by you, by hand"
        return f"by {attempt.user or 'a deleted user'}, by hand"
    worker = attempt.claimant or f"endpoint {attempt.endpoint}"
    return f"written by its worker ({worker})"


def seen_stamp(todo: TodoRecord) -> str:
    """What a form saw: an action is stale when the todo's state, attempt or round moved."""
    return by_hand.seen_stamp(todo.state, todo.last_attempt_seq, todo.round)


def span(seconds: float) -> str:
    """4s, 2m 13s, 3h 05m, 4d: the Board's one way to say a length of time."""
    seconds = int(abs(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s" if minutes < 10 else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    return f"{hours // 24}d"


def duration(attempt: AttemptRecord, *, now: datetime | None = None) -> str:
    """How long a try ran: claim to end, or to now while it is open."""
    end = attempt.ended_at or now or timezone.now()
    return span((end - attempt.claimed_at).total_seconds())


def build(
    detail: TodoDetail, *, user, attempt_param=None, round_param=None, all_param=None
) -> Drawer:
    todo, attempts = detail.todo, detail.attempts  # attempts newest first
    by_seq = {a.seq: a for a in attempts}
    # The one open attempt the todo itself names: the header and the actions then cannot
    # disagree with the strip (both come from one snapshot, queues.selectors.board_todo).
    open_attempt = by_seq.get(todo.last_attempt_seq) if todo.state == TodoState.CLAIMED else None
    if open_attempt is not None and not open_attempt.is_open:
        open_attempt = None

    selected = by_seq.get(id_from_text(attempt_param))
    round_no = id_from_text(round_param)
    # Every round from the live one down, with or without tries (a rerun canceled before
    # any claim is a round too); a round older than the kept attempts shows none.
    round_numbers = list(range(todo.round, 0, -1))
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
                live=number == todo.round and todo.state in _OPEN,
                last=marker(in_round[0]) if in_round else None,
            )
        )

    completing = next(
        (a for a in attempts if a.round == todo.round and a.outcome == Outcome.COMPLETED), None
    )
    done = todo.state == TodoState.DONE
    expanded = all_param in ("1", "true", "on")
    tries = [a for a in reversed(attempts) if a.round == round_no]  # oldest first
    live_round = [a for a in attempts if a.round == todo.round]
    acts = _place(tries, [e for number, e in _rounds_of(detail.events) if number == round_no])
    read_only = round_no != todo.round
    actions = _actions(todo, open_attempt, user)
    budget = Budget(
        spent=todo.failures,
        allowed=todo.max_attempts,
        failed=sum(a.outcome == Outcome.FAILED for a in live_round),
        died=sum(a.died for a in live_round),
    )
    params = {
        key: value
        for key, value in (
            ("attempt", attempt_param),
            ("round", round_param),
            ("all", "1" if expanded else None),
        )
        if value
    }
    return Drawer(
        todo=todo,
        rounds=rounds,
        round=round_no,
        strip=_strip(tries, selected, expanded=expanded, acts=acts),
        expanded=expanded,
        selected=selected,
        open_attempt=open_attempt,
        result_of_record=(completing.result if completing else todo.result) if done else None,
        has_result_of_record=done,
        record_attempt=completing if done else None,
        reader=user.get_username(),
        actions=NO_ACTIONS if read_only else actions,
        seen=seen_stamp(todo),
        budget=budget,
        timeline=_timeline(tries),
        params=params,
        read_only=read_only,
        keepalive=actions.mine,
        dead_reason=dead_letter_reason(
            todo.dead_letter_reason,
            failures=todo.failures,
            max_attempts=todo.max_attempts,
            # What the kept tries say (the cap may have pruned some: then it says less).
            failed=budget.failed,
            died=budget.died,
        )
        if todo.state == TodoState.DEAD
        else "",
        after=detail.after,
        dependents=detail.dependents,
        children=detail.children,
    )


def _timeline(tries: list[AttemptRecord]) -> Timeline | None:
    """The selected round's tries on one time axis, from the first claim to the last end
    (or now, while one runs)."""
    if not tries:
        return None
    now = timezone.now()
    start = min(a.claimed_at for a in tries)
    end = max(max(a.ended_at or now for a in tries), start + timedelta(seconds=1))
    total = (end - start).total_seconds()

    def at(moment: datetime) -> float:
        return round(max(0.0, min(100.0, (moment - start).total_seconds() / total * 100)), 2)

    lanes = []
    for a in tries:
        left = at(a.claimed_at)
        right = at(a.ended_at or now)
        silent_left = silent_width = 0.0
        if a.died and a.ended_at:
            silent_left = at(a.last_heartbeat_at or a.claimed_at)
            silent_width = max(0.0, right - silent_left)
        lanes.append(
            Lane(
                attempt=a,
                marker=marker(a),
                left=left,
                width=max(0.6, right - left),  # a try of no length is still seen
                silent_left=silent_left,
                silent_width=silent_width,
                duration=duration(a, now=now),
                running=a.is_open,
            )
        )
    return Timeline(lanes=lanes, start=start, end=end, span=span(total))


def _strip(
    tries: list[AttemptRecord],
    selected: AttemptRecord | None,
    *,
    expanded: bool = False,
    acts: list[tuple[int, PersonAct]] | None = None,
) -> list[StripItem]:
    """Tries oldest first, with people's acts in place among them (``acts``: (position,
    act), the act coming before ``tries[position]``); a long run of one outcome with no act
    inside collapses to first, count, last (the count is a link that shows them all), unless
    the reader asked for every try."""
    acts = sorted(acts or [], key=lambda pair: pair[0])
    items: list[StripItem] = []
    i = 0
    a = 0
    while i < len(tries) or a < len(acts):
        if a < len(acts) and (i >= len(tries) or acts[a][0] <= i):
            items.append(StripItem(None, PERSON_MARKER, act=acts[a][1]))
            a += 1
            continue
        stop = acts[a][0] if a < len(acts) else len(tries)  # an act ends a run
        j = i
        kind = marker(tries[i]).kind
        while j + 1 < stop and marker(tries[j + 1]).kind == kind:
            j += 1
        run = tries[i : j + 1]
        if not expanded and len(run) >= COLLAPSE_RUN and selected not in run[1:-1]:
            items.append(StripItem(run[0], marker(run[0])))
            items.append(
                StripItem(None, marker(run[0]), hidden=len(run) - 2, first_hidden=run[1].attempt)
            )
            items.append(StripItem(run[-1], marker(run[-1])))
        else:
            items.extend(StripItem(t, marker(t)) for t in run)
        i = j + 1
    return items


PERSON_MARKER = Marker("person", "👤", "a person's action")

# Audit kind → the words after the actor's name (queues.selectors.PEOPLE_KINDS).
_ACT_WORDS = {
    EventKind.CLAIM: "claimed it by hand",
    EventKind.RELEASE: "released",
    EventKind.COMPLETE: "completed",
    EventKind.FAIL: "failed",
    EventKind.CANCEL: "canceled",
    EventKind.RETRY_NOW: "retried it now",
    EventKind.RERUN: "reran it: a new round follows",
    EventKind.TAKE_OVER: "took it over from the agent",
    EventKind.START_NOW: "started it now, ending its wait",
}


def _rounds_of(events: list[EventRecord]) -> list[tuple[int, EventRecord]]:
    """Each person's act with its round. Rounds advance exactly at reruns (and every rerun
    is audited): an act belongs to one more than the reruns before it, and a rerun ends the
    round it was made in."""
    out = []
    number = 1
    for e in events:
        if e.kind in _ACT_WORDS:
            out.append((number, e))
        if e.kind == EventKind.RERUN:
            number += 1
    return out


def _place(tries: list[AttemptRecord], events: list[EventRecord]) -> list[tuple[int, PersonAct]]:
    """Where each act stands among the round's tries (oldest first), as (position, act): the
    act comes before ``tries[position]``. An act that names an attempt (a claim by hand or a
    take-over, a release, complete, fail or cancel of a held try) stands next to it: a claim
    or take-over before the try it opened, the others after the try they ended; any other act by its time, after the
    tries claimed before it."""
    index = {t.seq: n for n, t in enumerate(tries)}
    placed = []
    for e in events:
        who = e.user or (f"{e.endpoint} (requester)" if e.endpoint else "someone")
        words = _ACT_WORDS[EventKind(e.kind)]
        seq = e.detail.get("attempt_seq")
        at = index.get(seq) if isinstance(seq, int) else None
        if at is not None and e.kind in (EventKind.CLAIM, EventKind.TAKE_OVER):
            position = at  # before the try it opened
            taken_from = e.detail.get("from_endpoint")
            if e.kind == EventKind.TAKE_OVER and isinstance(taken_from, str) and taken_from:
                words = f"took it over from {taken_from}"
        elif at is not None:
            position = at + 1
            words = f"{words} try {tries[at].attempt}"
        else:
            position = sum(t.claimed_at <= e.at for t in tries)
            if e.kind == EventKind.CANCEL and e.detail.get("from_state") == TodoState.DEAD:
                words = "canceled the dead letter"
            elif e.kind == EventKind.CANCEL:
                words = "canceled it"
        placed.append((position, PersonAct(who=who, words=words, at=e.at, kind=e.kind)))
    return placed


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
        # A person may take a todo that waits on people instead of answering its question
        # ("I'll do it myself": the question is withdrawn).
        or state == TodoState.WAITING
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
        cancel=state in _OPEN or state == TodoState.DEAD,
        retry_now=state == TodoState.RETRY_WAIT,
        rerun=state in (TodoState.DONE, TodoState.DEAD, TodoState.CANCELED),
        take_over=open_attempt is not None and open_attempt.claimer_kind == ClaimerKind.ENDPOINT,
        start_now=state == TodoState.WAITING
        and todo.waiting_for in (WaitingFor.TODOS, WaitingFor.CHILDREN),
    )


_LIVE = (TodoState.PENDING, TodoState.CLAIMED, TodoState.RETRY_WAIT)
_OPEN = (*_LIVE, TodoState.WAITING)  # not ended: its round is live, and it may be canceled
NO_ACTIONS = Actions(
    claim=False, mine=False, theirs=False, cancel=False, retry_now=False, rerun=False
)
