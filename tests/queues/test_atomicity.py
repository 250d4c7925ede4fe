"""A transition is one transaction: a failure injected after the todo's update (when the
attempt row is written) leaves neither the todo nor the attempt changed.

The failure is real, not mocked: a trigger on todo_attempts raises inside PostgreSQL, after
the todo UPDATE in the same statement/transaction has already run.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease


@pytest.fixture
def attempt_writes_fail(db):
    def arm(operation: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE OR REPLACE FUNCTION sb_test_boom() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER sb_test_boom BEFORE {operation} ON todo_attempts"
                " FOR EACH ROW EXECUTE FUNCTION sb_test_boom()"
            )

    yield arm
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER IF EXISTS sb_test_boom ON todo_attempts")


def state(todo_id: int) -> tuple:
    todo = Todo.objects.filter(pk=todo_id).values().get()
    attempts = list(TodoAttempt.objects.filter(todo_id=todo_id).order_by("seq").values())
    return todo, attempts


def test_claim_that_cannot_open_its_attempt_leaves_the_todo_pending(
    endpoint, make_todo, attempt_writes_fail
):
    todo = make_todo()
    before = state(todo.id)
    attempt_writes_fail("INSERT")

    with pytest.raises(DatabaseError, match="injected failure"):
        transitions.claim_next(Actor.agent(endpoint))

    assert state(todo.id) == before and before[0]["state"] == "pending"


def test_complete_that_cannot_close_its_attempt_leaves_both_unchanged(
    endpoint, agent, make_todo, attempt_writes_fail
):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    before = state(todo.id)
    attempt_writes_fail("UPDATE")

    with pytest.raises(DatabaseError, match="injected failure"):
        transitions.complete(agent, todo.id, result={"x": 1}, summary="done")

    assert state(todo.id) == before and before[0]["state"] == "claimed"


def test_fenced_fail_on_the_locked_path_is_atomic_too(
    endpoint, agent, make_todo, attempt_writes_fail
):
    todo = make_todo()
    claim = transitions.claim_next(Actor.agent(endpoint), require_fence=True)
    before = state(todo.id)
    attempt_writes_fail("UPDATE")

    with pytest.raises(DatabaseError, match="injected failure"):
        transitions.fail(agent, todo.id, lease_token=claim.lease_token)

    assert state(todo.id) == before


@pytest.mark.parametrize(
    "close_lapsed",
    [
        pytest.param(lambda endpoint: transitions.claim_next(Actor.agent(endpoint)), id="takeover"),
        pytest.param(lambda endpoint: transitions.reap_lapsed(), id="reap"),
    ],
)
def test_closing_a_lapsed_attempt_that_cannot_be_written_changes_nothing(
    close_lapsed, endpoint, make_todo, attempt_writes_fail
):
    """A claim that takes over a lapsed lease, and the sweeper's reap, both close the lapsed
    attempt in the statement that moves the todo."""
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)
    before = state(todo.id)
    attempt_writes_fail("UPDATE")

    with pytest.raises(DatabaseError, match="injected failure"):
        close_lapsed(endpoint)

    assert state(todo.id) == before
