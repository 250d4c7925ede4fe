"""The fragments the statements of this package share: row layouts from the records'
sources (queues.records ``TODO_SOURCE``, ``ATTEMPT_SOURCE``, so a width is never kept by
hand), the joins that name a todo's and an attempt's endpoints and people, the claimable
time, a state test for a todo found by its id, and the two caller scopes. Formatted into
the statements once, at import; never with input."""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.queues.db.plans import Statement
from switchboard.queues.models import (
    LIVE_STATES,
    OPEN_STATES,
    TERMINAL_STATES,
    UNCLAIMED_STATES,
    TodoState,
)
from switchboard.queues.records import ATTEMPT_SOURCE, TODO_SOURCE


def todo_columns(alias: str, **instead: str) -> str:
    """The todo record's columns from ``alias`` (and todo_joins' names), or for each field in
    ``instead`` that expression."""
    return ", ".join(instead.get(name, expr).format(t=alias) for name, expr in TODO_SOURCE.items())


# A statement whose todo is never waiting (a claim's, a new todo's), or that re-reads it when
# it is (a close that asks: queues/transitions/ask.py), leaves the question's subquery out of
# its plan.
NO_QUESTION = {"question": "NULL"}


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


# Scopes: which todos a caller may touch. An agent reads its own endpoint's queue, and
# (get_todo, cancel) a todo it sent elsewhere as its requester; a person reads the queues of
# endpoints in the teams they belong to.
SCOPE_ENDPOINT = "t.endpoint_id = %(scope_endpoint)s"
SCOPE_ENDPOINT_OR_REQUESTER = SCOPE_ENDPOINT + " OR t.requester_id = %(scope_endpoint)s"
SCOPE_USER = """t.endpoint_id IN (
    SELECT se.id FROM endpoints se JOIN team_members sm ON sm.team_id = se.team_id
    WHERE sm.user_id = %(scope_user)s)"""


@dataclass(frozen=True, slots=True)
class Scoped:
    """One statement in either caller's scope: ``agent``'s and ``user``'s texts differ only
    where ``{scope}`` stands (queues.transitions picks one by the actor: ``_common.in_scope``)."""

    agent: Statement
    user: Statement


def scoped(
    name: str, text: str, *, why: str, agent: str = SCOPE_ENDPOINT, prepare: bool = False
) -> Scoped:
    """``text`` in an agent's scope (``agent``: by default its own endpoint's queue), named
    ``{name}_agent``, and in a person's (their teams' queues), ``{name}_user``."""
    return Scoped(
        agent=Statement(f"{name}_agent", text.format(scope=agent), why=why, prepare=prepare),
        user=Statement(f"{name}_user", text.format(scope=SCOPE_USER), why=why, prepare=prepare),
    )


def has_state(alias: str, state: TodoState) -> str:
    """The todo ``alias``, found by its id, is in ``state``: the test written so no index
    takes it (``(… = …) IS TRUE``; a todo's state is never NULL). Written plainly, it offers
    the planner todos_sweep_due's range of that state, and statistics taken while no todo
    was in it (an idle queue before a burst of claims) make that range look like one row:
    then each close and heartbeat walked every claimed todo to find its own (956 buffers a
    close with 2,000 claimed; tests/queues/test_sql.py holds the plans to the id)."""
    return f"({alias}.state = '{TodoState(state).value}') IS TRUE"


def states(members) -> str:
    """A state list for SQL, from the enum's members (never written out by hand)."""
    return "(" + ", ".join(f"'{TodoState(member).value}'" for member in members) + ")"


LIVE = states(LIVE_STATES)
OPEN = states(OPEN_STATES)
TERMINAL = states(TERMINAL_STATES)
UNCLAIMED = states(UNCLAIMED_STATES)
