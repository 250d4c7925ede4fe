"""The sweeper's transitions. No caller scope: they move no row between tenants and read
nothing out (docs/decisions/0039-attempt-history.md: "Background sweeps are exempt from caller
scoping")."""

from __future__ import annotations

from switchboard.queues import db, sql
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.records import Budget, Closed, split_row
from switchboard.queues.transitions._common import ring
from switchboard.queues.transitions.decide import Close, decide


def reap_lapsed(*, batch: int = 100) -> list[Closed]:
    """Close a batch of lapsed leases as reaped: pending below the cap, dead at it."""
    return db.run(_atomic(_reap(batch)))


def requeue_due_retries(*, batch: int = 500) -> int:
    """Move due retry_wait todos to pending and ring their endpoints' doorbells. (A claim
    does not wait for this: a due retry_wait todo is already claimable.)"""
    return db.run(_atomic(_requeue(batch)))


def _atomic(plan: Plan) -> Plan:
    return (yield Atomic(plan))


def _reap(batch: int) -> Plan[list[Closed]]:
    """Lock a batch of lapsed leases, decide each (pending below the cap, dead at it), and
    close them: one statement for each decision."""
    close = Close.reap()
    by_decision: dict[tuple, list[int]] = {}
    decisions = {}
    for todo_id, failures, max_attempts in (yield Fetch(sql.LAPSED_LEASES, {"batch": batch})):
        decision = decide(close, Budget(failures=failures, max_attempts=max_attempts))
        key = (decision.state, decision.dead_letter_reason)
        decisions[key] = decision
        by_decision.setdefault(key, []).append(todo_id)
    reaped = []
    for key, todo_ids in by_decision.items():
        params = {
            **close.written(),
            **decisions[key].params(),
            "failures_seen": None,  # each row is locked by this transaction
            "todo_ids": todo_ids,
            "ended_by": None,
            "ended_by_endpoint": None,
        }
        reaped += [Closed(*split_row(row)) for row in (yield Fetch(sql.CLOSE_MANY, params))]
    requeued = {c.todo.endpoint_id for c in reaped if c.todo.state == "pending"}
    for endpoint_id in sorted(requeued):
        yield from ring(endpoint_id)
    # A lease dead-lettered at its cap frees a claim too: a long-poll held back by the
    # endpoint's max_claimed may be waiting for one (a freed key rings in the trigger).
    for endpoint_id in sorted({c.todo.endpoint_id for c in reaped} - requeued):
        yield Fetch(sql.RING_IF_WAITING, {"endpoint_id": endpoint_id})
    return reaped


def _requeue(batch: int) -> Plan[int]:
    rows = yield Fetch(sql.REQUEUE_DUE_RETRIES, {"batch": batch})
    for endpoint_id in sorted({endpoint_id for _, endpoint_id in rows}):
        yield from ring(endpoint_id)
    return len(rows)
