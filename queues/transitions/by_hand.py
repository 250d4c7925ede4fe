"""What only a person does, from the Board: retry now (a waiting retry, same round), rerun
(a finished todo, a new round) and setting a dead letter aside (canceled, without running it
again). Scarab's in-place retry and rerun; see docs/decisions/0056-rounds.md."""

from __future__ import annotations

from queues import audit, db, sql
from queues.arguments import todo_id as checked_todo_id
from queues.db import Atomic, Fetch, Plan
from queues.errors import Conflict
from queues.models import ClaimerKind, EventKind, TodoState
from queues.records import Claim, TodoRecord
from queues.transitions._common import (
    Actor,
    attempts_for_check,
    default_lease,
    event,
    lease_seconds,
    lock,
    optional_seq,
    read_todo,
)


def retry_now_plan(user, todo_id: int) -> Plan[TodoRecord]:
    """A waiting retry (retry_wait) goes to pending at once: same round, counters kept."""
    return (
        yield from _requeue(
            user,
            todo_id,
            sql.RETRY_NOW,
            EventKind.RETRY_NOW,
            from_states=(TodoState.RETRY_WAIT,),
            message="Only a todo waiting to retry can be retried now.",
        )
    )


def rerun_plan(user, todo_id: int) -> Plan[TodoRecord]:
    """A finished todo (dead, done or canceled) runs again in a new round: pending, round+1,
    attempt and failures reset, the result of record cleared (each attempt keeps its own)."""
    return (
        yield from _requeue(
            user,
            todo_id,
            sql.RERUN,
            EventKind.RERUN,
            from_states=(TodoState.DEAD, TodoState.DONE, TodoState.CANCELED),
            message="Only a done, dead or canceled todo can be rerun.",
        )
    )


def cancel_dead_letter_plan(user, todo_id: int) -> Plan[TodoRecord]:
    """A dead letter a person decided not to run again: canceled, its round and counters as
    they were. The audit row (``cancel``) keeps the dead-letter reason it had."""
    return (
        yield from _requeue(
            user,
            todo_id,
            sql.CANCEL_DEAD_LETTER,
            EventKind.CANCEL,
            from_states=(TodoState.DEAD,),
            message="Only a dead letter can be set aside this way.",
            rings=False,
            keeps_reason=True,
        )
    )


def retry_now(user, todo_id: int) -> TodoRecord:
    return db.run(retry_now_plan(user, todo_id))


def rerun(user, todo_id: int) -> TodoRecord:
    return db.run(rerun_plan(user, todo_id))


def cancel_dead_letter(user, todo_id: int) -> TodoRecord:
    return db.run(cancel_dead_letter_plan(user, todo_id))


def _requeue(user, todo_id, statement, kind, *, from_states, message, **how) -> Plan[TodoRecord]:
    todo_id = checked_todo_id(todo_id)
    return (
        yield Atomic(_requeue_locked(user, todo_id, statement, kind, from_states, message, **how))
    )


def _requeue_locked(
    user, todo_id, statement, kind, from_states, message, *, rings=True, keeps_reason=False
) -> Plan[TodoRecord]:
    locked = yield from lock(Actor.human(user), todo_id)
    if locked.state not in from_states:
        raise Conflict(message)
    reasons = None
    if keeps_reason:  # the statement clears it: the audit row keeps it
        before = yield from read_todo(todo_id)
        reasons = {todo_id: before.dead_letter_reason}
    moved = yield from _requeue_seen(
        user, statement, kind, [(todo_id, locked.state)], rings=rings, reasons=reasons
    )
    if not moved:
        raise Conflict("That todo moved on; read it again.")
    return (yield from read_todo(todo_id))


# ---------------------------------------------------------------------------------------
# Many todos at once (the Board's bulk rerun and cancel, board/triage.py): the same
# statements as for one todo, given every todo of a chunk, inside the caller's transaction
# and under the row locks it took (queues/sql/by_hand.py LOCK_TODOS_FOR_BULK). Each todo is
# guarded by the state the caller saw, gets its own audit row with the person as actor, and
# its endpoint's doorbell rings once. Returns the ids that moved; one the statement did not
# move (impossible under the caller's lock) is not audited.


def rerun_seen_plan(user, seen: list[tuple[int, str]]) -> Plan[set[int]]:
    """Rerun each (todo id, state seen under the lock): a done, dead or canceled todo."""
    return (yield from _requeue_seen(user, sql.RERUN, EventKind.RERUN, seen, rings=True))


def cancel_dead_letters_seen_plan(user, seen: list[tuple[int, str, str]]) -> Plan[set[int]]:
    """Set each dead letter (todo id, state, dead-letter reason seen under the lock) aside:
    canceled, its reason kept in its audit row."""
    return (
        yield from _requeue_seen(
            user,
            sql.CANCEL_DEAD_LETTER,
            EventKind.CANCEL,
            [(todo_id, state) for todo_id, state, _ in seen],
            rings=False,
            reasons={todo_id: reason for todo_id, _, reason in seen},
        )
    )


def _requeue_seen(
    user,
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
        kind, user=user, todo_ids=[todo_id for todo_id, _ in acted], details=details
    )
    if rings and endpoints:
        yield Fetch(sql.RING_DOORBELLS, {"endpoint_ids": sorted(set(endpoints.values()))})
    return set(endpoints)


def take_over_plan(user, todo_id: int, *, attempt_seq: int | None = None) -> Plan[Claim]:
    """A person takes a todo from the agent holding it: in one transaction (one statement
    under the row lock, queues/sql/by_hand.py TAKE_OVER) the agent's open attempt ends as
    released, ended by the person (its fence passed, like "release their lease"), and the
    person's ``owner`` attempt opens. The todo is claimed throughout, so no other claimer
    ever sees it claimable; the agent's next heartbeat, complete or fail is a conflict.
    ``attempt_seq``, when given, is the attempt the person saw: a later one is not taken.
    Audited (``take_over``)."""
    todo_id = checked_todo_id(todo_id)
    attempt_seq = optional_seq(attempt_seq)
    return (yield Atomic(_take_over_locked(user, todo_id, attempt_seq)))


def take_over(user, todo_id: int, **arguments) -> Claim:
    return db.run(take_over_plan(user, todo_id, **arguments))


def _take_over_locked(user, todo_id: int, attempt_seq: int | None) -> Plan[Claim]:
    actor = Actor.human(user)
    locked = yield from lock(actor, todo_id)
    check = yield from attempts_for_check(todo_id, None)
    held = check.open
    if locked.state != TodoState.CLAIMED or held is None:
        raise Conflict(f"Nobody holds that todo now (it is {locked.state}); claim it instead.")
    if attempt_seq is not None and attempt_seq != held.seq:
        raise Conflict("The try you saw has ended; another holds the todo now.")
    if held.claimer_kind != ClaimerKind.ENDPOINT:
        raise Conflict("A person holds that todo, not an agent; only an agent's lease is taken.")
    [(ended_seq, opened_seq)] = yield Fetch(
        sql.TAKE_OVER,
        {
            "todo_id": todo_id,
            "from_seq": held.seq,
            "user_id": user.pk,
            "owner": actor.lease_label,
            "lease_seconds": lease_seconds(None, default_lease(actor)),
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
