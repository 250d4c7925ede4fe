"""Every raw SQL statement of the ledger, named, each with a line on why the ORM could not say
it (procrastinate's ``-- name --`` queries are the model). One module per family:

- ``create``: a new todo, and finding one by its sender's idempotency key;
- ``claim``: claim_next and claim (pick, take over a lapsed lease, prune, open, read back);
- ``close``: complete, fail, release, cancel, reap, revoke (one statement each), heartbeat,
  and the locked read behind every slow path;
- ``by_hand``: a person's retry now and rerun, cancel of an unclaimed todo or a dead letter,
  the lock of a bulk rerun or cancel;
- ``revoke``: an endpoint's revocation and the todos it kills;
- ``reads``: the todo and attempt reads of get_todo, list_todos and the Board's drawer;
- ``activity``: the Activity feed's endings and events (the Activity page, every ticker);
- ``accounts``: endpoint tokens, admission, the sign-in throttle;
- ``events``: the audit trail's writer and the doorbell's ring;
- ``health``: the endpoint page's queue now and its last hour and day of endings;
- ``sweep``: the sweeper's batches, retention, its status row, the outbox's pruning;
- ``counters``: the metrics fold and counter upserts;
- ``board``: the drawer's snapshot (a SET, which PREPARE cannot take: not in ``statements()``),
  a search's and a page's statement timeouts.

Statements are parameterised (never formatted with input); the fragments formatted in here,
once, at import, are fixed strings of this package. Row layouts come from the records'
sources (queues.records ``TODO_SOURCE``, ``ATTEMPT_SOURCE``), so a width is never kept by hand.
tests/queues/test_sql.py prepares every statement here against the real schema and checks the
hot ones' plans; each is also exercised by the transitions and reads that use it.

All lease arithmetic uses the database clock: ``statement_timestamp()``, the same clock as
Django's ``Now()`` (the models' ``db_default``), so a row written by the ORM and a lease
computed here compare on one timeline even inside a long transaction.
"""

from __future__ import annotations

from queues.db import Statement
from queues.records import ATTEMPT_SOURCE, TODO_SOURCE

__all__ = ["Statement", "statements"]


def todo_columns(alias: str) -> str:
    return ", ".join(expr.format(t=alias) for expr in TODO_SOURCE.values())


def attempt_columns(alias: str, **instead: str) -> str:
    """The attempt record's columns from ``alias`` (and attempt_joins' names), or for each
    field in ``instead`` that expression."""
    return ", ".join(
        instead.get(name, expr).format(a=alias) for name, expr in ATTEMPT_SOURCE.items()
    )


def claimable_at(alias: str) -> str:
    """When a live todo is (or becomes) claimable: queues.models CLAIMABLE_AT, the expression
    of the todos_claimable and todos_sweep_due indexes, written as Django writes it in their
    CREATE INDEX so that the planner matches it to them (tests/queues/test_sql.py holds the
    two equal, and the plans to those indexes)."""
    t = alias
    return (
        f"(CASE WHEN {t}.state = 'claimed' THEN {t}.lease_expires_at"
        f" WHEN {t}.state = 'retry_wait' THEN {t}.next_retry_at"
        f" WHEN {t}.state = 'pending' THEN COALESCE({t}.not_before, {t}.created_at)"
        " ELSE NULL END)"
    )


def todo_joins(alias: str) -> str:
    return f"""
    JOIN endpoints e ON e.id = {alias}.endpoint_id
    LEFT JOIN endpoints rq ON rq.id = {alias}.requester_id"""


def attempt_joins(alias: str) -> str:
    return f"""
    LEFT JOIN endpoints ae ON ae.id = {alias}.endpoint_id
    LEFT JOIN auth_user au ON au.id = {alias}.user_id
    LEFT JOIN auth_user eb ON eb.id = {alias}.ended_by_id"""


# Scopes: which todos a caller may touch. An agent reads its own endpoint's queue; a person
# reads the queues of endpoints in the teams they belong to.
SCOPE_ENDPOINT = "t.endpoint_id = %(scope_endpoint)s"
SCOPE_USER = """t.endpoint_id IN (
    SELECT se.id FROM endpoints se JOIN team_members sm ON sm.team_id = se.team_id
    WHERE sm.user_id = %(scope_user)s)"""


def statements() -> list[Statement]:
    """Every statement of the package (for the test that prepares each one)."""
    from queues.sql import (
        accounts,
        activity,
        by_hand,
        claim,
        close,
        counters,
        create,
        events,
        health,
        reads,
        revoke,
        sweep,
    )

    found = {}
    modules = (
        accounts,
        activity,
        by_hand,
        claim,
        close,
        counters,
        create,
        events,
        health,
        reads,
        revoke,
        sweep,
    )
    for module in modules:
        for value in vars(module).values():
            if isinstance(value, Statement):
                found[value.name] = value
    return list(found.values())


from queues.sql.accounts import *  # noqa: E402,F403
from queues.sql.activity import *  # noqa: E402,F403
from queues.sql.board import *  # noqa: E402,F403
from queues.sql.by_hand import *  # noqa: E402,F403
from queues.sql.claim import *  # noqa: E402,F403
from queues.sql.close import *  # noqa: E402,F403
from queues.sql.counters import *  # noqa: E402,F403
from queues.sql.create import *  # noqa: E402,F403
from queues.sql.events import *  # noqa: E402,F403
from queues.sql.health import *  # noqa: E402,F403
from queues.sql.reads import *  # noqa: E402,F403
from queues.sql.revoke import *  # noqa: E402,F403
from queues.sql.sweep import *  # noqa: E402,F403
