"""Bulk rerun and cancel from the Board (issue 15): work a pile of dead letters, or any
selection of todos, in a few clicks.

A person ticks rows (or takes "all N matching this filter"), sees a confirmation that says how
many todos each action would touch, and confirms. The confirmation carries what it showed:
each todo's id with the stamp it had then (``seen_stamp``: state, last attempt, round, the
drawer's own ``seen``). Acting is the ledger's (``transitions.act_on_confirmed``): each todo
by the rule a single rerun or cancel follows, each its own audited event with the person as
actor, a todo that moved on since the confirmation skipped and counted, never forced, and one
outside the person's teams read as not found, exactly like an unknown id. At most
``BULK_MAX`` todos a request. This module holds what the Board shows of it: the actions'
words, the confirmation's items and what happened, counted; and the dead letters grouped by
reason (the /queue/dead/ page), whose every group, and every error of one, is a selection
the same confirmation takes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from switchboard.board.reasons import dead_letter_reason
from switchboard.queues import transitions
from switchboard.queues.selectors import ERROR_START_CHARS, DeadLetterKey
from switchboard.queues.transitions import Actor
from switchboard.queues.transitions.by_hand import BULK_STATES, BULK_TAKES, Acted, seen_stamp

# Todos one bulk request may act on; "all matching" takes the newest this many.
BULK_MAX = 1000
# The confirmation lists the newest this many of its todos by name (and counts them all).
CONFIRM_SHOWN = 100


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    label: str  # the button
    verb: str  # "rerun" in "37 todos to rerun"
    done: str  # what happened to each todo it acted on
    states: tuple[str, ...]  # the states it acts on
    takes: str  # those states, in words


ACTIONS = {
    "rerun": Action(
        "rerun",
        "Rerun",
        "rerun",
        "rerun: pending again, in a new round",
        BULK_STATES["rerun"],
        BULK_TAKES["rerun"],
    ),
    "cancel": Action(
        "cancel", "Cancel", "cancel", "canceled", BULK_STATES["cancel"], BULK_TAKES["cancel"]
    ),
}
stamp = seen_stamp


# ---------------------------------------------------------------------------------------
# The confirmation's items, carried in one form field: "12=dead.5.1 11=dead.3.2 ..." (one
# field, not one per todo: Django refuses forms of more than 1,000 fields).

_ITEM = re.compile(r"([0-9]{1,18})=([a-z_]{1,16}\.[0-9]{1,10}\.[0-9]{1,10})")


def encode_items(items: Iterable[tuple[int, str]]) -> str:
    return " ".join(f"{todo_id}={seen}" for todo_id, seen in items)


def decode_items(text: str) -> list[tuple[int, str]]:
    """The (id, stamp) pairs of a posted confirmation, each id once, at most BULK_MAX; a part
    that is not one is dropped (a forged form gets nothing for it)."""
    seen: dict[int, str] = {}
    for part in text.split()[: BULK_MAX * 2]:
        match = _ITEM.fullmatch(part)
        if match and len(seen) < BULK_MAX:
            seen.setdefault(int(match[1]), match[2])
    return list(seen.items())


# ---------------------------------------------------------------------------------------
# Acting


@dataclass(frozen=True, slots=True)
class Outcome:
    todo_id: int
    kind: str  # "done", "moved" (moved on since the confirmation), "refused", "missing"
    state: str | None = None  # the todo's state now (None for a missing one)
    why: str = ""


@dataclass(frozen=True, slots=True)
class Result:
    action: Action
    outcomes: list[Outcome]

    def count(self, kind: str) -> int:
        return sum(o.kind == kind for o in self.outcomes)

    @property
    def done(self) -> int:
        return self.count("done")

    @property
    def skipped(self) -> int:
        return self.count("moved") + self.count("refused")

    @property
    def missing(self) -> int:
        return self.count("missing")


def act(user, action: Action, items: list[tuple[int, str]]) -> Result:
    """Run ``action`` on each confirmed (id, stamp) (the ledger's rules, see the module's
    docstring). Returns what happened to each, in the order given."""
    acted = transitions.act_on_confirmed(Actor.human(user), action.name, items)
    return Result(action, [_outcome(action, a) for a in acted])


def _outcome(action: Action, acted: Acted) -> Outcome:
    why = action.done if acted.kind == "done" else acted.why
    return Outcome(acted.todo_id, acted.kind, acted.state, why)


# ---------------------------------------------------------------------------------------
# Dead letters by reason: the groups of the /queue/dead/ page, in the words the queue rows
# say (board/reasons.py), and the members of one group for its bulk action.

# A reason lists its most common errors (the start of the last try's summary) this many, and
# the page its largest reasons this many (the rest counted in one line): a page of bounded
# size however varied the dead letters (docs/benchmarks.md, "Dead letters at scale").
ERRORS_SHOWN = 5
REASONS_SHOWN = 12


def reason_words(key: DeadLetterKey) -> str:
    """A dead letter's reason, in the words its queue row says."""
    return dead_letter_reason(
        key.reason,
        failures=key.failures,
        max_attempts=key.max_attempts,
        failed=key.failed,
        died=key.died,
    )


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    error: str | None  # the start of the last try's summary (None: it wrote none)
    count: int
    newest: int  # the newest todo id of the group


