"""How an attempt ends, and what that does to its todo: River's ``reportError`` and
``JobSetState*`` are the model. A ``Close`` is built by one named constructor per kind
(``Close.complete(...)``, ``Close.fail(retryable=...)``, ``Close.release(not_before=...)``
…); ``decide`` turns it, and the failure budget the locked read found, into a ``Decision``:
the todo's next state, the attempt's disposition, the retry's delay or the wake time, and the
dead-letter reason. The close statement applies the decision as parameters and decides
nothing (queues/sql/close.py); so does the claim statement that takes over a lapsed lease
(queues/sql/claim.py, ``Close.lapse()``).
"""

from __future__ import annotations

import enum
import json
import random
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.conf import settings

from switchboard.queues import questions
from switchboard.queues.bounds import (
    NOTHING,
    SNOOZE_SECONDS_MAX,
    Bounded,
    bound_artifact,
    bound_not_before,
    bound_result,
    bound_summary,
    summary_from_result,
)
from switchboard.queues.errors import Invalid
from switchboard.queues.models import (
    TERMINAL_STATES,
    Disposition,
    EventKind,
    Outcome,
    TodoState,
    WaitingFor,
)
from switchboard.queues.questions import Question
from switchboard.queues.records import Budget


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """What one way of ending an attempt does and allows."""

    outcome: Outcome
    goes_to: TodoState  # where the todo goes while the failure budget allows
    spends_budget: bool = False  # counts as a failure (failures + 1; dead at the cap)
    reports: bool = False  # the closer reports a result
    event: EventKind | None = None  # the audit kind of a person's close
    person_may_end: bool = False  # a person of the team may end an attempt they do not hold
    requester_may_end: bool = False  # so may the agent that sent the todo
    waits_for: WaitingFor | None = None  # what the todo then waits for (goes_to waiting)


class CloseKind(enum.Enum):
    """Each way an attempt ends, with its rules (``Rules``). Each member is the verb's name,
    or the sweeper's (``REAP``), a revocation's, or a claim's that finds a lapsed lease
    (``LAPSE``: the holder died; the claimer takes the todo over), or a person's who takes
    the lease over from a live agent (``TAKE_OVER``)."""

    COMPLETE = Rules(
        outcome=Outcome.COMPLETED, goes_to=TodoState.DONE, reports=True, event=EventKind.COMPLETE
    )
    FAIL = Rules(
        outcome=Outcome.FAILED,
        goes_to=TodoState.RETRY_WAIT,
        spends_budget=True,
        reports=True,
        event=EventKind.FAIL,
    )
    RELEASE = Rules(
        outcome=Outcome.RELEASED,
        goes_to=TodoState.PENDING,
        event=EventKind.RELEASE,
        person_may_end=True,
    )
    CANCEL = Rules(
        outcome=Outcome.CANCELED,
        goes_to=TodoState.CANCELED,
        event=EventKind.CANCEL,
        person_may_end=True,
        requester_may_end=True,
    )
    REAP = Rules(outcome=Outcome.REAPED, goes_to=TodoState.PENDING, spends_budget=True)
    LAPSE = Rules(outcome=Outcome.LEASE_EXPIRED, goes_to=TodoState.PENDING, spends_budget=True)
    REVOKE = Rules(outcome=Outcome.REVOKED, goes_to=TodoState.DEAD)
    TAKE_OVER = Rules(outcome=Outcome.TAKEN_OVER, goes_to=TodoState.CLAIMED)
    # A release with a question: the todo waits for an answer (no try spent).
    ASK = Rules(outcome=Outcome.ASKED, goes_to=TodoState.WAITING, waits_for=WaitingFor.PEOPLE)
    # A release with wait_for_children: the todo waits until each of its children has ended
    # (a plain release when none is open: queues/transitions/close.py).
    WAIT_CHILDREN = Rules(
        outcome=Outcome.RELEASED, goes_to=TodoState.WAITING, waits_for=WaitingFor.CHILDREN
    )

    @property
    def rules(self) -> Rules:
        return self.value

    @property
    def outcome(self) -> Outcome:
        return self.value.outcome

    @property
    def event(self) -> EventKind | None:
        return self.value.event


