"""Bulk rerun and cancel from the Board (issue 15): work a pile of dead letters, or any
selection of todos, in a few clicks.

A person ticks rows (or takes "all N matching this filter"), sees a confirmation that says how
many todos each action would touch, and confirms. The confirmation carries what it showed:
each todo's id with the stamp it had then (``state.last_attempt_seq.round``, the drawer's own
``seen``). Acting is **the existing transition's rule for each todo**, each its own audited
event with the person as actor:

- **Rerun**: ``transitions.rerun`` (a done, dead or canceled todo: pending, a new round);
- **Cancel**: ``transitions.cancel`` for a live todo (pending, claimed or waiting to retry; a
  held attempt ends ``canceled``, ended by the person), ``transitions.cancel_dead_letter`` for
  a dead letter (canceled, not run again).

The todos are worked in chunks of ``CHUNK``, each one transaction that first locks the chunk's
rows (``queues.sql.LOCK_TODOS_FOR_BULK``, in id order, scoped by the person's teams) and then
acts: a todo whose stamp differs from the confirmed one moved on in between and is **skipped
and counted, never forced**. The reruns of a chunk (and its dead letters set aside) are one
statement for all of them, the very statement a single rerun runs, each todo guarded by the
state the lock read and audited on its own row (``transitions.rerun_seen_plan``); any other
cancel runs its own transition in a savepoint. A todo outside the person's teams reads as not
found, exactly like an unknown id, and is neither touched nor named. At
most ``BULK_MAX`` todos a request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import DatabaseError, transaction

from queues import db, sql, transitions
from queues.errors import Conflict, Invalid, NotFound
from queues.models import TodoState
from queues.transitions import Actor

# Todos one bulk request may act on; "all matching" takes the newest this many.
BULK_MAX = 1000
# The confirmation lists the newest this many of its todos by name (and counts them all).
CONFIRM_SHOWN = 100
# Todos per transaction: their row locks are held while the chunk runs (well under a second).
CHUNK = 100


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
        (TodoState.DONE, TodoState.DEAD, TodoState.CANCELED),
        "Rerun takes done, dead and canceled todos",
    ),
    "cancel": Action(
        "cancel",
        "Cancel",
        "cancel",
        "canceled",
        (TodoState.PENDING, TodoState.CLAIMED, TodoState.RETRY_WAIT, TodoState.DEAD),
        "Cancel takes pending, claimed, retry-wait and dead todos",
    ),
}


def stamp(state: str, last_attempt_seq: int, round_no: int) -> str:
    """What a confirmation saw of a todo: board.drawer.seen_stamp's format."""
    return f"{state}.{last_attempt_seq}.{round_no}"


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
    """Run ``action`` on each confirmed (id, stamp), chunk by chunk (see the module's
    docstring). Returns what happened to each, in the order given."""
    outcomes: list[Outcome] = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        try:
            with transaction.atomic():
                outcomes += _act_chunk(user, action, chunk)
        except DatabaseError as exc:
            # The chunk's transaction rolled back whole (a deadlock, a lost connection):
            # nothing of it was written, and each todo says so.
            why = f"not changed: the database refused this batch ({type(exc).__name__}); try again"
            outcomes += [Outcome(todo_id, "refused", None, why) for todo_id, _ in chunk]
    return Result(action, outcomes)


def _act_chunk(user, action: Action, chunk: list[tuple[int, str]]) -> list[Outcome]:
    rows = db.fetch(
        sql.LOCK_TODOS_FOR_BULK,
        {"todo_ids": [todo_id for todo_id, _ in chunk], "scope_user": user.pk},
    )
    now = {row[0]: row for row in rows}
    outcomes: dict[int, Outcome] = {}
    # The todos to act on, as the lock read them: a rerun, or a dead letter set aside, is
    # one statement for all of them (queues.transitions.rerun_seen_plan); any other cancel
    # is its own transition.
    together: list[tuple[int, str, str]] = []
    one_by_one: list[tuple[int, str, int]] = []
    for todo_id, seen in chunk:
        row = now.get(todo_id)
        if row is None:  # unknown, or not in the person's teams: the same answer
            outcomes[todo_id] = Outcome(todo_id, "missing")
            continue
        _, state, last_seq, round_no, reason = row
        if stamp(state, last_seq, round_no) != seen:
            outcomes[todo_id] = Outcome(todo_id, "moved", state, "moved on since you confirmed")
        elif state not in action.states:
            outcomes[todo_id] = Outcome(todo_id, "refused", state, action.takes)
        elif action.name == "rerun" or state == TodoState.DEAD:
            together.append((todo_id, state, reason))
        else:
            one_by_one.append((todo_id, state, last_seq))
    if together:
        if action.name == "rerun":
            plan = transitions.rerun_seen_plan(user, [(i, state) for i, state, _ in together])
        else:
            plan = transitions.cancel_dead_letters_seen_plan(user, together)
        moved = db.run(plan)
        for todo_id, state, _ in together:
            outcomes[todo_id] = (
                Outcome(todo_id, "done", None, action.done)
                if todo_id in moved
                else Outcome(todo_id, "moved", state, "moved on since you confirmed")
            )
    for todo_id, state, last_seq in one_by_one:
        open_seq = last_seq if state == TodoState.CLAIMED else None
        try:
            db.run(transitions.cancel_plan(Actor.human(user), todo_id, attempt_seq=open_seq))
        except (Conflict, Invalid) as exc:
            outcomes[todo_id] = Outcome(todo_id, "refused", state, str(exc))
        except NotFound:
            outcomes[todo_id] = Outcome(todo_id, "missing")
        else:
            outcomes[todo_id] = Outcome(todo_id, "done", None, action.done)
    return [outcomes[todo_id] for todo_id, _ in chunk]
