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
words, the confirmation's items and what happened, counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from queues import transitions
from queues.transitions import Actor
from queues.transitions.by_hand import BULK_STATES, BULK_TAKES, Acted, seen_stamp

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
