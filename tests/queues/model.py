"""An in-memory model of SPEC's todo state table, for tests/queues/test_state_machine.py.

Plain Python, no database. From SPEC.md ("Todo states and transitions" and its closing table,
"Which attempt a call means", "Fencing", "Rounds", "Tenancy", "Waiting, and the agents'
protocols"), issue 43 ("Ask a person") and the decisions recorded in docs/ledger.md, the
model says what each call should do: succeed or raise which error, the todo's new state, the
attempt's outcome and disposition, the counters, the rows kept under the history cap, and
each question an agent asked with how it ended; and, from issue 44 and docs/ledger.md ("Waiting
for todos, for children, and keys"), what waits for todos (``after``), for children, and what
a key's limit refuses. It is written from those documents, not from queues/transitions/, so
that the two can disagree.

Time is not modelled. A lease lapses, a retry falls due, or a question's time runs out, only
when the test says so (it backdates the row); every other lease, retry and question's time is
far enough away not to pass during an example. Which claimable todo ``claim_next`` takes ("the
highest priority, then the oldest") needs the rows' timestamps, so the caller passes an
ordering key read from them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CONFLICT, NOT_FOUND, UNAUTHORIZED, INVALID = "conflict", "not_found", "unauthorized", "invalid"
LIVE = ("pending", "claimed", "retry_wait")
TERMINAL = ("done", "dead", "canceled")
# Not ended: what a cancel or a revocation may still end (a waiting todo is not claimable
# by agents, nor reaped, but it is not over).
OPEN = (*LIVE, "waiting")
DIED = ("lease_expired", "reaped")

# verb: (outcome, the todo's state when the budget allows, counts as a failure)
CLOSES = {
    "complete": ("completed", "done", False),
    "fail": ("failed", "retry_wait", True),
    "release": ("released", "pending", False),
    "cancel": ("canceled", "canceled", False),
    # release with a question (issue 43): no try spent, the todo waits for an answer
    "ask": ("asked", "waiting", False),
    # release with wait_for_children (issue 44): waits while a child is open, else a release
    "wait": ("released", "waiting", False),
}
# What a repeat of a close is matched on: a wait for children is a release (outcome released).
AS_VERB = {"wait": "release"}
# The disposition follows from the state the todo went to.
DISPOSITION = {
    "done": "done",
    "retry_wait": "retry_scheduled",
    "pending": "requeued",
    "dead": "dead_lettered",
    "canceled": "canceled",
    "waiting": "waiting",
}
# Stands in for a lease token until the real claim hands the token over.
FENCED = "<fenced: token not yet known>"


@dataclass(frozen=True)
class Who:
    """A caller: an endpoint (an agent) or a human, by the name the test gave it."""

    name: str
    human: bool
    teams: frozenset[int]


@dataclass
class Attempt:
    seq: int
    round: int
    attempt: int
    claimer: str  # the name of the endpoint or human who claimed
    human: bool  # claimer_kind owner
    token: str | None  # None: not fenced
    outcome: str = ""  # "" while open, as stored
    disposition: str = ""
    closer: str | None = None  # who ended it by a verb (None: takeover, sweeper, revocation)
    verb: str | None = None  # the verb that ended it
    ended_by: str | None = None  # a human recorded as having ended someone else's attempt

    @property
    def open(self) -> bool:
        return self.outcome == ""

    @property
    def died(self) -> bool:
        return self.outcome in DIED


@dataclass
class Question:
    """A question an attempt asked (one per asking attempt, kept even when the history cap
    prunes the attempt). What answers it: ``choices``, a form (``schema``) or free text;
    ``within``: whether it has a time to run out; ``due``: the test backdated that time."""

    takes: str  # "choices", "schema" or "free"
    within: bool
    on_no_answer: str  # "requeue" or "dead_letter"
    seq: int = 0  # the asking attempt's, once the ask is made
    due: bool = False
    ending: str = ""  # "" while open; answered, unanswered or withdrawn
    answered_by: str | None = None  # the person or endpoint that answered
    answer: Any = None

    @property
    def open(self) -> bool:
        return self.ending == ""


@dataclass
class Todo:
    id: int
    endpoint: str
    requester: str | None
    max_attempts: int
    priority: int
    state: str = "pending"
    attempt: int = 0
    failures: int = 0
    round: int = 1
    last_attempt_seq: int = 0
    attempts_pruned: int = 0
    dead_letter_reason: str = ""
    lapsed: bool = False  # claimed, and the test backdated the lease
    retry_due: bool = False  # retry_wait, and the test backdated next_retry_at
    attempts: dict[int, Attempt] = field(default_factory=dict)  # the rows kept, by seq
    questions: dict[int, Question] = field(default_factory=dict)  # by the asking seq
    by_person: bool = False  # made by a person (then no endpoint answers its questions)
    # Issue 44. What it waits for while ``waiting``: people, todos or children.
    waits_for: str = ""
    # after: each prerequisite's id and the state it ended in ('' until it ends), marked once
    after: dict[int, str] = field(default_factory=dict)
    after_policy: str = "all_done"
    after_left: int = 0
    parent: int | None = None
    children_open: int = 0
    key: str = ""

    @property
    def open_question(self) -> Question | None:
        return next((q for q in self.questions.values() if q.open), None)

    @property
    def waiting_for(self) -> str:
        return self.waits_for if self.state == "waiting" else ""

    @property
    def open_attempt(self) -> Attempt | None:
        attempt = self.attempts.get(self.last_attempt_seq)
        return attempt if attempt is not None and attempt.open else None

    @property
    def claimable(self) -> bool:
        """By an agent. A person may claim a waiting todo too (``claimable_by_hand``)."""
        return (
            self.state == "pending"
            or (self.state == "retry_wait" and self.retry_due)
            or (self.state == "claimed" and self.lapsed)
        )

    def may_run_out(self) -> bool:
        """Waiting on a question with a time that has not run out yet."""
        question = self.open_question
        return (
            self.state == "waiting"
            and question is not None
            and question.within
            and not question.due
        )

    @property
    def claimable_by_hand(self) -> bool:
        return self.claimable or self.state == "waiting"

    def leave_wait(self) -> None:
        """The todo leaves ``waiting`` otherwise than by an answer or its time running out
        (a person claims or cancels it, its endpoint is revoked): the question is withdrawn."""
        question = self.open_question
        if question is not None:
            question.ending = "withdrawn"

    def newest_closed(self) -> Attempt | None:
        closed = [a for a in self.attempts.values() if not a.open]
        return max(closed, key=lambda a: a.seq) if closed else None

    def prior(self) -> tuple[int, ...]:
        """prior_attempts: the five newest closed attempts kept, newest first."""
        closed = sorted((a.seq for a in self.attempts.values() if not a.open), reverse=True)
        return tuple(closed[:5])


@dataclass(frozen=True)
class Expect:
    """What a call should do: raise ``error``, or leave the todo in ``state`` having
    opened, closed or replayed the attempt ``seq`` (with its outcome and disposition)."""

    error: str | None = None
    state: str | None = None
    seq: int | None = None
    outcome: str | None = None
    disposition: str | None = None
    replayed: bool = False
    prior: tuple[int, ...] = ()
    todo_id: int | None = None


def fence_ok(attempt: Attempt, token: str | None) -> bool:
    """A fenced attempt needs its own token; an unfenced one takes none."""
    return token == attempt.token if attempt.token is not None else token is None


class Ledger:
    def __init__(
        self, *, endpoints: dict[str, int], humans: dict[str, frozenset[int]], history_cap: int
    ) -> None:
        # Below 2, a takeover's closed row could be the one over the cap; SPEC's "oldest
        # closed rows" and the ledger's one-statement claim then differ by a claim.
        assert history_cap >= 2
        self.endpoint_team = endpoints
        self.human_teams = humans
        self.history_cap = history_cap
        self.revoked: set[str] = set()
        self.todos: dict[int, Todo] = {}
        self.max_per_key: dict[str, int] = {}  # endpoint: its max_claimed_per_key, if set
        # The todos a trigger moved or counted during the last call (their dependents, their
        # parents), besides the one the call named.
        self.ripple: set[int] = set()

    # -- who sees what (SPEC, Tenancy) ---------------------------------------------------

    def who(self, name: str) -> Who:
        if name in self.human_teams:
            return Who(name, True, self.human_teams[name])
        return Who(name, False, frozenset({self.endpoint_team[name]}))

    def sees(self, who: Who, todo: Todo, *, as_requester: bool) -> bool:
        """A human sees the queues of their teams' endpoints; an agent its own queue, and
        (to read or cancel) what it sent as requester."""
        if who.human:
            return self.endpoint_team[todo.endpoint] in who.teams
        return todo.endpoint == who.name or (as_requester and todo.requester == who.name)

    # -- creating ------------------------------------------------------------------------

    def create(
        self,
        endpoint: str,
        requester: str | None,
        *,
        after: list[int] = (),
        policy: str = "all_done",
        parent: int | None = None,
        by: str | None = None,
    ) -> Expect:
        """A create; with ``after`` (ids, unknown ones too), waiting for them unless the policy
        is met already, and refused when one ended so that it never can be (conflict); with
        ``parent``, only by ``by``, the holder of that claimed todo of the team."""
        if endpoint in self.revoked or requester in self.revoked:
            return Expect(UNAUTHORIZED)
        team = self.endpoint_team[endpoint]
        if parent is not None:
            held = self.todos.get(parent)
            if held is None or self.endpoint_team[held.endpoint] != team:
                return Expect(NOT_FOUND)
            attempt = held.open_attempt
            if held.state != "claimed" or attempt is None or attempt.claimer != by:
                return Expect(CONFLICT)
        if after:
            found = [self.todos.get(i) for i in after]
            if any(t is None or self.endpoint_team[t.endpoint] != team for t in found):
                return Expect(NOT_FOUND)
            if policy == "all_done" and any(t.state in ("dead", "canceled") for t in found):
                return Expect(CONFLICT)
            if self.left(found, policy):
                return Expect(state="waiting")
        return Expect(state="pending")

    @staticmethod
    def left(found: list[Todo], policy: str) -> int:
        return sum(
            t.state != "done" if policy == "all_done" else t.state not in TERMINAL for t in found
        )

    def add(
        self,
        todo_id: int,
        *,
        endpoint: str,
        requester: str | None,
        after: list[int] = (),
        policy: str = "all_done",
        parent: int | None = None,
        **kw: Any,
    ) -> Todo:
        todo = Todo(id=todo_id, endpoint=endpoint, requester=requester, **kw)
        if after:
            found = [self.todos[i] for i in after]
            todo.after = {t.id: (t.state if t.state in TERMINAL else "") for t in found}
            todo.after_policy = policy
            todo.after_left = self.left(found, policy)
            if todo.after_left:
                todo.state, todo.waits_for = "waiting", "todos"
        if parent is not None:
            todo.parent = parent
            self.todos[parent].children_open += 1
        self.todos[todo_id] = todo
        return todo

    # -- what the triggers do (issue 44) -------------------------------------------------

    def settle(self, moved: list[tuple[Todo, str]]) -> None:
        """What follows in the transaction of one statement that moved ``moved`` (each with
        the state it left), once every row of it moved: a todo that ended marks each edge to
        it (once) and counts down each dependent still waiting for todos, the last count
        making it pending, or an ending other than done killing an ``all_done`` one
        (``after_ended``); a child's ending (or rerun) moves its parent's count of open
        children, the last making a parent that waits for them pending."""
        for todo, old in moved:
            ended, was = todo.state in TERMINAL, old in TERMINAL
            if ended == was:
                continue
            if ended:
                killed = []
                for dep in self.todos.values():
                    if dep.after.get(todo.id) != "":
                        continue
                    dep.after[todo.id] = todo.state
                    if dep.state != "waiting" or dep.waits_for != "todos":
                        continue
                    self.ripple.add(dep.id)
                    dep.after_left -= 1
                    if dep.after_policy == "all_done" and todo.state != "done":
                        dep.state, dep.dead_letter_reason = "dead", "after_ended"
                        killed.append((dep, "waiting"))
                    elif dep.after_left == 0:
                        dep.state = "pending"
                self.settle(killed)
            if todo.parent is not None:
                parent = self.todos[todo.parent]
                self.ripple.add(parent.id)
                parent.children_open += -1 if ended else 1
                if parent.children_open == 0 and parent.waiting_for == "children":
                    parent.state = "pending"

    def key_full(self, todo: Todo) -> bool:
        """Its key has as many claimed todos as its endpoint allows."""
        limit = self.max_per_key.get(todo.endpoint)
        if limit is None or not todo.key:
            return False
        return self.claimed_of_key(todo) >= limit

    def claimed_of_key(self, todo: Todo) -> int:
        """How many todos of its endpoint and key are claimed."""
        return sum(
            t.endpoint == todo.endpoint and t.key == todo.key and t.state == "claimed"
            for t in self.todos.values()
        )

    # -- claiming ------------------------------------------------------------------------

    def claim(self, name: str, todo: Todo, *, fence: bool) -> Expect:
        who = self.who(name)
        if not who.human and name in self.revoked:
            return Expect(UNAUTHORIZED)
        if not self.sees(who, todo, as_requester=False):
            return Expect(NOT_FOUND)
        # A person may claim a waiting todo instead of answering it ("I'll do it myself").
        if not (todo.claimable_by_hand if who.human else todo.claimable):
            return Expect(CONFLICT)
        if todo.state == "claimed" and self._expire(todo):
            # The lapsed lease spent the last of the budget: dead-lettered (committed), and
            # the claim answers conflict.
            return Expect(CONFLICT)
        if todo.state != "claimed" and self.key_full(todo):
            return Expect(CONFLICT)  # max_claimed_per_key (a takeover adds no claim)
        return self._open(todo, who, fence)

    def claim_next(self, name: str, *, fence: bool, key: Callable[[Todo], Any]) -> Expect:
        """The endpoint's claimable todos by priority, then ``key`` (when each became
        claimable), then id. A lapsed lease at the cap is dead-lettered and passed over."""
        if name in self.revoked:
            return Expect(UNAUTHORIZED)
        # A key at its limit is passed over, a lapsed lease of it too (its own claim counts).
        # A death may release others (its dependents), so each pick looks again from the top.
        while True:
            ready = [
                t
                for t in self.todos.values()
                if t.endpoint == name and t.claimable and not self.key_full(t)
            ]
            if not ready:
                return Expect()  # nothing to claim: None
            todo = min(ready, key=lambda t: (-t.priority, key(t), t.id))
            if todo.state == "claimed" and self._expire(todo):
                continue
            return self._open(todo, self.who(name), fence)

    def _expire(self, todo: Todo) -> bool:
        """A claim found a lapsed lease: lease_expired (a failure). True when it died."""
        attempt = todo.open_attempt
        assert attempt is not None
        todo.failures += 1
        dies = todo.failures >= todo.max_attempts
        attempt.outcome = "lease_expired"
        attempt.disposition = "dead_lettered" if dies else "requeued"
        if dies:
            todo.state = "dead"
            todo.dead_letter_reason = "lease_expired"
            todo.lapsed = False
            self.settle([(todo, "claimed")])
        return dies

    def _open(self, todo: Todo, who: Who, fence: bool) -> Expect:
        if todo.state == "waiting":
            todo.leave_wait()
        todo.last_attempt_seq += 1
        todo.attempt += 1
        todo.state = "claimed"
        todo.lapsed = todo.retry_due = False
        todo.attempts[todo.last_attempt_seq] = Attempt(
            seq=todo.last_attempt_seq,
            round=todo.round,
            attempt=todo.attempt,
            claimer=who.name,
            human=who.human,
            token=FENCED if fence else None,
        )
        # The history cap: the oldest closed rows go, and attempts_pruned counts them.
        while len(todo.attempts) > self.history_cap:
            oldest = min(a.seq for a in todo.attempts.values() if not a.open)
            del todo.attempts[oldest]
            todo.attempts_pruned += 1
        return Expect(
            state="claimed", seq=todo.last_attempt_seq, prior=todo.prior(), todo_id=todo.id
        )

    # -- holding -------------------------------------------------------------------------

    def heartbeat(self, name: str, todo: Todo, *, seq: int | None, token: str | None) -> Expect:
        who = self.who(name)
        if not who.human and name in self.revoked:
            return Expect(UNAUTHORIZED)
        if not self.sees(who, todo, as_requester=True):
            return Expect(NOT_FOUND)
        if not who.human and todo.endpoint != name:
            return Expect(NOT_FOUND)  # a requester may not heartbeat what it sent
        attempt = todo.open_attempt
        if attempt is None or attempt.claimer != name:
            return Expect(CONFLICT)
        if seq not in (None, attempt.seq) or not fence_ok(attempt, token):
            return Expect(CONFLICT)
        todo.lapsed = False  # extended to now + at least the default lease
        return Expect(state="claimed", seq=attempt.seq)

    # -- ending: complete, fail, release, cancel ("Which attempt a call means") ----------

    def close(
        self,
        name: str,
        todo: Todo,
        verb: str,
        *,
        seq: int | None,
        token: str | None,
        retryable: bool = True,
    ) -> Expect:
        who = self.who(name)
        if not who.human and name in self.revoked:
            return Expect(UNAUTHORIZED)
        if not self.sees(who, todo, as_requester=True):
            return Expect(NOT_FOUND)
        requester = not who.human and todo.endpoint != name
        if requester and verb != "cancel":
            return Expect(NOT_FOUND)  # the requester may cancel and read, nothing else

        attempt = todo.open_attempt
        if attempt is not None:
            if attempt.claimer == name and seq in (None, attempt.seq):
                if not fence_ok(attempt, token):
                    return Expect(CONFLICT)
                return self._end(todo, attempt, verb, closer=name, retryable=retryable)
            # A human may release or cancel any lease of their teams, the requester may
            # cancel what it sent; both pass the fence and give no token.
            overrides = (who.human and verb in ("release", "cancel")) or (
                requester and verb == "cancel"
            )
            if overrides and seq in (None, attempt.seq) and token is None:
                return self._end(
                    todo, attempt, verb, closer=name, ended_by=name if who.human else None
                )
        elif verb == "cancel" and todo.state in ("pending", "retry_wait", "waiting"):
            if seq is not None or token is not None:
                return Expect(CONFLICT)  # it names an attempt, and none is open
            old = todo.state
            todo.leave_wait()
            todo.state = "canceled"
            todo.retry_due = False
            self.settle([(todo, old)])
            self.cancel_children(todo, name)
            return Expect(state="canceled")
        elif verb == "cancel" and todo.state == "canceled" and seq is None:
            return Expect(state="canceled", replayed=True)

        # A repeat of a close this caller made, with the same verb (and the same token when
        # fenced), returns the recorded result and writes nothing.
        named = todo.attempts.get(seq) if seq is not None else todo.newest_closed()
        if (
            named is not None
            and not named.open
            and named.closer == name
            and AS_VERB.get(named.verb, named.verb) == AS_VERB.get(verb, verb)
            and fence_ok(named, token)
        ):
            return Expect(
                state=todo.state,
                seq=named.seq,
                outcome=named.outcome,
                disposition=named.disposition,
                replayed=True,
            )
        return Expect(CONFLICT)

    def _end(
        self,
        todo: Todo,
        attempt: Attempt,
        verb: str,
        *,
        closer: str,
        ended_by: str | None = None,
        retryable: bool = True,
    ) -> Expect:
        outcome, ok_state, counts = CLOSES[verb]
        if verb == "wait":
            todo.waits_for = "children"
            if not todo.children_open:
                ok_state = "pending"  # nothing to wait for: a release
        elif verb == "ask":
            todo.waits_for = "people"
        expect = self._finish(
            todo, attempt, outcome, ok_state, counts=counts, force_dead=not retryable
        )
        attempt.closer, attempt.verb, attempt.ended_by = closer, verb, ended_by
        if verb == "cancel":
            self.cancel_children(todo, closer)
        return expect

    def cancel_children(self, parent: Todo, by: str) -> None:
        """A canceled parent's open children, and theirs, level by level: each level's
        claimed ones in one statement (their attempts closed canceled, recorded as ended by
        ``by``), then the others still unclaimed in another."""
        human = self.who(by).human
        level = [parent.id] if parent.children_open else []
        while level:
            rows = sorted(
                (t for t in self.todos.values() if t.parent in level and t.state in OPEN),
                key=lambda t: t.id,
            )
            claimed = [t for t in rows if t.state == "claimed"]
            for child in claimed:
                attempt = child.open_attempt
                assert attempt is not None
                self._finish(child, attempt, "canceled", "canceled", counts=False, settle=False)
                attempt.closer, attempt.verb = by, "cancel"
                attempt.ended_by = by if human else None
            self.settle([(t, "claimed") for t in claimed])
            others = [(t, t.state) for t in rows if t.state in ("pending", "retry_wait", "waiting")]
            for child, _ in others:
                child.leave_wait()
                child.state = "canceled"
                child.retry_due = False
            self.settle(others)
            self.ripple.update(t.id for t in rows)
            level = [t.id for t in rows]

    def _finish(
        self,
        todo: Todo,
        attempt: Attempt,
        outcome: str,
        ok_state: str,
        *,
        counts: bool,
        force_dead: bool = False,
        settle: bool = True,
    ) -> Expect:
        old = todo.state
        if counts:
            todo.failures += 1
        dead = force_dead or (counts and todo.failures >= todo.max_attempts)
        todo.state = "dead" if dead else ok_state
        todo.dead_letter_reason = outcome if dead else ""
        todo.lapsed = todo.retry_due = False
        attempt.outcome = outcome
        attempt.disposition = DISPOSITION[todo.state]
        if settle:
            self.settle([(todo, old)])
        return Expect(
            state=todo.state, seq=attempt.seq, outcome=outcome, disposition=attempt.disposition
        )

    # -- asking a person (issue 43) ------------------------------------------------------

    def ask(
        self,
        name: str,
        todo: Todo,
        *,
        seq: int | None,
        token: str | None,
        question: Question | None,
    ) -> Expect:
        """``release`` with a question: a close like any other ("Which attempt a call
        means"), but only by the holder (nobody asks for someone else: no override), and it
        records the question. A malformed question (``None`` here) is invalid before
        anything else is looked at."""
        if question is None:
            return Expect(INVALID)
        expect = self.close(name, todo, "ask", seq=seq, token=token)
        if expect.error is None and not expect.replayed:
            question.seq = expect.seq
            todo.questions[expect.seq] = question
        return expect

    def may_answer(self, who: Who, todo: Todo) -> bool:
        """A person of the todo's team; or its requester: the endpoint that sent it, or the
        endpoint that made it on its own queue (not one a person made there, a child too)."""
        if who.human:
            return self.endpoint_team[todo.endpoint] in who.teams
        if todo.requester is not None:
            return todo.requester == who.name
        return todo.endpoint == who.name and not todo.by_person

    def answer(self, name: str, todo: Todo, *, fits: bool, stored: Any = None) -> Expect:
        """The answer ends the wait: pending at once, the question answered by ``name`` with
        ``stored`` (what the value is kept as). No open question: conflict; a value the
        question does not take (``fits`` false): invalid."""
        who = self.who(name)
        if not who.human and name in self.revoked:
            return Expect(UNAUTHORIZED)
        if not self.may_answer(who, todo):
            return Expect(NOT_FOUND)
        question = todo.open_question
        if todo.state != "waiting" or question is None:
            return Expect(CONFLICT)
        if not fits:
            return Expect(INVALID)
        question.ending, question.answered_by, question.answer = "answered", name, stored
        todo.state = "pending"
        return Expect(state="pending", seq=question.seq)

    def expire_questions(self) -> dict[int, Expect]:
        """The sweeper: every open question whose time ran out ends unanswered, its todo
        back to the queue or dead (reason ``unanswered``) as ``on_no_answer`` says."""
        ended = {}
        for todo in self.todos.values():
            question = todo.open_question
            if todo.state != "waiting" or question is None or not question.due:
                continue
            question.ending = "unanswered"
            if question.on_no_answer == "dead_letter":
                todo.state, todo.dead_letter_reason = "dead", "unanswered"
                self.settle([(todo, "waiting")])
            else:
                todo.state = "pending"
            ended[todo.id] = Expect(state=todo.state, seq=question.seq)
        return ended

    # -- the sweeper ---------------------------------------------------------------------

    def reap(self) -> dict[int, Expect]:
        """Every lapsed lease: reaped (a failure), pending below the cap, dead at it."""
        reaped = {}
        for todo in self.todos.values():
            if todo.state == "claimed" and todo.lapsed:
                attempt = todo.open_attempt
                assert attempt is not None
                reaped[todo.id] = self._finish(todo, attempt, "reaped", "pending", counts=True)
        return reaped

    def requeue_due(self) -> list[int]:
        due = [t for t in self.todos.values() if t.state == "retry_wait" and t.retry_due]
        for todo in due:
            todo.state = "pending"
            todo.retry_due = False
        return [t.id for t in due]

    # -- a human's retry now and rerun (SPEC, Rounds) ------------------------------------

    def retry_now(self, name: str, todo: Todo) -> Expect:
        if not self.sees(self.who(name), todo, as_requester=False):
            return Expect(NOT_FOUND)
        if todo.state != "retry_wait":
            return Expect(CONFLICT)
        todo.state = "pending"  # same round, counters kept
        todo.retry_due = False
        return Expect(state="pending")

    def rerun(self, name: str, todo: Todo) -> Expect:
        if not self.sees(self.who(name), todo, as_requester=False):
            return Expect(NOT_FOUND)
        if todo.state not in TERMINAL:
            return Expect(CONFLICT)
        old, todo.state = todo.state, "pending"
        self.settle([(todo, old)])
        todo.round += 1
        todo.attempt = todo.failures = 0
        todo.dead_letter_reason = ""
        return Expect(state="pending")

    # -- a person's start now (issue 44) ------------------------------------------------

    def start_now(self, name: str, todo: Todo) -> Expect:
        """A person of the team ends a wait for todos or children: pending, the counts kept."""
        if not self.sees(self.who(name), todo, as_requester=False):
            return Expect(NOT_FOUND)
        if todo.waiting_for not in ("todos", "children"):
            return Expect(CONFLICT)
        todo.state = "pending"
        return Expect(state="pending")

    # -- revocation ----------------------------------------------------------------------

    def revoke(self, endpoint: str) -> tuple[Expect, int]:
        """The endpoint's live todos die with reason revoked (an open attempt closes as
        revoked, dead_lettered). Returns how many died."""
        if endpoint in self.revoked:
            return Expect(CONFLICT), 0
        self.revoked.add(endpoint)
        # Two statements: its claimed todos, then the rest still open (each statement's rows
        # all moved before the triggers look).
        claimed = [
            t for t in self.todos.values() if t.endpoint == endpoint and t.state == "claimed"
        ]
        for todo in claimed:
            attempt = todo.open_attempt
            assert attempt is not None
            self._finish(
                todo, attempt, "revoked", "dead", counts=False, force_dead=True, settle=False
            )
        self.settle([(t, "claimed") for t in claimed])
        rest = [
            (t, t.state) for t in self.todos.values() if t.endpoint == endpoint and t.state in OPEN
        ]
        for todo, _ in rest:
            todo.leave_wait()
            todo.state = "dead"
            todo.dead_letter_reason = "revoked"
            todo.retry_due = False
        self.settle(rest)
        return Expect(), len(claimed) + len(rest)
