"""Todos that wait for todos (issue 44). A todo made ``after`` others waits (``waiting_for:
todos``) until each is done (or, with ``after_policy: any_end``, has ended); a parent whose
holder released it with ``wait_for_children`` waits until each child has ended. The counts
are kept by triggers in the transaction of each ending (queues/schema/functions.sql), so the
last one makes the waiting todo pending with its doorbell rung, whatever path ended it. This
module holds what the transitions add around them:

- a create's ``after``, ``parent`` and ``unique_while_active`` (``prepare_create`` and the
  steps ``create_todo`` runs in its transaction);
- a parent's cancel, which cancels its unfinished children (``cancel_children``);
- a person's ``start_now``, which ends a wait for todos or children at once (audited);
- the sweeper's ``release_leftovers``: a prerequisite with more than the trigger's 1000
  dependents leaves the rest to it, in batches of as many, each its own transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.queues import bounds, db, sql
from switchboard.queues.arguments import todo_id as checked_todo_id
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import (
    TERMINAL_STATES,
    AfterPolicy,
    ClaimerKind,
    EventKind,
    TodoState,
    WaitingFor,
)
from switchboard.queues.records import TodoRecord
from switchboard.queues.transitions._common import Actor, event, lock, read_todo, ring, transition
from switchboard.queues.transitions.decide import Close, decide

AFTER_MAX = 100  # ids a todo may be made after
RELEASE_BATCH = 1000  # dependents released a statement (the trigger's batch, the sweeper's)
LEFTOVER_PASSES = 100  # a sweep's batches of leftovers, at most 10 prerequisites each
READ_MAX = 100  # what get_todo lists of a todo's prerequisites, dependents and children


@dataclass(frozen=True, slots=True)
class Waits:
    """A create's checked arguments of issue 44."""

    after: list[int]
    after_policy: str
    parent_id: int | None
    key: str
    unique_while_active: bool


def prepare_create(
    *, after: object, after_policy: object, parent: object, key: object, unique_while_active: object
) -> Waits:
    """The create's arguments checked (Invalid saying what is wrong), before anything is
    read or written."""
    ids: list[int] = []
    if after is not None:
        if not isinstance(after, list) or not 1 <= len(after) <= AFTER_MAX:
            raise Invalid(f"after must be a list of 1 to {AFTER_MAX} todo ids.")
        ids = sorted({checked_todo_id(each) for each in after})
    policy = AfterPolicy.ALL_DONE if after_policy is None else after_policy
    if policy not in AfterPolicy.values:
        raise Invalid(f"after_policy must be one of {', '.join(AfterPolicy.values)}.")
    if after_policy is not None and not ids:
        raise Invalid("after_policy goes with after.")
    if key is None:
        key = ""
    if not isinstance(key, str) or len(key) > bounds.KEY_MAX_CHARS or (key and not key.strip()):
        raise Invalid(f"key must be a string of at most {bounds.KEY_MAX_CHARS} characters.")
    if not isinstance(unique_while_active, bool):
        raise Invalid("unique_while_active must be true or false.")
    if unique_while_active and not key:
        raise Invalid("unique_while_active needs a key: the todos it keeps to one.")
    return Waits(
        after=ids,
        after_policy=str(policy),
        parent_id=None if parent is None else checked_todo_id(parent),
        key=bounds.storable(key, field="key") if key else "",
        unique_while_active=unique_while_active,
    )


def existing_of_key(endpoint_id: int, waits: Waits) -> Plan[TodoRecord | None]:
    """unique_while_active: the open todo of this key, if there is one (under the key's lock,
    held to the create's commit, so two creates of one key take turns)."""
    params = {"endpoint_id": endpoint_id, "key": waits.key}
    yield Fetch(sql.LOCK_KEY, params)
    rows = yield Fetch(sql.OPEN_TODO_OF_KEY, params)
    return (yield from read_todo(rows[0][0])) if rows else None


def check_parent(actor: Actor, team_id: int, parent_id: int) -> Plan[None]:
    """A child's parent: a todo of the team (else NotFound, unknown and foreign alike) whose
    open attempt the caller holds (else Conflict), locked to the create's commit."""
    rows = yield Fetch(sql.LOCK_PARENT, {"parent_id": parent_id, "team_id": team_id})
    if not rows:
        raise NotFound("No such parent todo.")
    _, state, claimer_kind, endpoint_id, user_id = rows[0]
    holds = (
        claimer_kind == ClaimerKind.ENDPOINT and endpoint_id == actor.endpoint_id
        if actor.is_agent
        else claimer_kind == ClaimerKind.PERSON and user_id == actor.user.pk
    )
    if state != TodoState.CLAIMED or not holds:
        raise Conflict("Only the holder of a claimed todo makes its children.")


