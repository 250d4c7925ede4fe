"""What only a person does, from the Board: retry now (a waiting retry, same round), rerun
(a finished todo, a new round), setting a dead letter aside (canceled, without running it
again), taking a todo from the agent holding it, and rerunning or canceling many todos a
person confirmed at once (``act_on_confirmed``). Scarab's in-place retry and rerun; see
docs/decisions/0056-rounds.md. The actor is a person: an agent is refused (Forbidden)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import DatabaseError

from switchboard.queues import audit, db, sql, tracing
from switchboard.queues.arguments import todo_id as checked_todo_id
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, Forbidden, Invalid, NotFound
from switchboard.queues.models import ClaimerKind, EventKind, TodoState
from switchboard.queues.records import Claim, TodoRecord
from switchboard.queues.transitions._common import (
    Actor,
    attempts_for_check,
    default_lease,
    event,
    lease_seconds,
    lock,
    optional_seq,
    read_todo,
    transition,
)
from switchboard.queues.transitions.close import end
from switchboard.queues.transitions.decide import Close, decide


def _person(actor: Actor) -> Actor:
    if actor.is_agent:
        raise Forbidden("Only a person does this, from the Board.")
    return actor


@transition
def retry_now(actor: Actor, todo_id: int) -> Plan[TodoRecord]:
    """A waiting retry (retry_wait) goes to pending at once: same round, counters kept."""
    return (
        yield from _requeue(
            actor,
            todo_id,
            sql.RETRY_NOW,
            EventKind.RETRY_NOW,
            from_states=(TodoState.RETRY_WAIT,),
            message="Only a todo waiting to retry can be retried now.",
        )
    )


@transition
def rerun(actor: Actor, todo_id: int) -> Plan[TodoRecord]:
    """A finished todo (dead, done or canceled) runs again in a new round: pending, round+1,
    attempt and failures reset, the result of record cleared (each attempt keeps its own)."""
    return (
        yield from _requeue(
            actor,
            todo_id,
            sql.RERUN,
            EventKind.RERUN,
            from_states=(TodoState.DEAD, TodoState.DONE, TodoState.CANCELED),
            message="Only a done, dead or canceled todo can be rerun.",
        )
    )


@transition
def cancel_dead_letter(actor: Actor, todo_id: int) -> Plan[TodoRecord]:
    """A dead letter a person decided not to run again: canceled, its round and counters as
    they were. The audit row (``cancel``) keeps the dead-letter reason it had."""
    return (
        yield from _requeue(
            actor,
            todo_id,
            sql.CANCEL_DEAD_LETTER,
            EventKind.CANCEL,
            from_states=(TodoState.DEAD,),
            message="Only a dead letter can be set aside this way.",
            rings=False,
            keeps_reason=True,
        )
    )


def _requeue(actor, todo_id, statement, kind, *, from_states, message, **how) -> Plan[TodoRecord]:
    actor = _person(actor)
    todo_id = checked_todo_id(todo_id)
    return (
        yield Atomic(_requeue_locked(actor, todo_id, statement, kind, from_states, message, **how))
    )


def _requeue_locked(
    actor, todo_id, statement, kind, from_states, message, *, rings=True, keeps_reason=False
) -> Plan[TodoRecord]:
    locked = yield from lock(actor, todo_id)
    if locked.state not in from_states:
        raise Conflict(message)
    reasons = None
    if keeps_reason:  # the statement clears it: the audit row keeps it
        before = yield from read_todo(todo_id)
        reasons = {todo_id: before.dead_letter_reason}
    moved = yield from _requeue_seen(
        actor, statement, kind, [(todo_id, locked.state)], rings=rings, reasons=reasons
    )
    if not moved:
        raise Conflict("That todo moved on; read it again.")
    return (yield from read_todo(todo_id))


def _requeue_seen(
    actor: Actor,
    statement,
    kind: EventKind,
    seen: list[tuple[int, str]],
    *,
    rings: bool,
    reasons: dict[int, str] | None = None,
) -> Plan[set[int]]:
    if not seen:
        return set()
    rows = yield Fetch(
        statement,
        {"todo_ids": [todo_id for todo_id, _ in seen], "from_states": [s for _, s in seen]},
    )
    endpoints = dict(rows)
    acted = [(todo_id, state) for todo_id, state in seen if todo_id in endpoints]
    details = []
    for todo_id, state in acted:
        detail = {"from_state": state}
        if reasons is not None:
            detail["dead_letter_reason"] = reasons.get(todo_id, "")
        details.append(detail)
    yield from audit.record_for_todos(
        kind, user=actor.user, todo_ids=[todo_id for todo_id, _ in acted], details=details
    )
    if rings and endpoints:
        yield Fetch(sql.RING_DOORBELLS, {"endpoint_ids": sorted(set(endpoints.values()))})
    return set(endpoints)


@transition
def take_over(actor: Actor, todo_id: int, *, attempt_seq: int | None = None) -> Plan[Claim]:
    """A person takes a todo from the agent holding it: in one transaction (one statement
    under the row lock, queues/sql/by_hand.py TAKE_OVER) the agent's open attempt ends taken
    over (``Close.take_over()``), ended by the person (its fence passed), and the person's
    ``owner`` attempt opens. The todo is claimed throughout, so no other claimer
    ever sees it claimable; the agent's next heartbeat, complete or fail is a conflict.
    ``attempt_seq``, when given, is the attempt the person saw: a later one is not taken.
    Audited (``take_over``)."""
    actor = _person(actor)
    todo_id = checked_todo_id(todo_id)
    attempt_seq = optional_seq(attempt_seq)
    return (yield Atomic(_take_over_locked(actor, todo_id, attempt_seq)))


def _take_over_locked(actor: Actor, todo_id: int, attempt_seq: int | None) -> Plan[Claim]:
    locked = yield from lock(actor, todo_id)
    check = yield from attempts_for_check(todo_id, None)
    held = check.open
    if locked.state != TodoState.CLAIMED or held is None:
        raise Conflict(f"Nobody holds that todo now (it is {locked.state}); claim it instead.")
    if attempt_seq is not None and attempt_seq != held.seq:
        raise Conflict("The try you saw has ended; another holds the todo now.")
    if held.claimer_kind != ClaimerKind.ENDPOINT:
        raise Conflict("A person holds that todo, not an agent; only an agent's lease is taken.")
    taken = Close.take_over()
    decision = decide(taken, None)
    [(ended_seq, opened_seq)] = yield Fetch(
        sql.TAKE_OVER,
        {
            "outcome": taken.kind.outcome,
            "disposition": decision.disposition,
            "todo_id": todo_id,
            "from_seq": held.seq,
            "user_id": actor.user.pk,
            "owner": actor.lease_label,
            "lease_seconds": lease_seconds(None, default_lease(actor)),
            "trace_id": tracing.trace_id(),
        },
    )
    if opened_seq is None:  # impossible under the row lock; guard anyway
        raise Conflict("That todo moved on; read it again.")
    todo = yield from read_todo(todo_id)
    yield from event(
        EventKind.TAKE_OVER,
        todo_id,
        team_id=locked.team_id,
        actor=actor,
        # An agent claims only its own queue's todos: the holder was the todo's endpoint.
        detail={
            "attempt_seq": opened_seq,
            "from_attempt_seq": ended_seq,
            "from_endpoint": todo.endpoint,
        },
    )
    return Claim(todo=todo, attempt_seq=opened_seq)


# ---------------------------------------------------------------------------------------
# Many todos a person confirmed at once (the Board's bulk rerun and cancel, board/triage.py)
#
# The person saw a confirmation that named each todo with the stamp it had then
# (``seen_stamp``: state, last attempt, round). The todos are worked in chunks of CHUNK, each
# one transaction that first locks the chunk's rows (LOCK_TODOS_FOR_BULK, in id order, scoped
# by the person's teams) and then acts: a todo whose stamp differs moved on in between and is
# skipped and counted, never forced. The reruns of a chunk (and its dead letters set aside)
# are one statement for all of them, the very statement a single rerun runs, each guarded by
# the state the lock read and audited on its own row; any other cancel is a single cancel's
# own close (``close.end``), in a savepoint. A todo outside the person's teams reads as
# missing, exactly like an unknown id.

# Todos per transaction: their row locks are held while the chunk runs (well under a second).
CHUNK = 100
# What each bulk action acts on.
BULK_STATES = {
    "rerun": (TodoState.DONE, TodoState.DEAD, TodoState.CANCELED),
    "cancel": (TodoState.PENDING, TodoState.CLAIMED, TodoState.RETRY_WAIT, TodoState.DEAD),
}
BULK_TAKES = {
    "rerun": "Rerun takes done, dead and canceled todos",
    "cancel": "Cancel takes pending, claimed, retry-wait and dead todos",
}


def seen_stamp(state: str, last_attempt_seq: int, round_no: int) -> str:
    """What a person saw of a todo, to be acted on only if it still is so."""
    return f"{state}.{last_attempt_seq}.{round_no}"


@dataclass(frozen=True, slots=True)
class Acted:
    todo_id: int
    kind: str  # "done", "moved" (moved on since the confirmation), "refused", "missing"
    state: str | None = None  # the todo's state now (None for a missing or acted one)
    why: str = ""


def act_on_confirmed(actor: Actor, action: str, items: list[tuple[int, str]]) -> list[Acted]:
    """Rerun or cancel (``action``) each confirmed (id, seen stamp), chunk by chunk (see
    above). Returns what happened to each, in the order given."""
    actor = _person(actor)
    if action not in BULK_STATES:
        raise Invalid(f"No such bulk action: {action!r}.")
    acted: list[Acted] = []
    for start in range(0, len(items), CHUNK):
        chunk = items[start : start + CHUNK]
        try:
            acted += db.run(_chunk(actor, action, chunk))
        except DatabaseError as exc:
            # The chunk's transaction rolled back whole (a deadlock, a lost connection):
            # nothing of it was written, and each todo says so.
            why = f"not changed: the database refused this batch ({type(exc).__name__}); try again"
            acted += [Acted(todo_id, "refused", None, why) for todo_id, _ in chunk]
    return acted


def _chunk(actor: Actor, action: str, chunk: list[tuple[int, str]]) -> Plan[list[Acted]]:
    return (yield Atomic(_chunk_locked(actor, action, chunk)))


def _chunk_locked(actor: Actor, action: str, chunk: list[tuple[int, str]]) -> Plan[list[Acted]]:
    rows = yield Fetch(
        sql.LOCK_TODOS_FOR_BULK,
        {"todo_ids": [todo_id for todo_id, _ in chunk], "scope_user": actor.user.pk},
    )
    now = {row[0]: row for row in rows}
    acted: dict[int, Acted] = {}
    together: list[tuple[int, str, str]] = []  # rerun, or a dead letter set aside: one statement
    one_by_one: list[tuple[int, str, int]] = []  # any other cancel: its own transition
    for todo_id, seen in chunk:
        row = now.get(todo_id)
        if row is None:  # unknown, or not in the person's teams: the same answer
            acted[todo_id] = Acted(todo_id, "missing")
            continue
        _, state, last_seq, round_no, reason = row
        if seen_stamp(state, last_seq, round_no) != seen:
            acted[todo_id] = Acted(todo_id, "moved", state, "moved on since you confirmed")
        elif state not in BULK_STATES[action]:
            acted[todo_id] = Acted(todo_id, "refused", state, BULK_TAKES[action])
        elif action == "rerun" or state == TodoState.DEAD:
            together.append((todo_id, state, reason))
        else:
            one_by_one.append((todo_id, state, last_seq))
    if together:
        seen_states = [(todo_id, state) for todo_id, state, _ in together]
        if action == "rerun":
            moved = yield from _requeue_seen(
                actor, sql.RERUN, EventKind.RERUN, seen_states, rings=True
            )
        else:
            moved = yield from _requeue_seen(
                actor,
                sql.CANCEL_DEAD_LETTER,
                EventKind.CANCEL,
                seen_states,
                rings=False,
                reasons={todo_id: reason for todo_id, _, reason in together},
            )
        for todo_id, state, _ in together:
            acted[todo_id] = (
                Acted(todo_id, "done")
                if todo_id in moved
                else Acted(todo_id, "moved", state, "moved on since you confirmed")
            )
    for todo_id, state, last_seq in one_by_one:
        open_seq = last_seq if state == TodoState.CLAIMED else None
        try:
            yield from end(actor, Close.cancel(), todo_id, attempt_seq=open_seq)
        except (Conflict, Invalid) as exc:
            acted[todo_id] = Acted(todo_id, "refused", state, str(exc))
        except NotFound:
            acted[todo_id] = Acted(todo_id, "missing")
        else:
            acted[todo_id] = Acted(todo_id, "done")
    return [acted[todo_id] for todo_id, _ in chunk]
