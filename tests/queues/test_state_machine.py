"""The lease state machine, model-checked: hypothesis drives the real transitions with random
sequences of calls and compares every answer, and the whole ledger after every step, with
the in-memory model of SPEC's state table in tests/queues/model.py.

Callers: endpoints A and B in one team, X in another; H and G, humans of the first team; O,
a human of the other team. A controllable clock is a backdated row (``lapse_lease``,
``make_retry_due``, a question's ``expires_at``); every other lease, retry and question's time
lies far enough ahead not to pass during an example. A holder may ask a question (``release``
with ``question``, issue 43): the todo waits until a person or its requester answers, its time
runs out (the sweeper's ``expire_questions``), or a person claims or cancels it instead, or its
endpoint is revoked. Issue 44: a todo may be made ``after`` others (either policy) and wait
for them; the holder of a todo may make children of it and release it to wait for them; a
person may start a waiting todo now; canceling a parent cancels its open children; todos may
have a key, and A may be limited to one claimed todo a key. An agent may complete with
``then`` (close_then_claim_next: one statement where it can be, keyed too), answered as the
complete and then claim_next would be. Checked against the ledger on
every step: a waiting todo is never claimed by an agent, no wait outlives what it waits for
(no lost release: every edge to an ended todo is marked, every waiting todo still has one to
wait for or an open child), no key has more claimed than its limit, and each todo's
``after_left`` and ``children_open`` are the model's. Each example runs inside a savepoint of the test's transaction and is
rolled back at its end, so every example starts from a clean ledger.

``SWITCHBOARD_HYPOTHESIS_EXAMPLES`` raises the number of examples (e.g. 1000 for a long local
run); the default keeps ``make test`` bounded.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import ClassVar

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models.functions import Now
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from switchboard.queues import endpoints, teams, transitions
from switchboard.queues.errors import Conflict, DomainError, NotFound
from switchboard.queues.models import (
    DIED_OUTCOMES,
    Endpoint,
    Todo,
    TodoAttempt,
    TodoEvent,
    TodoQuestion,
)
from switchboard.queues.transitions import Actor
from switchboard.queues.transitions.waits import RELEASE_BATCH
from tests.queues.helpers import (
    approval_form,
    backdate,
    get_todo_for_endpoint,
    get_todo_for_user,
    lapse_lease,
    make_retry_due,
)
from tests.queues.model import (
    DIED,
    FENCED,
    NOT_FOUND,
    OPEN,
    TERMINAL,
    Expect,
    Ledger,
    Question,
)
from tests.queues.model import Todo as ModelTodo

EXAMPLES = int(os.environ.get("SWITCHBOARD_HYPOTHESIS_EXAMPLES", "60"))
STEPS = 30
STEPS_SMALL_CAP = 50
VERBS = ("complete", "fail", "release", "cancel")
# No todo id the ledger hands out in a test: the answer every foreign id must equal.
UNKNOWN_ID = 2**62
WRONG_TOKEN = "not-the-lease-token-of-any-attempt"

HUMANS = ("H", "G", "O")


def machine_settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        # The failing steps are printed; no example database under the repository.
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@dataclass(frozen=True)
class World:
    endpoints: dict[str, Endpoint]  # A, B (team one), X (team two)
    users: dict[str, object]  # H, G (team one), O (team two)
    team_one: int
    team_two: int


@pytest.fixture
def world(db) -> World:
    make = get_user_model().objects.create_user
    hedda, gus, olga = (make(username=n, password="pw-for-tests") for n in ("hedda", "gus", "olga"))
    team_one, team_two = hedda.teams.get(), olga.teams.get()
    teams.add_member(team_one, gus)
    return World(
        endpoints={
            "A": endpoints.vend(team_one, "agent-a")[0],
            "B": endpoints.vend(team_one, "agent-b")[0],
            "X": endpoints.vend(team_two, "agent-x")[0],
        },
        users={"H": hedda, "G": gus, "O": olga},
        team_one=team_one.pk,
        team_two=team_two.pk,
    )


@pytest.fixture(autouse=True)
def _ledger_settings(settings):
    settings.SWITCHBOARD_LEASE_SECONDS = 300
    settings.SWITCHBOARD_OWNER_LEASE_SECONDS = 1800
    settings.SWITCHBOARD_CLAIMS_PER_MINUTE = 0
    settings.SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT = False
    # Full jitter draws the delay from [0, base * 2**failures): with the default base of
    # 10 s, one draw in a few dozen would fall due while an example still runs and the
    # retry would become claimable behind the model's back. A base of about three years
    # makes that a one-in-ten-million chance; due-ness is driven by make_retry_due.
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 10**8
    settings.SWITCHBOARD_RETRY_MAX_SECONDS = 10**9


# A new todo: (on endpoint, max_attempts, priority, sent by the team's other endpoint, key)
# (Mostly on A and at priority 0: todos that compete in one claim_next.)
KEYS = st.sampled_from(["", "", "k1", "k2", "k1"])
NEW_TODO = st.tuples(
    st.sampled_from(["A", "A", "B"]),
    st.sampled_from([3, 4, 2, 1]),
    st.sampled_from([0, 0, 1]),
    st.booleans(),
    KEYS,
)
# What a todo made after others names: mostly todos of the team, else an unknown id or a
# todo of the team made on the other team's endpoint (both not_found, alike).
AFTER_AIMS = st.sampled_from(["team", "team", "team", "team", "unknown", "foreign"])
POLICIES = st.sampled_from(["all_done", "any_end"])
# Who makes a child of a todo: its holder mostly, else someone who does not hold it.
CHILD_MAKERS = st.sampled_from(["holder", "holder", "holder", "holder", "other", "H", "X"])
# Choices a rule draws, resolved against the model when the rule runs. The likely useful
# choices come first (hypothesis shrinks towards them) and more often, so that most calls
# move something and the rest probe the refusals.
TODO = st.integers(min_value=0, max_value=5)
# "fitting": a todo in a state the rule can act on, when there is one; "any": any todo.
AIM = st.sampled_from(["fitting", "fitting", "fitting", "any"])
# A person's retry now and rerun are cheap and refused often on the Board: probe more.
AIM_BY_HAND = st.sampled_from(["fitting", "any"])
CALLERS = st.sampled_from(
    ["holder", "holder", "holder", "endpoint", "H", "other", "G", "requester", "X", "O"]
)
CLAIMERS = st.sampled_from(["endpoint", "endpoint", "endpoint", "endpoint", "other", "X"])
SEQS = st.sampled_from(["none", "current", "none", "current", "previous", "first", "future"])
TOKENS = st.sampled_from(["right", "right", "right", "none", "wrong", "stale"])
# How a heartbeat or close is called: (caller, seq, token). As its holder would (the open
# seq or none, and its token); as someone who may end a lease they do not hold (a human of
# the team, the requester: no token); as a stale or confused worker; or anyhow.
AS_HOLDER = st.tuples(st.just("holder"), st.sampled_from(["none", "current"]), st.just("right"))
AS_OVERRIDE = st.tuples(
    st.sampled_from(["H", "requester", "G"]),
    st.sampled_from(["none", "current"]),
    st.sampled_from(["none", "none", "none", "right", "wrong"]),
)
AS_STALE = st.tuples(
    st.sampled_from(["holder", "endpoint"]),
    st.sampled_from(["previous", "none", "first", "future", "current"]),
    st.sampled_from(["stale", "right", "wrong", "none"]),
)
HOW = st.one_of(AS_HOLDER, AS_HOLDER, AS_OVERRIDE, AS_STALE, st.tuples(CALLERS, SEQS, TOKENS))
# Questions an agent asks (release with question): what answers each (choices, a form, free
# text), whether its time may run out, and what then; and a few malformed ones (invalid,
# whatever else the call would meet).
CHOICES = ["ship it", "hold", "roll back"]
FORM = approval_form("approve", title="Approve?", most=1000, amount_type="integer")
ASKED = {
    # name: (release's arguments, what the model records; None: invalid)
    "choices": ({"choices": CHOICES}, ("choices", False, "requeue")),
    "form": ({"answer_schema": FORM}, ("schema", False, "requeue")),
    "free": ({}, ("free", False, "requeue")),
    "choices, an hour": (
        {"choices": CHOICES, "answer_within_seconds": 3600},
        ("choices", True, "requeue"),
    ),
    "free, an hour or dead": (
        {"answer_within_seconds": 3600, "on_no_answer": "dead_letter"},
        ("free", True, "dead_letter"),
    ),
    "form, an hour or dead": (
        {"answer_schema": FORM, "answer_within_seconds": 3600, "on_no_answer": "dead_letter"},
        ("schema", True, "dead_letter"),
    ),
    "no text": ({"question": " "}, None),
    "dead letter with no time": ({"on_no_answer": "dead_letter"}, None),
    "choices twice": ({"choices": ["a", "a"]}, None),
    "and a snooze": ({"delay_seconds": 60}, None),
}
ASKS = st.sampled_from(list(ASKED)[:6] * 5 + list(ASKED)[6:])
# An ask is mostly its holder's (the waiting state is reached only through one), the rest
# probing the refusals as any close does.
HOW_ASK = st.one_of(AS_HOLDER, AS_HOLDER, AS_HOLDER, HOW)
# What a person or the requester answers, by what the question takes: (value, fits it, what
# is kept). The ones that fit come first.
ANSWERS = {
    "choices": [
        ("ship it", True, "ship it"),
        ("roll back", True, "roll back"),
        ("maybe", False, None),
        (["hold"], False, None),
        ("", False, None),
    ],
    "schema": [
        ({"approve": True}, True, {"approve": True}),
        ({"amount": 840, "approve": False}, True, {"approve": False, "amount": 840}),
        ({"amount": 5}, False, None),
        ({"approve": "yes"}, False, None),
        ({"approve": True, "amount": 1001}, False, None),
        ("yes", False, None),
    ],
    "free": [
        ("go ahead", True, "go ahead"),
        ("use the second one", True, "use the second one"),
        ("", False, None),
        (42, False, None),
        ({"a": 1}, False, None),
    ],
}
PEOPLE_ANSWERING = st.sampled_from(["H", "H", "G", "O"])
ENDPOINTS_ANSWERING = st.sampled_from(["requester", "requester", "endpoint", "X"])
FITS = st.sampled_from([True, True, True, False])
PICK = st.integers(min_value=0, max_value=9)
# How a client repeats its last close (a retry after a lost response, or not quite).
REPEATS = st.sampled_from(
    ["same", "same", "no_seq", "other_token", "no_token", "other_verb", "someone_else"]
)


class LedgerMachine(RuleBasedStateMachine):
    world: ClassVar[World]
    history_cap: ClassVar[int]
    max_todos: ClassVar[int]
    steps: ClassVar[int]

    def __init__(self) -> None:
        super().__init__()
        self.savepoint = transaction.savepoint_create()
        w = self.world
        # Fresh instances: a revocation in an earlier (rolled back) example set revoked_at
        # on the objects it was given.
        self.endpoints = {n: Endpoint.objects.get(pk=e.pk) for n, e in w.endpoints.items()}
        self.actors = {n: Actor.agent(e) for n, e in self.endpoints.items()}
        self.actors.update({n: Actor.human(u) for n, u in w.users.items()})
        self.model = Ledger(
            endpoints={"A": w.team_one, "B": w.team_one, "X": w.team_two},
            humans={
                "H": frozenset({w.team_one}),
                "G": frozenset({w.team_one}),
                "O": frozenset({w.team_two}),
            },
            history_cap=self.history_cap,
        )
        self.step = 0
        self._touched: set[int] = set()
        self.last_close: tuple | None = None  # (verb, todo, caller, seq, token, extra)
        self.high_water: dict[int, int] = {}  # todo id: the highest last_attempt_seq seen
        self.ended_questions: dict[int, tuple] = {}  # question id: its row when it ended
        self.model.ripple = set()
        self.key_allowed: dict[tuple[str, str], int] = {}  # claimed a key may have now
        with pytest.raises(NotFound) as unknown:
            get_todo_for_endpoint(self.endpoints["X"], UNKNOWN_ID)
        self.not_found = unknown.value.as_dict()

    def teardown(self) -> None:
        transaction.savepoint_rollback(self.savepoint)

    @property
    def touched(self) -> set[int]:
        """The todos the last step may have changed: those it named, and those a trigger
        moved or counted on its way (dependents, parents, children)."""
        return self._touched | self.model.ripple

    @touched.setter
    def touched(self, ids: set[int]) -> None:
        self._touched = set(ids)
        self.model.ripple.clear()

    # -- resolving the drawn choices -----------------------------------------------------

    def some(self, fits) -> bool:
        """A precondition: some todo is in a state the rule can act on. (Rules that would
        only be refused still probe refusals, through their "any" aim.)"""
        return any(fits(t) for t in self.model.todos.values())

    def todo(self, i: int, aim: str = "any", *fits) -> ModelTodo:
        """The i-th todo; with aim "fitting", among those that fit (the first test that
        some todo passes)."""
        todos = list(self.model.todos.values())
        if aim == "fitting":
            todos = next((f for f in ([t for t in todos if fit(t)] for fit in fits) if f), todos)
        todo = todos[i % len(todos)]
        self.touched = {todo.id}
        return todo

    def other(self, endpoint: str) -> str:
        return "B" if endpoint == "A" else "A"

    def caller(self, choice: str, todo: ModelTodo) -> str:
        if choice == "holder":
            held = todo.open_attempt or (
                todo.attempts[max(todo.attempts)] if todo.attempts else None
            )
            return held.claimer if held is not None else todo.endpoint
        if choice == "endpoint":
            return todo.endpoint
        if choice == "other":
            return self.other(todo.endpoint)
        if choice == "requester":
            return todo.requester or self.other(todo.endpoint)
        if choice == "answerer":  # the endpoint that may answer: its requester, or its own
            return todo.requester or todo.endpoint
        return choice

    def seq(self, choice: str, todo: ModelTodo) -> int | None:
        last = todo.last_attempt_seq
        return {
            "none": None,
            "current": last or None,
            "previous": last - 1 if last >= 2 else last + 1,
            "first": 1,
            "future": last + 1,
        }[choice]

    def token(self, choice: str, todo: ModelTodo, seq: int | None) -> str | None:
        if choice == "none":
            return None
        if choice == "wrong":
            return WRONG_TOKEN
        if seq is not None:
            named = todo.attempts.get(seq)
        else:
            named = todo.open_attempt or todo.newest_closed()
        right = named.token if named is not None else None
        if choice == "right":
            return right
        others = [
            a.token
            for t in self.model.todos.values()
            for a in t.attempts.values()
            if a.token is not None and a.token != right
        ]
        return others[-1] if others else WRONG_TOKEN

    # -- calling the ledger --------------------------------------------------------------

    def call(self, expect: Expect, fn, *args, not_found: dict | None = None, **kwargs):
        """Call a transition; it must raise exactly the error the model expects, or none.
        A not_found must be the one an unknown id gets (``not_found``, if not the read's)."""
        try:
            result = fn(*args, **kwargs)
        except DomainError as exc:
            assert expect.error == exc.code, (
                f"the model expected {expect}; the ledger raised {exc.code}: {exc.message}"
            )
            if exc.code == NOT_FOUND:  # no existence oracle
                assert exc.as_dict() == (not_found or self.not_found)
            return None
        assert expect.error is None, (
            f"the model expected {expect.error}; the ledger returned {result!r}"
        )
        return result

    def call_held(
        self,
        expect: Expect,
        fn,
        name: str,
        todo: ModelTodo,
        attempt_seq: int | None,
        lease_token: str | None,
        **kwargs,
    ):
        """``call`` of a transition the endpoint ``name`` makes on ``todo`` as its holder says it
        (the attempt and the lease token it names, right or not), as ``close_as`` takes them."""
        return self.call(
            expect,
            fn,
            self.actors[name],
            todo.id,
            attempt_seq=attempt_seq,
            lease_token=lease_token,
            **kwargs,
        )

    def check_closed(self, expect: Expect, closed, todo: ModelTodo) -> None:
        if closed is None:
            return
        assert closed.todo.id == todo.id
        assert (closed.todo.state, closed.replayed) == (expect.state, expect.replayed), (
            closed,
            expect,
        )
        if expect.seq is None:
            assert closed.attempt is None
        else:
            got = (closed.attempt.seq, closed.attempt.outcome, closed.attempt.disposition)
            assert got == (expect.seq, expect.outcome, expect.disposition), (got, expect)

    def check_claim(self, expect: Expect, claim, *, fence: bool) -> None:
        if expect.seq is None:  # nothing to claim
            assert claim is None
            return
        assert claim is not None
        assert (claim.todo.id, claim.todo.state, claim.attempt_seq) == (
            expect.todo_id,
            "claimed",
            expect.seq,
        )
        assert (claim.lease_token is not None) == fence
        assert tuple(a.seq for a in claim.prior_attempts) == expect.prior
        model_todo = self.model.todos[expect.todo_id]
        for prior in claim.prior_attempts:
            assert prior.outcome == model_todo.attempts[prior.seq].outcome
            assert prior.died == (prior.outcome in DIED)
            if prior.outcome == "asked":  # the next claimer reads the question and its end
                asked = model_todo.questions[prior.seq]
                assert prior.question["ending"] == asked.ending, (prior.question, asked)
                answer = prior.question["answer"]
                assert (answer and answer["value"]) == (asked.answer if answer else None)
                assert (answer is not None) == (asked.ending == "answered")
            else:
                assert prior.question is None
        if fence:
            model_todo.attempts[expect.seq].token = claim.lease_token

    # -- rules ---------------------------------------------------------------------------

    # Hypothesis turns a random subset of the rules off for each example (swarm testing);
    # starting with work on the queues, some of it claimed, keeps such an example useful.
    @initialize(
        todos=st.lists(NEW_TODO, min_size=1, max_size=3),
        claims=st.lists(st.tuples(TODO, st.booleans()), min_size=1, max_size=2),
    )
    def some_work(
        self, todos: list[tuple[str, int, int, bool]], claims: list[tuple[int, bool]]
    ) -> None:
        """A few todos, some claimed by their endpoints (in any order, so that later
        claim_next calls meet the oldest claimable todo at any id)."""
        for new in todos[: self.max_todos]:
            self.create_todo(*new)
        for i, fence in claims:
            self.claim_one(i, "fitting", "endpoint", fence)
        self.touched = set(self.model.todos)

    @initialize(
        plan=st.sampled_from(["split", "after", "both", "none"]),
        children=st.integers(min_value=1, max_value=2),
        policy=POLICIES,
    )
    def some_waits(self, plan: str, children: int, policy: str) -> None:
        """Work that waits, made as agents make it (so that an example starts with some):
        a todo A claims, splits into children and releases to wait for them; a todo made
        after another."""
        room = self.max_todos - len(self.model.todos)
        if plan in ("split", "both") and room >= 1 + children:
            self.create_todo("A", 3, 0, False)
            todo = self.model.todos[max(self.model.todos)]
            self.claim_as("endpoint", todo, False)
            for n in range(children):
                self.create_todo(("A", "B")[n], 3, 0, False, parent=todo.id, by="A")
            self.close_as("wait", todo, "A", None, None)
            room -= 1 + children
        if plan in ("after", "both") and room >= 2:
            self.create_todo("B", 3, 0, False)
            self.create_todo("A", 3, 0, True, after=[max(self.model.todos)], policy=policy)
        self.touched = set(self.model.todos)

    @precondition(lambda self: len(self.model.todos) < self.max_todos)
    @rule(new=NEW_TODO)
    def create(self, new: tuple[str, int, int, bool, str]) -> None:
        self.create_todo(*new)

    def create_todo(
        self,
        on: str,
        max_attempts: int,
        priority: int,
        sent: bool,
        key: str = "",
        *,
        after: list[int] = (),
        policy: str = "all_done",
        parent: int | None = None,
        by: str | None = None,
        not_found: dict | None = None,
    ) -> None:
        """A create by ``on`` itself, or sent by the other endpoint of the team, or by
        ``by`` (a child's maker: an endpoint or a person)."""
        if by is None:
            by = self.other(on) if sent else on
        person = by in HUMANS
        requester = None if person or by == on else by
        expect = self.model.create(on, requester, after=after, policy=policy, parent=parent, by=by)
        waits = {"after": list(after), "after_policy": policy} if after else {}
        created = self.call(
            expect,
            transitions.create_todo,
            self.actors[by],
            endpoint=self.endpoints[on],
            title=f"todo {len(self.model.todos) + 1}",
            max_attempts=max_attempts,
            priority=priority,
            key=key or None,
            parent=parent,
            not_found=not_found,
            **waits,
        )
        if created is None:
            return
        record, was_created = created
        self.touched = {record.id}
        assert was_created and (record.state, record.key) == (expect.state, key)
        assert (record.attempt, record.failures, record.round) == (0, 0, 1)
        if on == "X":  # a probe the model refused, yet the ledger made it
            raise AssertionError(f"made {record} on the other team's endpoint")
        self.model.add(
            record.id,
            endpoint=on,
            requester=requester,
            max_attempts=max_attempts,
            priority=priority,
            key=key,
            by_person=person,
            after=after,
            policy=policy,
            parent=parent,
        )

    # -- waiting for todos, for children, and keys (issue 44) -----------------------------

    @precondition(lambda self: 0 < len(self.model.todos) < self.max_todos)
    @rule(
        new=NEW_TODO, picks=st.lists(TODO, min_size=1, max_size=3), policy=POLICIES, aim=AFTER_AIMS
    )
    def create_after(
        self, new: tuple[str, int, int, bool, str], picks: list[int], policy: str, aim: str
    ) -> None:
        """A todo made after one to three others (any state), or after an unknown id, or
        on the other team's endpoint after one of this team's (not_found alike)."""
        todos = list(self.model.todos)
        after = sorted({todos[i % len(todos)] for i in picks})
        on, *rest = new
        message = NOT_FOUND_AFTER
        if aim == "unknown":
            after = [*after, UNKNOWN_ID]
            message = message.replace("{id}", str(UNKNOWN_ID))
        elif aim == "foreign":
            on = "X"
            message = message.replace("{id}", str(after[0]))
        not_found = {"error": {"code": NOT_FOUND, "message": message}}
        self.create_todo(on, *rest, after=after, policy=policy, not_found=not_found)

    @precondition(
        lambda self: (
            len(self.model.todos) < self.max_todos and self.some(lambda t: t.state == "claimed")
        )
    )
    @rule(
        i=TODO,
        aim=AIM,
        who=CHILD_MAKERS,
        on=st.sampled_from(["A", "B"]),
        key=KEYS,
        then_wait=st.sampled_from([True, True, False]),
    )
    def create_child(self, i: int, aim: str, who: str, on: str, key: str, then_wait: bool) -> None:
        """The holder of a claimed todo makes a child of it, on its queue or another's of the
        team; anyone else is refused (conflict), the other team is told not_found. Mostly,
        as a planner does, the holder then releases it to wait for its children (the wait
        alone is ``wait_for_children``)."""
        todo = self.todo(i, aim, lambda t: t.state == "claimed")
        by = self.caller(who, todo)
        if by == "X":
            on = "X"
        not_found = {"error": {"code": NOT_FOUND, "message": NOT_FOUND_PARENT}}
        self.create_todo(on, 3, 0, False, key, parent=todo.id, by=by, not_found=not_found)
        attempt = todo.open_attempt
        if then_wait and attempt is not None and attempt.claimer == by:
            self.touched = {todo.id}
            self.last_close = ("wait", todo, by, attempt.seq, attempt.token, {})
            self.close_as("wait", todo, by, attempt.seq, attempt.token)

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, aim=AIM, how=HOW_ASK)
    def wait_for_children(self, i: int, aim: str, how: tuple[str, str, str]) -> None:
        """Its holder releases a todo to wait for its children (a release when none is open);
        nobody else may."""
        todo = self.todo(
            i,
            aim,
            lambda t: t.state == "claimed" and t.children_open,
            lambda t: t.state == "claimed",
        )
        who, seq, token = how
        name = self.caller(who, todo)
        attempt_seq = self.seq(seq, todo)
        lease_token = self.token(token, todo, attempt_seq)
        self.last_close = ("wait", todo, name, attempt_seq, lease_token, {})
        self.close_as("wait", todo, name, attempt_seq, lease_token)

    @precondition(lambda self: self.some(lambda t: t.state in OPEN and t.children_open))
    @rule(i=TODO, how=HOW)
    def cancel_a_parent(self, i: int, how: tuple[str, str, str]) -> None:
        """Cancel a todo with open children: they (and theirs) are canceled with it."""
        self.close("cancel", i, "parent", how)

    @precondition(lambda self: self.some(lambda t: t.state == "waiting"))
    @rule(i=TODO, aim=AIM_BY_HAND, who=st.sampled_from(HUMANS))
    def start_now(self, i: int, aim: str, who: str) -> None:
        """A person starts a todo waiting for todos or children now (not one that waits for
        an answer: conflict)."""
        todo = self.todo(i, aim, lambda t: t.waiting_for in ("todos", "children"))
        expect = self.model.start_now(who, todo)
        record = self.call(expect, transitions.start_now, self.actors[who], todo.id)
        if record is not None:
            assert (record.state, record.waiting_for) == ("pending", "")
            assert (record.after_left, record.children_open) == (
                todo.after_left,
                todo.children_open,
            )

    @precondition(lambda self: "A" not in self.model.max_per_key and "A" not in self.model.revoked)
    @rule()
    def limit_a_key_to_one_claim(self) -> None:
        """A's agents may hold one todo of a key at a time (what it holds already stays)."""
        self.touched = set()
        endpoints.set_limits(self.endpoints["A"], max_claimed=None, max_claimed_per_key=1)
        self.model.max_per_key["A"] = 1
        for t in self.model.todos.values():
            if t.endpoint == "A" and t.key:
                held = self.model.claimed_of_key(t)
                self.key_allowed[("A", t.key)] = max(1, held)

    @precondition(lambda self: self.some(lambda t: bool(t.after)))
    @rule()
    def release_leftovers(self) -> None:
        """The sweeper's step finds nothing a trigger left: no todo here has past
        RELEASE_BATCH dependents."""
        self.touched = set()
        assert transitions.release_leftovers() == 0

    @precondition(lambda self: self.some(lambda t: t.claimable))
    @rule(i=TODO, aim=AIM, who=CLAIMERS, fence=st.booleans())
    def claim(self, i: int, aim: str, who: str, fence: bool) -> None:
        self.claim_one(i, aim, who, fence)

    @precondition(lambda self: self.some(lambda t: t.claimable_by_hand))
    @rule(i=TODO, aim=AIM, who=st.sampled_from(HUMANS), fence=st.booleans())
    def claim_by_hand(self, i: int, aim: str, who: str, fence: bool) -> None:
        """A person claims, a waiting todo too (instead of answering its question)."""
        todo = self.todo(i, aim, lambda t: t.state == "waiting", lambda t: t.claimable_by_hand)
        self.claim_as(who, todo, fence)

    def claim_one(self, i: int, aim: str, who: str, fence: bool) -> None:
        self.claim_as(who, self.todo(i, aim, lambda t: t.claimable), fence)

    def claim_as(self, who: str, todo, fence: bool) -> None:
        name = self.caller(who, todo)
        expect = self.model.claim(name, todo, fence=fence)
        claim = self.call(
            expect, transitions.claim, self.actors[name], todo.id, require_fence=fence
        )
        if claim is not None:
            self.check_claim(expect, claim, fence=fence)

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, who=CLAIMERS, fence=st.booleans())
    def take_over_a_lapsed_lease(self, i: int, who: str, fence: bool) -> None:
        todo = self.todo(i, "fitting", lambda t: t.state == "claimed")
        if not todo.lapsed:
            lapse_lease(todo.id)
            todo.lapsed = True
        self.claim_as(who, todo, fence)

    @precondition(lambda self: self.some(lambda t: t.claimable))
    @rule(who=st.sampled_from(["busiest", "A", "B", "busiest", "X"]), fence=st.booleans())
    def claim_next(self, who: str, fence: bool) -> None:
        """``busiest``: the endpoint with the most claimable todos, where the order matters."""
        if who == "busiest":
            ready = [t.endpoint for t in self.model.todos.values() if t.claimable]
            who = max(("A", "B"), key=ready.count)
        self.touched = set(self.model.todos)  # it may dead-letter lapsed leases on its way
        waiting = {t.id for t in self.model.todos.values() if t.state == "waiting"}
        key = self.claimable_since()
        expect = self.model.claim_next(who, fence=fence, key=lambda t: key[t.id])
        claim = self.call(expect, transitions.claim_next, self.actors[who], require_fence=fence)
        if expect.error is None:
            self.check_claim(expect, claim, fence=fence)
        # No todo is claimed while it waits (a lapsed lease dead-lettered on the way may
        # release one of its dependents or its parent, which may then be the one claimed).
        if claim is not None and claim.todo.id in waiting:
            assert claim.todo.id in self.model.ripple, claim

    def claimable_since(self) -> dict[int, object]:
        """When each todo became claimable, from its own timestamps (SPEC: a pending todo
        from not_before or its creation, a due retry from next_retry_at, a lapsed lease from
        lease_expires_at): "then the oldest" of claim_next."""
        rows = Todo.objects.filter(pk__in=list(self.model.todos)).values_list(
            "pk", "created_at", "not_before", "next_retry_at", "lease_expires_at"
        )
        since = {}
        for pk, created_at, not_before, next_retry_at, lease_expires_at in rows:
            state = self.model.todos[pk].state
            since[pk] = {
                "pending": not_before or created_at,
                # a waiting todo a death on the way releases: pending from then on
                "waiting": not_before or created_at,
                "retry_wait": next_retry_at,
                "claimed": lease_expires_at,
            }.get(state)
        return since

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, aim=AIM, how=HOW)
    def heartbeat(self, i: int, aim: str, how: tuple[str, str, str]) -> None:
        todo = self.todo(i, aim, lambda t: t.state == "claimed")
        who, seq, token = how
        name = self.caller(who, todo)
        attempt_seq = self.seq(seq, todo)
        lease_token = self.token(token, todo, attempt_seq)
        expect = self.model.heartbeat(name, todo, seq=attempt_seq, token=lease_token)
        lease = self.call_held(expect, transitions.heartbeat, name, todo, attempt_seq, lease_token)
        if lease is not None:
            assert lease.attempt_seq == expect.seq

    def close(self, verb: str, i: int, aim: str, how: tuple[str, str, str], **extra) -> None:
        who, seq, token = how
        if verb == "cancel" and aim == "parent":
            todo = self.todo(i, "fitting", lambda t: t.state in OPEN and t.children_open)
        elif verb == "cancel":
            todo = self.todo(i, aim, lambda t: t.state in OPEN)
        elif verb == "fail":  # mostly one that will wait to retry, a state rarely reached
            todo = self.todo(
                i,
                aim,
                lambda t: t.state == "claimed" and t.failures + 1 < t.max_attempts,
                lambda t: t.state == "claimed",
            )
        else:
            todo = self.todo(i, aim, lambda t: t.state == "claimed")
        name = self.caller(who, todo)
        attempt_seq = self.seq(seq, todo)
        lease_token = self.token(token, todo, attempt_seq)
        self.last_close = (verb, todo, name, attempt_seq, lease_token, extra)
        self.close_as(verb, todo, name, attempt_seq, lease_token, **extra)

    def close_as(
        self,
        verb: str,
        todo: ModelTodo,
        name: str,
        attempt_seq: int | None,
        lease_token: str | None,
        **extra,
    ) -> None:
        if verb == "ask":
            self.ask_as(todo, name, attempt_seq, lease_token, extra["asked"])
            return
        expect = self.model.close(name, todo, verb, seq=attempt_seq, token=lease_token, **extra)
        if verb == "wait":
            verb, extra = "release", {"wait_for_children": True}
        closed = self.call_held(
            expect, getattr(transitions, verb), name, todo, attempt_seq, lease_token, **extra
        )
        self.check_closed(expect, closed, todo)
        if closed is not None and not closed.replayed:
            assert closed.todo.waiting_for == todo.waiting_for, (closed.todo, todo)

    def ask_as(
        self,
        todo: ModelTodo,
        name: str,
        attempt_seq: int | None,
        lease_token: str | None,
        asked: str,
    ) -> None:
        arguments, records = ASKED[asked]
        failures = todo.failures
        expect = self.model.ask(
            name,
            todo,
            seq=attempt_seq,
            token=lease_token,
            question=Question(*records) if records is not None else None,
        )
        closed = self.call_held(
            expect,
            transitions.release,
            name,
            todo,
            attempt_seq,
            lease_token,
            **{"question": f"{asked}: go ahead?", **arguments},
        )
        self.check_closed(expect, closed, todo)
        if closed is None or closed.replayed:
            return
        # Asking spends no try; the todo waits for people, its question open.
        assert closed.todo.failures == todo.failures == failures
        assert closed.todo.waiting_for == "people"
        shown = closed.todo.as_api()["question"]
        assert (shown["attempt_seq"], shown["ending"]) == (closed.attempt.seq, None)
        assert closed.attempt.as_api()["question"] == shown

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, aim=AIM, how=HOW)
    def complete(self, i: int, aim: str, how: tuple[str, str, str]) -> None:
        self.close("complete", i, aim, how)

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, aim=AIM, how=HOW)
    def complete_then_claim_next(self, i: int, aim: str, how: tuple[str, str, str]) -> None:
        """A complete with ``then`` (close_then_claim_next): the close as ``complete`` says,
        then the claim as claim_next says once the close is made (one statement where it can
        be, under a per-key limit too); a replayed close claims nothing. Only an agent claims
        next: a person's holding is left to ``complete``. Mostly a keyed todo of A (whose
        key the close frees for the claim in the same statement, under A's limit)."""
        todo = self.todo(
            i,
            aim,
            lambda t: t.state == "claimed" and bool(t.key) and t.endpoint == "A",
            lambda t: t.state == "claimed",
        )
        who, seq, token = how
        name = self.caller(who, todo)
        if name in HUMANS:
            return
        attempt_seq = self.seq(seq, todo)
        lease_token = self.token(token, todo, attempt_seq)
        self.touched = set(self.model.todos)  # the claim may dead-letter lapsed leases
        key = self.claimable_since()
        self.last_close = ("complete", todo, name, attempt_seq, lease_token, {})
        expect = self.model.close(name, todo, "complete", seq=attempt_seq, token=lease_token)
        then = self.call(
            expect,
            transitions.close_then_claim_next,
            self.actors[name],
            transitions.Close.complete(),
            todo.id,
            attempt_seq=attempt_seq,
            lease_token=lease_token,
            claim=transitions.ClaimArgs(),
        )
        if then is None:
            return
        self.check_closed(expect, then.closed, todo)
        if expect.replayed:
            assert (then.next, then.claim) == (transitions.Next.NONE, None), then
            return
        claim = self.model.claim_next(name, fence=False, key=lambda t: key[t.id])
        if claim.error is not None:
            assert then.refused is not None and then.refused.code == claim.error, then
            return
        self.check_claim(claim, then.claim, fence=False)

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, aim=AIM, how=HOW, retryable=st.sampled_from([True, True, True, False]))
    def fail(self, i: int, aim: str, how: tuple[str, str, str], retryable: bool) -> None:
        self.close("fail", i, aim, how, retryable=retryable)

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, aim=AIM, how=HOW)
    def release(self, i: int, aim: str, how: tuple[str, str, str]) -> None:
        self.close("release", i, aim, how)

    @precondition(lambda self: self.some(lambda t: t.state in OPEN))
    @rule(i=TODO, aim=AIM, how=HOW)
    def cancel(self, i: int, aim: str, how: tuple[str, str, str]) -> None:
        self.close("cancel", i, aim, how)

    # -- asking a person (issue 43) ------------------------------------------------------

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, aim=AIM, how=HOW_ASK, asked=ASKS)
    def ask(self, i: int, aim: str, how: tuple[str, str, str], asked: str) -> None:
        """The holder asks (release with question); anyone else, or a malformed question,
        is refused as the model says."""
        todo = self.todo(i, aim, lambda t: t.state == "claimed")
        who, seq, token = how
        name = self.caller(who, todo)
        attempt_seq = self.seq(seq, todo)
        lease_token = self.token(token, todo, attempt_seq)
        self.last_close = ("ask", todo, name, attempt_seq, lease_token, {"asked": asked})
        self.ask_as(todo, name, attempt_seq, lease_token, asked)

    # Two rules, so that a question is answered about as often as it is asked.
    @precondition(lambda self: self.some(lambda t: t.state == "waiting"))
    @rule(i=TODO, aim=AIM, who=PEOPLE_ANSWERING, pick=PICK, fits=FITS)
    def a_person_answers(self, i: int, aim: str, who: str, pick: int, fits: bool) -> None:
        self.answer(i, aim, who, pick, fits)

    @precondition(lambda self: self.some(lambda t: t.state == "waiting"))
    @rule(i=TODO, aim=AIM, who=ENDPOINTS_ANSWERING, pick=PICK, fits=FITS)
    def an_endpoint_answers(self, i: int, aim: str, who: str, pick: int, fits: bool) -> None:
        self.answer(i, aim, who, pick, fits)

    def answer(self, i: int, aim: str, who: str, pick: int, fits: bool) -> None:
        """A person of the team or the requester answers, with a value the question takes
        or not; anyone else is not_found; no open question is conflict."""
        todo = self.todo(i, aim, lambda t: t.state == "waiting")
        name = self.caller("answerer" if who == "requester" else who, todo)
        question = todo.open_question
        answers = [a for a in ANSWERS[question.takes if question else "free"] if a[1] == fits]
        value, fits, stored = answers[pick % len(answers)]
        expect = self.model.answer(name, todo, fits=fits, stored=stored)
        record = self.call(expect, transitions.answer, self.actors[name], todo.id, value=value)
        if record is not None:
            assert (record.id, record.state, record.waiting_for) == (todo.id, "pending", "")
            assert record.question is None and record.failures == todo.failures

    @precondition(lambda self: self.some(ModelTodo.may_run_out))
    @rule(i=TODO)
    def question_runs_out(self, i: int) -> None:
        """A question's time passes and nobody notices yet (the sweeper, or an answer that
        comes first, meets it)."""
        todo = self.todo(i, "fitting", ModelTodo.may_run_out)
        self.run_out(todo)

    def run_out(self, todo: ModelTodo) -> None:
        backdate(
            "UPDATE todo_questions SET expires_at = statement_timestamp() - interval '1 second'"
            " WHERE todo_id = %s AND ended_at IS NULL AND expires_at IS NOT NULL",
            [todo.id],
        )
        todo.open_question.due = True

    @precondition(lambda self: self.some(lambda t: t.state == "waiting"))
    @rule(i=TODO, run_one_out=st.sampled_from([True, True, False]))
    def expire_questions(self, i: int, run_one_out: bool) -> None:
        """The sweeper's step: every question whose time ran out, and only those."""
        may = [t for t in self.model.todos.values() if t.may_run_out()]
        if run_one_out and may:
            self.run_out(may[i % len(may)])
        expected = self.model.expire_questions()
        ended = transitions.expire_questions(batch=100)
        got = {u.todo_id: (u.state, u.attempt_seq) for u in ended}
        assert len(got) == len(ended)
        assert got == {pk: (e.state, e.seq) for pk, e in expected.items()}
        # The ones it ended (that it ended no other is the line above, and every todo's row
        # is checked on every step).
        self.touched = set(expected)

    @precondition(lambda self: self.last_close is not None)
    @rule(how=REPEATS)
    def repeat_the_last_close(self, how: str) -> None:
        """A client sends its last close again: the same call replays the recorded result
        (if it closed something), and anything else is judged afresh."""
        verb, todo, name, attempt_seq, lease_token, extra = self.last_close
        self.touched = {todo.id}
        if how == "no_seq":
            attempt_seq = None
        elif how == "other_token":
            lease_token = WRONG_TOKEN
        elif how == "no_token":
            lease_token = None
        elif how == "other_verb" and verb in ("ask", "wait"):  # a plain release after one
            verb, extra = "release", {}
        elif how == "other_verb":
            verb = VERBS[(VERBS.index(verb) + 1) % len(VERBS)]
            extra = {}
        elif how == "someone_else":  # a replay is only for whoever made the close
            name = {"H": "G", "G": "H", "O": "H"}.get(name, "H")
        self.close_as(verb, todo, name, attempt_seq, lease_token, **extra)

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(
        i=TODO,
        who=st.sampled_from(["requester", "H", "G"]),
        verb=st.sampled_from(["cancel", "release"]),
    )
    def step_in(self, i: int, who: str, verb: str) -> None:
        """Someone ends a lease they do not hold: a human of the team (release, cancel, past
        any fence), or the requester (cancel; a release is not theirs to make)."""
        if who == "requester":
            todo = self.todo(i, "fitting", lambda t: t.state == "claimed" and t.requester)
        else:
            todo = self.todo(i, "fitting", lambda t: t.state == "claimed")
        name = self.caller(who, todo)
        self.last_close = (verb, todo, name, None, None, {})
        self.close_as(verb, todo, name, None, None)

    @precondition(lambda self: self.some(lambda t: t.state == "claimed" and not t.lapsed))
    @rule(i=TODO, ago=st.sampled_from([1, 60, 3600]))
    def lapse(self, i: int, ago: int) -> None:
        """A lease lapses and nobody notices yet (a later claim or reap finds it). How long
        ago varies, so that the oldest lapsed lease is not always the lowest id."""
        todo = self.todo(i, "fitting", lambda t: t.state == "claimed" and not t.lapsed)
        lapse_lease(todo.id, seconds_ago=ago)
        todo.lapsed = True

    @precondition(lambda self: self.some(lambda t: t.state == "claimed"))
    @rule(i=TODO, lapse_one=st.sampled_from([True, True, False]))
    def reap(self, i: int, lapse_one: bool) -> None:
        claimed = [t for t in self.model.todos.values() if t.state == "claimed"]
        if lapse_one and claimed:
            todo = claimed[i % len(claimed)]
            lapse_lease(todo.id)
            todo.lapsed = True
        self.touched = set(self.model.todos)
        expected = self.model.reap()
        reaped = transitions.reap_lapsed()
        got = {
            c.todo.id: (c.todo.state, c.attempt.seq, c.attempt.outcome, c.attempt.disposition)
            for c in reaped
        }
        assert len(got) == len(reaped)
        assert got == {pk: (e.state, e.seq, e.outcome, e.disposition) for pk, e in expected.items()}
        assert all(c.attempt.died for c in reaped)

    @precondition(lambda self: self.some(lambda t: t.state == "retry_wait" and not t.retry_due))
    @rule(i=TODO)
    def make_due(self, i: int) -> None:
        todo = self.todo(i, "fitting", lambda t: t.state == "retry_wait" and not t.retry_due)
        make_retry_due(todo.id)
        todo.retry_due = True

    @precondition(lambda self: self.some(lambda t: t.state == "retry_wait"))
    @rule(i=TODO, make_one_due=st.booleans())
    def requeue_due_retries(self, i: int, make_one_due: bool) -> None:
        waiting = [t for t in self.model.todos.values() if t.state == "retry_wait"]
        if make_one_due:
            todo = waiting[i % len(waiting)]
            make_retry_due(todo.id)
            todo.retry_due = True
        self.touched = set(self.model.todos)
        expected = self.model.requeue_due()
        assert transitions.requeue_due_retries() == len(expected)

    @precondition(lambda self: self.some(lambda t: t.state == "retry_wait"))
    @rule(i=TODO, aim=AIM_BY_HAND, who=st.sampled_from(HUMANS))
    def retry_now(self, i: int, aim: str, who: str) -> None:
        todo = self.todo(i, aim, lambda t: t.state == "retry_wait")
        expect = self.model.retry_now(who, todo)
        record = self.call(expect, transitions.retry_now, self.actors[who], todo.id)
        if record is not None:
            assert record.state == "pending" and record.next_retry_at is None

    @precondition(lambda self: self.some(lambda t: t.state in TERMINAL))
    @rule(i=TODO, aim=AIM_BY_HAND, who=st.sampled_from(HUMANS))
    def rerun(self, i: int, aim: str, who: str) -> None:
        todo = self.todo(i, aim, lambda t: t.state in TERMINAL)
        expect = self.model.rerun(who, todo)
        record = self.call(expect, transitions.rerun, self.actors[who], todo.id)
        if record is not None:
            assert record.state == "pending" and record.result is None
            assert (record.round, record.attempt, record.failures) == (todo.round, 0, 0)

    # Late, and once: a revoked endpoint can do nothing more, so an early one would spend
    # the rest of the example on Unauthorized.
    @precondition(lambda self: self.step >= self.steps // 2 and not self.model.revoked)
    @rule(who=st.sampled_from(["A", "B"]))
    def revoke(self, who: str) -> None:
        self.touched = set(self.model.todos)
        expect, killed = self.model.revoke(who)
        assert transitions.revoke_endpoint(None, self.endpoints[who]) == killed
        again, _ = self.model.revoke(who)
        self.call(again, transitions.revoke_endpoint, None, self.endpoints[who])
        assert expect.error is None

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def count_steps(self) -> None:
        self.step += 1

    @invariant()
    def the_ledger_matches_the_model(self) -> None:
        if not self.model.todos:
            return
        ids = list(self.model.todos)
        rows = {
            row["id"]: row for row in Todo.objects.filter(pk__in=ids).annotate(now=Now()).values()
        }
        kept = defaultdict(list)
        for row in TodoAttempt.objects.filter(todo_id__in=ids).order_by("todo_id", "seq").values():
            kept[row["todo_id"]].append(row)
        users = {n: u.pk for n, u in self.world.users.items()}
        eps = {n: e.pk for n, e in self.endpoints.items()}
        for todo in self.model.todos.values():
            row = rows[todo.id]
            got = tuple(row[f] for f in TODO_FIELDS)
            want = tuple(getattr(todo, f) for f in TODO_FIELDS)
            assert got == want, (todo.id, dict(zip(TODO_FIELDS, got, strict=True)), todo)
            if todo.state == "claimed":
                assert row["owner"] == self.owner_label(todo)
                assert row["lease_expires_at"] is not None
            else:
                assert row["owner"] == "" and row["lease_expires_at"] is None
            assert (row["next_retry_at"] is not None) == (todo.state == "retry_wait")
            # The controllable clock: a lease has lapsed, or a retry is due, exactly when
            # the test made it so (and a heartbeat un-lapses a lease).
            if todo.state == "claimed":
                assert (row["lease_expires_at"] <= row["now"]) == todo.lapsed, todo
            if todo.state == "retry_wait":
                assert (row["next_retry_at"] <= row["now"]) == todo.retry_due, todo
            assert (row["ended_at"] is not None) == (todo.state in TERMINAL)

            # seq: never reused, the kept rows exactly (attempts_pruned, last_attempt_seq]
            assert row["last_attempt_seq"] >= self.high_water.get(todo.id, 0)
            self.high_water[todo.id] = row["last_attempt_seq"]
            seqs = [a["seq"] for a in kept[todo.id]]
            assert seqs == sorted(todo.attempts), (todo.id, seqs, sorted(todo.attempts))
            assert seqs == list(range(todo.attempts_pruned + 1, todo.last_attempt_seq + 1))
            assert len(seqs) <= self.history_cap

            # at most one open attempt, and it is the newest, exactly while claimed
            open_rows = [a for a in kept[todo.id] if a["ended_at"] is None]
            assert len(open_rows) == (1 if todo.state == "claimed" else 0), (todo.id, open_rows)
            if open_rows:
                assert open_rows[0]["seq"] == todo.last_attempt_seq

            for a in kept[todo.id]:
                m = todo.attempts[a["seq"]]
                got = (
                    a["round"],
                    a["attempt"],
                    a["outcome"],
                    a["disposition"],
                    a["claimer_kind"],
                    a["endpoint_id"] if not m.human else a["user_id"],
                    a["ended_by_id"],
                    a["lease_token_hash"] is not None,
                )
                want = (
                    m.round,
                    m.attempt,
                    m.outcome,
                    m.disposition,
                    "owner" if m.human else "endpoint",
                    users[m.claimer] if m.human else eps[m.claimer],
                    users[m.ended_by] if m.ended_by else None,
                    m.token is not None,
                )
                assert got == want, (todo.id, a["seq"], got, want)
                assert m.token != FENCED
                # What stands in for a foreign key the database does not check (models,
                # TodoAttempt.endpoint): an agent's attempt names its todo's own endpoint.
                if not m.human:
                    assert a["endpoint_id"] == row["endpoint_id"], (todo.id, a["seq"])

        self.the_questions_match_the_model(ids, rows)

        # The deferred one-open-attempt constraint is checked at commit, and a test's
        # transitions only release savepoints: check it now.
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")

    @invariant()
    def no_wait_outlives_what_it_waits_for(self) -> None:
        """No lost release, no cycle, no key over its limit. Every edge as the model has it
        (to an older todo, marked once, with the state its prerequisite ended in), none
        unmarked whose prerequisite has ended; a todo waiting for todos has as many unmarked
        edges as its after_left (so at least one), and under all_done none marked other than
        done; a todo waiting for its children has an open child, and every parent's
        children_open is its children not ended; each key's count of claimed todos is what
        the ledger keeps, and at most its endpoint's limit (or what it held when the limit
        was set, until that comes down). (Past RELEASE_BATCH dependents of one todo the
        sweeper's step would run first; no example gets near it.)"""
        todos = self.model.todos
        ids = list(todos)
        if any(t.after for t in todos.values()):
            dependents = Counter(a for t in todos.values() for a in t.after)
            if max(dependents.values()) > RELEASE_BATCH:
                transitions.release_leftovers()
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT a.todo_id, a.after_id, a.ended, p.state FROM todo_after a"
                    " JOIN todos p ON p.id = a.after_id WHERE a.todo_id = ANY(%s)",
                    [ids],
                )
                edges = defaultdict(dict)
                for todo_id, after_id, ended, state in cursor.fetchall():
                    # No cycle: an edge only ever points at an older todo.
                    assert after_id < todo_id, (todo_id, after_id)
                    edges[todo_id][after_id] = ended
                    assert ended or state not in TERMINAL, (todo_id, after_id, state)
            for todo in todos.values():
                assert edges[todo.id] == todo.after, (todo.id, edges[todo.id], todo.after)
                if todo.waiting_for == "todos":
                    marked = [e for e in todo.after.values() if e]
                    assert len(todo.after) - len(marked) == todo.after_left > 0, todo
                    if todo.after_policy == "all_done":
                        assert set(marked) <= {"done"}, todo
        if any(t.parent is not None for t in todos.values()):
            open_children = Counter(
                t.parent for t in todos.values() if t.parent is not None and t.state not in TERMINAL
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT parent_id, count(*) FROM todos WHERE parent_id = ANY(%s)"
                    f" AND state NOT IN {tuple(TERMINAL)} GROUP BY parent_id",
                    [ids],
                )
                assert dict(cursor.fetchall()) == dict(open_children)
            for todo in todos.values():
                assert todo.children_open == open_children[todo.id], todo
                if todo.waiting_for == "children":
                    assert todo.children_open > 0, todo
        if any(t.key for t in todos.values()):
            eps = {e.pk: n for n, e in self.endpoints.items()}
            claimed = Counter(
                (t.endpoint, t.key) for t in todos.values() if t.key and t.state == "claimed"
            )
            with connection.cursor() as cursor:  # what a keyed claim counts (todos_key_claimed)
                cursor.execute(
                    "SELECT endpoint_id, key, count(*) FROM todos WHERE endpoint_id = ANY(%s)"
                    " AND state = 'claimed' AND key <> '' GROUP BY endpoint_id, key",
                    [list(eps)],
                )
                kept = {(eps[e], k): n for e, k, n in cursor.fetchall()}
            assert kept == dict(claimed), (kept, claimed)
            # A limit takes nothing back from what is held when it is set: a key held more
            # often than that may stay so, but only comes down to it.
            for endpoint, limit in self.model.max_per_key.items():
                for key in {t.key for t in todos.values() if t.endpoint == endpoint and t.key}:
                    n, allowed = claimed[(endpoint, key)], self.key_allowed.get((endpoint, key))
                    allowed = limit if allowed is None else allowed
                    assert n <= allowed, (endpoint, key, n, allowed)
                    self.key_allowed[(endpoint, key)] = max(limit, n)

    def the_questions_match_the_model(self, ids: list[int], rows: dict[int, dict]) -> None:
        """Every question as the model says (its seq, how it ended, the answer and who gave
        it); one open question exactly while a todo waits, and ``waiting_for`` then (and
        only then) ``people``; a question's time has run out exactly when the test made it
        so; an ended question never changes again; each answer and each question that ran
        out is audited once."""
        for todo in self.model.todos.values():
            assert rows[todo.id]["waiting_for"] == todo.waiting_for, todo.id
        # Most steps of most examples come before any question: the two reads below only
        # once one was asked (a question row the model lacks would first show as a todo
        # waiting, above), which keeps the step as cheap as it was before issue 43.
        models = [q for t in self.model.todos.values() for q in t.questions.values()]
        if not models:
            return
        asked = defaultdict(dict)
        for q in TodoQuestion.objects.filter(todo_id__in=ids).values():
            asked[q["todo_id"]][q["attempt_seq"]] = q
        audited: Counter = Counter()
        if any(q.ending in ("answered", "unanswered") for q in models):
            audited.update(
                TodoEvent.objects.filter(
                    todo_id__in=ids, kind__in=["answer", "unanswered"]
                ).values_list("todo_id", "kind")
            )
        users = {u.pk: n for n, u in self.world.users.items()}
        eps = {e.pk: n for n, e in self.endpoints.items()}
        for todo in self.model.todos.values():
            row, found = rows[todo.id], asked[todo.id]
            waiting = todo.waiting_for == "people"
            open_rows = [q for q in found.values() if q["ended_at"] is None]
            assert len(open_rows) == (1 if waiting else 0), (todo.id, todo.state, open_rows)
            assert sorted(found) == sorted(todo.questions), (todo.id, found, todo.questions)
            for seq, q in found.items():
                m = todo.questions[seq]
                answered_by = users.get(q["answered_by_user_id"]) or eps.get(
                    q["answered_by_endpoint_id"]
                )
                got = (q["ending"], q["ended_at"] is None, q["on_no_answer"])
                got += (q["expires_at"] is not None, answered_by, q["answer"])
                want = (m.ending, m.open, m.on_no_answer, m.within, m.answered_by, m.answer)
                assert got == want, (todo.id, seq, got, want)
                assert (q["choices"], q["answer_schema"]) == {
                    "choices": (CHOICES, None),
                    "schema": (None, FORM),
                    "free": (None, None),
                }[m.takes]
                if m.open and m.within:
                    assert (q["expires_at"] <= row["now"]) == m.due, (todo.id, q, m)
                if not m.open:  # a question ends once, and then stays as it ended
                    ended = (q["ended_at"], q["ending"], q["answer"], answered_by)
                    assert self.ended_questions.setdefault(q["id"], ended) == ended
            endings = Counter(q.ending for q in todo.questions.values())
            assert audited[(todo.id, "answer")] == endings["answered"], todo.id
            assert audited[(todo.id, "unanswered")] == endings["unanswered"], todo.id

    def touched_todos(self) -> list[ModelTodo]:
        """The todos the last step may have changed (the rest were checked when they were
        last changed; the_ledger_matches_the_model looks at every todo on every step)."""
        return [self.model.todos[pk] for pk in sorted(self.touched)]

    @invariant()
    def the_api_shape_matches(self) -> None:
        """get_todo as a human of the team sees: counters, dead letter, each attempt's
        outcome and ``died`` (true exactly for lease_expired and reaped)."""
        for todo in self.touched_todos():
            detail = get_todo_for_user(self.world.users["H"], todo.id, attempts_limit=50)
            data = detail.as_api()["todo"]
            assert (data["state"], data["attempt"], data["failures"], data["round"]) == (
                todo.state,
                todo.attempt,
                todo.failures,
                todo.round,
            )
            assert data["attempts_total"] == len(todo.attempts)
            assert data["attempts_pruned"] == todo.attempts_pruned
            assert data["dead_letter"] == (todo.state == "dead")
            assert data["dead_letter_reason"] == (todo.dead_letter_reason or None)
            # What it waits on: the open question, and every question newest first.
            question = todo.open_question
            assert data["waiting_for"] == (todo.waiting_for or None)
            assert (data["after_left"], data["children_open"]) == (
                todo.after_left,
                todo.children_open,
            )
            if todo.waiting_for == "people":
                shown = data["question"]
                assert (shown["attempt_seq"], shown["ending"]) == (question.seq, None)
            else:
                assert data["question"] is None
            assert [(q["attempt_seq"], q["ending"]) for q in data["questions"]] == [
                (q.seq, q.ending or None)
                for q in sorted(todo.questions.values(), key=lambda q: -q.seq)
            ]
            assert [a["seq"] for a in data["attempts"]] == sorted(todo.attempts, reverse=True)
            for record, shown in zip(detail.attempts, data["attempts"], strict=True):
                m = todo.attempts[record.seq]
                assert record.died == (record.outcome in DIED_OUTCOMES) == m.died
                assert shown["died"] == m.died
                assert (shown["round"], shown["attempt"]) == (m.round, m.attempt)
                if m.open:
                    assert record.is_open
                    assert (shown["ended_at"], shown["outcome"], shown["disposition"]) == (
                        None,
                        None,
                        None,
                    )
                else:
                    assert (shown["outcome"], shown["disposition"]) == (m.outcome, m.disposition)
                    assert shown["ended_at"] is not None

    @invariant()
    def nothing_is_visible_across_teams(self) -> None:
        """X and O (the other team) get the same not_found as for an unknown id, reading and
        acting (one transition each step, taking turns); B reads A's todos only as their
        requester, and the reverse."""
        x, o = self.actors["X"], self.actors["O"]
        touched = self.touched_todos()
        for todo in touched:
            for probe, scope in (
                (get_todo_for_endpoint, x.endpoint),
                (get_todo_for_user, o.user),
            ):
                with pytest.raises(NotFound) as foreign:
                    probe(scope, todo.id)
                assert foreign.value.as_dict() == self.not_found
        if touched:  # one transition a step, on one todo, by one of them, in turn
            act = FOREIGN_ACTS[self.step // 2 % len(FOREIGN_ACTS)]
            todo = touched[self.step % len(touched)]
            with pytest.raises(NotFound) as foreign:
                act((x, o)[self.step % 2], todo.id)
            # What an unknown id is told (a create names the parent, or the todo to wait for)
            unknown = (NOT_FOUND_PARENT, NOT_FOUND_AFTER.replace("{id}", str(todo.id)))
            assert foreign.value.as_dict() in (
                self.not_found,
                *({"error": {"code": NOT_FOUND, "message": m}} for m in unknown),
            )
        for todo in touched:
            other = self.endpoints[self.other(todo.endpoint)]
            if todo.requester is None:
                with pytest.raises(NotFound) as foreign:
                    get_todo_for_endpoint(other, todo.id)
                assert foreign.value.as_dict() == self.not_found
            else:
                sent = get_todo_for_endpoint(other, todo.id)
                assert sent.as_requester and "attempts" not in sent.as_api()["todo"]
                assert sent.todo.state == todo.state

    def owner_label(self, todo: ModelTodo) -> str:
        attempt = todo.open_attempt
        assert attempt is not None
        if attempt.human:
            return f"user:{self.world.users[attempt.claimer].pk}"
        return f"agent:{self.endpoints[attempt.claimer].agent_id}"


# What the other team tries on a todo of the first team; every one must be not_found.
FOREIGN_ACTS = (
    transitions.cancel,
    transitions.claim,
    transitions.heartbeat,
    transitions.complete,
    transitions.fail,
    transitions.release,
    lambda actor, pk: (
        transitions.rerun(actor, pk)
        if not actor.is_agent
        else transitions.claim(actor, pk, require_fence=True)
    ),
    lambda actor, pk: (
        transitions.retry_now(actor, pk)
        if not actor.is_agent
        else transitions.cancel(actor, pk, attempt_seq=1)
    ),
    lambda actor, pk: transitions.answer(actor, pk, value="ship it"),
    # Issue 44: a person's start now; an agent's child of it, or a todo made after it.
    lambda actor, pk: (
        transitions.start_now(actor, pk)
        if not actor.is_agent
        else transitions.create_todo(actor, title="child", parent=pk)
    ),
    lambda actor, pk: (
        transitions.start_now(actor, pk)
        if not actor.is_agent
        else transitions.create_todo(actor, title="after", after=[pk])
    ),
)
# What an unknown todo id is told when named as a parent, or as a todo to wait for ({id}).
NOT_FOUND_PARENT = "No such parent todo."
NOT_FOUND_AFTER = "No such todo to wait for: {id}."

TODO_FIELDS = (
    "state",
    "attempt",
    "failures",
    "round",
    "last_attempt_seq",
    "attempts_pruned",
    "dead_letter_reason",
    "max_attempts",
    "after_left",
    "children_open",
    "key",
)


def run(world: World, *, history_cap: int, max_todos: int, examples: int, steps: int) -> None:
    machine = type(
        "LedgerMachine",
        (LedgerMachine,),
        {"world": world, "history_cap": history_cap, "max_todos": max_todos, "steps": steps},
    )
    run_state_machine_as_test(machine, settings=machine_settings(examples, steps))


def test_the_ledger_follows_the_state_table(world):
    run(world, history_cap=50, max_todos=6, examples=EXAMPLES, steps=STEPS)


def test_the_ledger_follows_the_state_table_with_a_small_history_cap(settings, world):
    # Two todos and longer examples, so that each todo is claimed often enough for a cap
    # of 3 to prune its history.
    settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO = 3
    run(
        world,
        history_cap=3,
        max_todos=2,
        examples=max(1, EXAMPLES // 3),
        steps=STEPS_SMALL_CAP,
    )


# --- What the machine found ----------------------------------------------------------------
# SPEC, "Which attempt a call means": a repeat returns the recorded result only "if the
# caller closed the attempt". A requester's cancel of a claimed todo recorded no closer
# (ended_by is a user; the requester is an endpoint), so the ledger took the holder for the
# closer. Fixed in 9835c22 (the requester's cancel event names it).


def test_a_holder_cannot_replay_a_cancel_its_requester_made(world):
    worker, sender = world.endpoints["A"], world.endpoints["B"]
    todo, _ = transitions.create_todo(Actor.agent(sender), endpoint=worker, title="sent")
    claim = transitions.claim_next(Actor.agent(worker))
    transitions.cancel(Actor.agent(sender), todo.id)

    # The holder never canceled attempt 1: conflict, not a replay of "its" cancel.
    with pytest.raises(Conflict):
        transitions.cancel(Actor.agent(worker), todo.id, attempt_seq=claim.attempt_seq)


def test_a_requester_repeating_its_cancel_with_the_seq_replays(world):
    worker, sender = world.endpoints["A"], world.endpoints["B"]
    todo, _ = transitions.create_todo(Actor.agent(sender), endpoint=worker, title="sent")
    transitions.claim_next(Actor.agent(worker))
    first = transitions.cancel(Actor.agent(sender), todo.id)

    again = transitions.cancel(Actor.agent(sender), todo.id, attempt_seq=first.attempt.seq)

    assert again.replayed and again.attempt.seq == first.attempt.seq