@dataclass(frozen=True, slots=True)
class ReasonGroup:
    reason: str  # the words
    count: int
    newest: int
    errors: list[ErrorGroup]  # the most common first, at most ERRORS_SHOWN
    other_errors: int  # how many more distinct errors the group has...
    other_count: int  # ...and how many todos they hold


def reason_groups(keys: Iterable[tuple[DeadLetterKey, int, int]]) -> list[ReasonGroup]:
    """The dead letters counted by key (queues.selectors.board_dead_letter_groups) as groups
    by reason words, the largest first, each with its errors, the most common first. Keys
    whose words are the same are one group ("said not retryable" at any spent budget)."""
    by_reason: dict[str, dict[str | None, list[int]]] = {}
    for key, count, newest in keys:
        errors = by_reason.setdefault(reason_words(key), {})
        seen = errors.setdefault(key.error, [0, 0])
        seen[0] += count
        seen[1] = max(seen[1], newest)
    groups = []
    for reason, errors in by_reason.items():
        ordered = sorted(
            (ErrorGroup(error, n, newest) for error, (n, newest) in errors.items()),
            key=lambda e: (-e.count, e.error is None, e.error or ""),
        )
        shown, rest = ordered[:ERRORS_SHOWN], ordered[ERRORS_SHOWN:]
        groups.append(
            ReasonGroup(
                reason=reason,
                count=sum(e.count for e in ordered),
                newest=max(e.newest for e in ordered),
                errors=shown,
                other_errors=len(rest),
                other_count=sum(e.count for e in rest),
            )
        )
    return sorted(groups, key=lambda g: (-g.count, g.reason))


# What a group's bulk action names: its reason in words, at most this long (the longest
# words are "failed 1000, died 1000 of 1000" and "1000 of 1000 spent, the last failed"),
# and, for one error of it, that error.
REASON_MAX_CHARS = 80


@dataclass(frozen=True, slots=True)
class GroupPick:
    reason: str
    error: str | None  # the error's start ("" in the form: the todos with no summary)
    by_error: bool  # False: every error of the reason

    def takes(self, key: DeadLetterKey) -> bool:
        if reason_words(key) != self.reason:
            return False
        return not self.by_error or _line(key.error) == _line(self.error)


def _line(error: str | None) -> str | None:
    # A form's value comes back with its carriage returns as line feeds (HTML's parser).
    return error.replace("\r", "\n") if error else error


def group_pick(params) -> GroupPick | None:
    """The group a bulk action was asked for (``reason``, and ``error`` for one of its
    errors), or None when it names none. Words that no group has pick nothing."""
    if "reason" not in params:
        return None
    reason = params.get("reason", "")[:REASON_MAX_CHARS]
    if "error" not in params:
        return GroupPick(reason, None, by_error=False)
    error = params.get("error", "")[: ERROR_START_CHARS * 2]
    return GroupPick(reason, error or None, by_error=True)


def group_members(pick: GroupPick, rows: Iterable[tuple[int, DeadLetterKey]]) -> list[int]:
    """The ids of the dead letters (queues.selectors.board_dead_letters, newest first) that
    the group takes, newest first."""
    return [todo_id for todo_id, key in rows if pick.takes(key)]