@dataclass(frozen=True, slots=True, kw_only=True)
class Close:
    """How one attempt ends, with what its closer wrote. Built by the constructors below."""

    kind: CloseKind
    result: Any = None
    summary: Bounded = NOTHING
    artifact: Bounded = NOTHING
    retryable: bool = True  # fail: false is dead at once, whatever the budget
    # release (a snooze): claimable again from this instant, or this many seconds from now by
    # the database's clock.
    not_before: datetime | None = None
    delay_seconds: float | None = None
    # ask (a release with a question): what it asks, and what answers it.
    question: Question | None = None

    @classmethod
    def complete(cls, *, result: Any = None, summary=None, artifact=None) -> Close:
        """The work is done: the todo is done, the attempt completed."""
        return cls._reporting(CloseKind.COMPLETE, result, summary, artifact)

    @classmethod
    def fail(cls, *, result: Any = None, summary=None, artifact=None, retryable=True) -> Close:
        """The work failed: retried with backoff while the budget allows, dead at the cap, or
        at once when ``retryable`` is false."""
        if not isinstance(retryable, bool):
            raise Invalid("retryable must be true or false.")
        close = cls._reporting(CloseKind.FAIL, result, summary, artifact)
        return close if retryable else replace(close, retryable=False)

    @classmethod
    def release(
        cls,
        *,
        summary=None,
        artifact=None,
        not_before=None,
        delay_seconds=None,
        question=None,
        choices=None,
        answer_schema=None,
        answer_within_seconds=None,
        on_no_answer=None,
        wait_for_children=False,
    ) -> Close:
        """No verdict: back to pending, the budget untouched. With ``not_before`` or
        ``delay_seconds`` a snooze: claimable again only from then (an agent waiting on
        something outside, a CI run, gives the todo back for later without spending a
        try). With ``question``, an ask: the todo waits for a person's answer (or its
        requester's), not claimable until then (queues/questions.py says what a question
        may be and what answers it)."""
        asked = (choices, answer_schema, answer_within_seconds, on_no_answer)
        if not isinstance(wait_for_children, bool):
            raise Invalid("wait_for_children must be true or false.")
        if wait_for_children:
            if question is not None or not_before is not None or delay_seconds is not None:
                raise Invalid(
                    "wait_for_children waits for the children: no question, not_before or"
                    " delay_seconds with it."
                )
            return cls(
                kind=CloseKind.WAIT_CHILDREN,
                summary=bound_summary(summary),
                artifact=bound_artifact(artifact),
            )
        if question is None:
            if any(value is not None for value in asked):
                raise Invalid("choices, answer_schema and the rest go with a question.")
            return cls(
                kind=CloseKind.RELEASE,
                summary=bound_summary(summary),
                artifact=bound_artifact(artifact),
                not_before=_wake_time(not_before),
                delay_seconds=_delay(delay_seconds, given_time=not_before is not None),
            )
        if not_before is not None or delay_seconds is not None:
            raise Invalid("A question waits for its answer, not for a time: give one of them.")
        return cls(
            kind=CloseKind.ASK,
            summary=bound_summary(summary),
            artifact=bound_artifact(artifact),
            question=questions.question(
                question,
                choices=choices,
                answer_schema=answer_schema,
                answer_within_seconds=answer_within_seconds,
                on_no_answer=on_no_answer,
            ),
        )

    @classmethod
    def cancel(cls) -> Close:
        """Stop the work for good: canceled."""
        return cls(kind=CloseKind.CANCEL)

    @classmethod
    def reap(cls) -> Close:
        """The sweeper found the lease lapsed: the holder died. Back to pending, or dead at
        the cap (a death spends the budget as a failure does)."""
        return cls(kind=CloseKind.REAP)

    @classmethod
    def lapse(cls) -> Close:
        """A claim found the lease lapsed: the holder died. The claimer takes the todo over
        (it was requeued to the claimer), or it is dead at the cap (a death spends the budget
        as a failure does)."""
        return cls(kind=CloseKind.LAPSE)

    @classmethod
    def take_over(cls) -> Close:
        """A person takes the lease from the agent holding it: the agent's try ends taken
        over, and the todo stays claimed, by the person (an owner attempt opens)."""
        return cls(kind=CloseKind.TAKE_OVER)

    @classmethod
    def revoke(cls) -> Close:
        """The todo's endpoint was revoked: dead, whatever the budget."""
        return cls(kind=CloseKind.REVOKE)

    @classmethod
    def _reporting(cls, kind: CloseKind, result, summary, artifact) -> Close:
        stored = bound_result(result)
        summary_b = bound_summary(summary)
        if summary_b is NOTHING and settings.SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT:
            summary_b = summary_from_result(stored)
        return cls(kind=kind, result=stored, summary=summary_b, artifact=bound_artifact(artifact))

    @property
    def needs_lock(self) -> bool:
        """Does it take the locked path, whoever closes: a wait (an ask records its question
        in the close's transaction; a wait for children reads their count under the lock)."""
        return self.kind.rules.waits_for is not None

    @property
    def needs_budget(self) -> bool:
        """Does the decision depend on the failure budget (read before deciding)?"""
        return self.kind.rules.spends_budget and self.retryable

    def written(self) -> dict:
        """What the closer wrote, as the close statement's parameters."""
        reports = self.kind.rules.reports
        return {
            "outcome": self.kind.outcome,
            "sets_result": reports,
            "result": json.dumps(self.result) if reports and self.result is not None else None,
            "summary": self.summary.text,
            "summary_truncated": self.summary.truncated,
            "summary_bytes": self.summary.bytes,
            "artifact": self.artifact.text,
            "artifact_truncated": self.artifact.truncated,
            "artifact_bytes": self.artifact.bytes,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What a close does to its todo, for the one statement that applies it."""

    state: TodoState
    disposition: Disposition
    spends: bool  # failures + 1
    retry_in: float | None = None  # retry_wait: seconds from now (by the database's clock)
    wake_at: datetime | None = None  # a snoozed release: claimable from this instant...
    wake_in: float | None = None  # ...or this many seconds from now
    dead_letter_reason: str = ""
    budget_seen: int | None = None  # the failures it was decided on: the statement's guard
    waiting_for: str = ""  # a waiting todo's wait (WaitingFor)

    def params(self) -> dict:
        return {
            "state": self.state,
            "disposition": self.disposition,
            "spends": int(self.spends),
            "retry_in": self.retry_in,
            "wake_at": self.wake_at,
            "wake_in": self.wake_in,
            "dead_letter_reason": self.dead_letter_reason,
            "ends": self.state in TERMINAL_STATES,
            "failures_seen": self.budget_seen,
            "waiting_for": self.waiting_for,
        }

    def lapse_params(self) -> dict:
        """A lapsed lease's decision, for the claim statement that takes the todo over
        (queues/sql/claim.py): whether the todo dies instead of being claimed, the lapsed
        attempt's disposition, the dead letter's reason, and the failures it was decided
        on (the statement's guard)."""
        return {
            "lapse_dies": self.state == TodoState.DEAD,
            "lapse_disposition": self.disposition,
            "lapse_reason": self.dead_letter_reason,
            "lapse_spends": int(self.spends),
            "failures_seen": self.budget_seen,
        }


DISPOSITION = {
    TodoState.DONE: Disposition.DONE,
    TodoState.RETRY_WAIT: Disposition.RETRY_SCHEDULED,
    TodoState.PENDING: Disposition.REQUEUED,
    TodoState.DEAD: Disposition.DEAD_LETTERED,
    TodoState.CANCELED: Disposition.CANCELED,
    TodoState.CLAIMED: Disposition.TAKEN_OVER,
    TodoState.WAITING: Disposition.WAITING,
}


def decide(close: Close, budget: Budget | None) -> Decision:
    """What ending an attempt with ``close`` does, given the budget (None for a close whose
    decision does not depend on it: ``close.needs_budget`` is false).

    - A close that spends the budget (fail, reap) kills the todo when it is the last failure
      the todo may have (``failures + 1 >= max_attempts``); so does a fail that is not
      retryable, and a revocation, whatever the budget.
    - Otherwise the todo goes where the kind says: a failure to ``retry_wait`` after a
      backoff (exponential in the failures so far, capped, with full jitter), a release to
      ``pending`` (not claimable before its wake time, for a snooze).
    - The disposition follows from the state; a dead todo's reason is the outcome.
    """
    kind = close.kind
    rules = kind.rules
    if close.needs_budget and budget is None:
        raise ValueError(f"deciding a {kind.name.lower()} needs the failure budget")
    dies = (
        kind is CloseKind.REVOKE
        or (kind is CloseKind.FAIL and not close.retryable)
        or (
            rules.spends_budget
            and budget is not None
            and budget.failures + 1 >= budget.max_attempts
        )
    )
    state = TodoState.DEAD if dies else rules.goes_to
    return Decision(
        state=state,
        disposition=DISPOSITION[state],
        spends=rules.spends_budget,
        retry_in=backoff(budget.failures) if state == TodoState.RETRY_WAIT and budget else None,
        wake_at=close.not_before if state == TodoState.PENDING else None,
        wake_in=close.delay_seconds if state == TodoState.PENDING else None,
        dead_letter_reason=kind.outcome if dies else "",
        budget_seen=budget.failures if budget is not None else None,
        waiting_for=(rules.waits_for or "") if state == TodoState.WAITING else "",
    )


def backoff(failures: int) -> float:
    """Seconds before a failed todo may be claimed again: full jitter over an exponential
    (SWITCHBOARD_RETRY_BASE_SECONDS doubling per failure so far, capped at
    SWITCHBOARD_RETRY_MAX_SECONDS; a base of 0 retries at once)."""
    ceiling = min(
        float(settings.SWITCHBOARD_RETRY_MAX_SECONDS),
        float(settings.SWITCHBOARD_RETRY_BASE_SECONDS) * 2.0 ** min(failures, 40),
    )
    return random.uniform(0.0, ceiling)


def _wake_time(value: object) -> datetime | None:
    return bound_not_before(value)


def _delay(value: object, *, given_time: bool) -> float | None:
    if value is None:
        return None
    if given_time:
        raise Invalid("Give not_before or delay_seconds, not both.")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid("delay_seconds must be a number.")
    if not 0 < value <= SNOOZE_SECONDS_MAX:
        raise Invalid(f"delay_seconds must be more than 0 and at most {SNOOZE_SECONDS_MAX}.")
    return float(value)