def prerequisites(team_id: int, waits: Waits) -> Plan[tuple[list[str], int]]:
    """Lock and mark the todos the new one is made after: each one's edge (the state it
    ended in, '' if it has not), and how many the new todo still waits for. Unknown and
    foreign ids: NotFound; one that ended in a way that can never satisfy the policy
    (dead or canceled, under all_done): Conflict, nothing written."""
    rows = yield Fetch(sql.MARK_PREREQUISITES, {"after_ids": waits.after, "team_id": team_id})
    states = dict(rows)
    missing = [each for each in waits.after if each not in states]
    if missing:
        raise NotFound(f"No such todo to wait for: {missing[0]}.")
    ended = [states[each] if states[each] in TERMINAL_STATES else "" for each in waits.after]
    if waits.after_policy == AfterPolicy.ALL_DONE:
        lost = [each for each, end in zip(waits.after, ended, strict=True) if end and end != "done"]
        if lost:
            raise Conflict(
                f"Todo {lost[0]} has ended {states[lost[0]]}: it will never be done. Make this"
                ' todo with after_policy "any_end" to start once they have all ended.'
            )
        left = sum(1 for each in waits.after if states[each] != TodoState.DONE)
    else:
        left = sum(1 for end in ended if not end)
    return ended, left


def record_edges(todo_id: int, waits: Waits, ended: list[str]) -> Plan[None]:
    yield Fetch(sql.INSERT_EDGES, {"todo_id": todo_id, "after_ids": waits.after, "ended": ended})


def count_child(parent_id: int) -> Plan[None]:
    yield Fetch(sql.COUNT_CHILD, {"parent_id": parent_id})


def cancel_children(actor: Actor, parent_id: int) -> Plan[int]:
    """Cancel a canceled parent's unfinished children, and theirs, level by level, in the
    caller's transaction: a claimed one's attempt closes ``canceled`` (its holder fenced out),
    the others are canceled at once; each audited (``cancel_child``). Returns how many."""
    close = Close.cancel()
    decision = decide(close, None)
    by = {
        "ended_by": None if actor.is_agent else actor.user.pk,
        "ended_by_endpoint": actor.endpoint_id,
        "failures_seen": None,
    }
    level, canceled = [parent_id], 0
    while level:
        rows = yield Fetch(sql.OPEN_CHILDREN, {"parent_ids": level})
        claimed = [todo_id for todo_id, state in rows if state == TodoState.CLAIMED]
        others = [todo_id for todo_id, state in rows if state != TodoState.CLAIMED]
        if claimed:
            params = {**close.written(), **decision.params(), **by, "todo_ids": claimed}
            yield Fetch(sql.CLOSE_MANY, params)
        if others:
            yield Fetch(sql.CANCEL_MANY_UNCLAIMED, {"todo_ids": others})
        for todo_id, state in rows:
            yield from event(
                EventKind.CANCEL_CHILD,
                todo_id,
                actor=actor,
                detail={"parent": parent_id, "from_state": state},
            )
        canceled += len(rows)
        level = [todo_id for todo_id, _ in rows]
    return canceled


@transition
def start_now(actor: Actor, todo_id: int) -> Plan[TodoRecord]:
    """A person ends a todo's wait for other todos or for its children: pending at once,
    audited with what it still waited for. (A wait for a person's answer ends with the
    answer, or the person claims the todo.)"""
    if actor.is_agent:
        raise Invalid("A person starts a waiting todo, from the Board.")
    return (yield Atomic(_start_now(actor, checked_todo_id(todo_id))))


def _start_now(actor: Actor, todo_id: int) -> Plan[TodoRecord]:
    locked = yield from lock(actor, todo_id)
    before = yield from read_todo(todo_id)
    waits = before.waiting_for in (WaitingFor.TODOS, WaitingFor.CHILDREN)
    if locked.state != TodoState.WAITING or not waits:
        raise Conflict(
            "That todo waits for no todos or children now"
            + (": answer its question, or claim it." if before.waiting_for else ".")
        )
    yield Fetch(sql.START_NOW, {"todo_id": todo_id})
    yield from event(
        EventKind.START_NOW,
        todo_id,
        team_id=locked.team_id,
        actor=actor,
        detail={
            "waiting_for": before.waiting_for,
            "after_left": before.after_left,
            "children_open": before.children_open,
        },
    )
    yield from ring(locked.endpoint_id)
    return (yield from read_todo(todo_id))


def release_leftovers(*, batch: int = RELEASE_BATCH) -> int:
    """The sweeper's: dependents a trigger left (a prerequisite with more than its batch),
    released in batches of ``batch``, each its own transaction. Returns how many moved."""
    moved = 0
    for _ in range(LEFTOVER_PASSES):  # bounded: edges another sweeper holds are skipped
        found = db.fetch(sql.ENDED_WITH_UNMARKED_EDGES, {"limit": 10})
        if not found:
            break
        for after_id, state in found:
            moved += db.run(_atomic(_release(after_id, state, batch)))
    return moved


def _atomic(plan: Plan) -> Plan:
    return (yield Atomic(plan))


def _release(after_id: int, state: str, batch: int) -> Plan[int]:
    rows = yield Fetch(sql.RELEASE_BATCH, {"after_id": after_id, "ended": state, "batch": batch})
    for endpoint_id in sorted({e for e, s in rows if s == TodoState.PENDING}):
        yield from ring(endpoint_id)
    return len(rows)
