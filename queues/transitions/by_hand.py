"""What only a person does, from the Board: retry now (a waiting retry, same round), rerun
(a finished todo, a new round) and setting a dead letter aside (canceled, without running it
again). Scarab's in-place retry and rerun; see docs/decisions/0056-rounds.md."""

from __future__ import annotations

from queues import db, sql
from queues.arguments import todo_id as checked_todo_id
from queues.db import Atomic, Fetch, Plan
from queues.errors import Conflict
from queues.models import EventKind, TodoState
from queues.records import TodoRecord
from queues.transitions._common import Actor, event, lock, read_todo, ring


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
    actor = Actor.human(user)
    locked = yield from lock(actor, todo_id)
    if locked.state not in from_states:
        raise Conflict(message)
    detail = {"from_state": locked.state}
    if keeps_reason:  # the statement clears it: the audit row keeps it
        before = yield from read_todo(todo_id)
        detail["dead_letter_reason"] = before.dead_letter_reason
    moved = yield Fetch(statement, {"todo_id": todo_id, "from_state": locked.state})
    if not moved:
        raise Conflict("That todo moved on; read it again.")
    yield from event(kind, todo_id, team_id=locked.team_id, actor=actor, detail=detail)
    if rings:
        yield from ring(locked.endpoint_id)
    return (yield from read_todo(todo_id))
