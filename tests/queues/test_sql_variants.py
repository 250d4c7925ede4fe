"""The bench's reference for ADR-0039's bar (bench/nohist.py): the product's claim, heartbeat
and close statements rebuilt by their builders without attempt history. The default builders
must make exactly the product's statements, and the variants must be valid SQL that moves the
todo and leaves the attempts alone."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from bench import nohist, writeonce
from queues import db, sql, transitions
from queues.models import TodoAttempt, TodoState
from queues.sql import claim, close, fragments
from queues.transitions import Actor


def test_the_default_builders_make_exactly_the_product_statements():
    held = "t.id = %(todo_id)s AND " + fragments.SCOPE_ENDPOINT
    agent = {"attempt_filter": close._HELD_BY_AGENT}
    why = sql.CLAIM_NEXT.why
    assert (
        claim._claim("claim_next", fragments.SCOPE_ENDPOINT, "SKIP LOCKED", why) == sql.CLAIM_NEXT
    )
    assert close._close(
        sql.CLOSE_HELD_BY_AGENT.name, held, sql.CLOSE_HELD_BY_AGENT.why, holder_names=True, **agent
    ) == (sql.CLOSE_HELD_BY_AGENT)
    assert close._heartbeat(
        sql.HEARTBEAT_HELD_BY_AGENT.name, held, sql.HEARTBEAT_HELD_BY_AGENT.why, **agent
    ) == (sql.HEARTBEAT_HELD_BY_AGENT)
    assert set(nohist.statements()) == {
        "claim_next",
        "heartbeat_held_by_agent",
        "close_held_by_agent",
    }


def test_the_variants_touch_no_attempt():
    for statement in nohist.statements().values():
        assert "todo_attempts" not in statement.text, statement.name


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["claim_next", "heartbeat_held_by_agent", "close_held_by_agent"])
def test_each_variant_prepares_against_the_schema(name):
    numbers: dict[str, int] = {}

    def placeholder(match: re.Match) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    text = re.sub(r"%\((\w+)\)s", placeholder, nohist.statements()[name].text)
    with connection.cursor() as cursor:
        cursor.execute(f"PREPARE switchboard_check AS {text.replace('%%', '%')}")
        cursor.execute("DEALLOCATE switchboard_check")


@pytest.mark.django_db
def test_the_product_plans_with_the_variants_move_the_todo_and_write_no_attempt(agent, make_todo):
    todo = make_todo()
    twins = nohist.statements()

    claimed = db.run(
        nohist.swapped(transitions.claim_next_plan(Actor.agent(agent.endpoint)), twins)
    )
    assert claimed.todo.id == todo.id and claimed.todo.state == TodoState.CLAIMED
    assert claimed.prior_attempts == []
    lease = db.run(nohist.swapped(transitions.heartbeat_plan(agent, todo.id, attempt_seq=1), twins))
    assert lease.lease_expires_at is not None
    closed = db.run(
        nohist.swapped(
            transitions.complete_plan(agent, todo.id, attempt_seq=1, result={"ok": 1}), twins
        )
    )
    assert closed.todo.state == TodoState.DONE and closed.attempt is None
    assert closed.todo.result == {"ok": 1}
    assert not TodoAttempt.objects.filter(todo_id=todo.id).exists()


# bench/writeonce.py: the attempt row written once, at close, for the bar's what-it-would-cost.


def _writeonce_loop(agent, todo_id, twins, *, claimant=""):
    plan = transitions.claim_next_plan(Actor.agent(agent.endpoint), claimant=claimant)
    claimed = db.run(nohist.swapped(plan, twins) if twins else plan)
    assert claimed.todo.id == todo_id
    for plan in (
        transitions.heartbeat_plan(agent, todo_id, attempt_seq=1),
        transitions.complete_plan(
            agent, todo_id, attempt_seq=1, summary="rebuilt", result={"ok": 1}
        ),
    ):
        done = db.run(nohist.swapped(plan, twins) if twins else plan)
    return done


@pytest.mark.django_db
def test_the_write_once_twins_leave_the_attempt_row_the_product_leaves(agent, make_todo):
    with connection.cursor() as cursor:
        writeonce.add_lease_columns(cursor)  # rolled back with the test's transaction
    twins = writeonce.statements(nohist.statements())
    assert set(twins) == set(nohist.statements())
    ours = make_todo("ours")
    ours_closed = _writeonce_loop(agent, ours.id, None, claimant="worker-7")
    once = make_todo("once")
    once_closed = _writeonce_loop(agent, once.id, twins, claimant="worker-7")

    assert once_closed.todo.state == ours_closed.todo.state == TodoState.DONE
    skip = {"id", "todo", "claimed_at", "last_heartbeat_at", "lease_expires_at", "ended_at"}
    fields = [f.attname for f in TodoAttempt._meta.concrete_fields if f.name not in skip]
    rows = {
        t.id: TodoAttempt.objects.filter(todo_id=t.id).values(*fields).get() for t in (ours, once)
    }
    assert rows[once.id] == rows[ours.id]
    assert rows[once.id]["claimant"] == "worker-7" and rows[once.id]["outcome"] == "completed"
    # what the plan hands back is the same record, its times aside
    assert once_closed.attempt.claimant == ours_closed.attempt.claimant == "worker-7"
    assert once_closed.attempt.outcome == ours_closed.attempt.outcome
    with connection.cursor() as cursor:  # the lease columns are cleared with the lease
        cursor.execute(
            "SELECT lease_claimer_kind, lease_claimant FROM todos WHERE id = %s", [once.id]
        )
        assert cursor.fetchone() == (None, None)


@pytest.mark.django_db
def test_the_write_once_heartbeat_checks_the_holder_as_the_product_does(
    agent, make_todo, endpoint, make_endpoint
):
    """Another seq, another endpoint, a person's lease or a fenced one: no row, as in the
    product."""
    with connection.cursor() as cursor:
        writeonce.add_lease_columns(cursor)
    twins = writeonce.statements(nohist.statements())
    todo = make_todo()
    db.run(nohist.swapped(transitions.claim_next_plan(Actor.agent(agent.endpoint)), twins))
    beat = twins["heartbeat_held_by_agent"]
    params = {
        "todo_id": todo.id,
        "scope_endpoint": endpoint.id,
        "attempt_seq": None,
        "lease_seconds": 60,
    }
    assert db.fetch(beat, params)
    assert not db.fetch(beat, params | {"attempt_seq": 2})
    other = make_endpoint("agent-b")
    assert not db.fetch(beat, params | {"scope_endpoint": other.id})
    for change in ("lease_claimer_kind = 'user'", "lease_token_hash = 'x'"):
        with connection.cursor() as cursor:
            cursor.execute("SAVEPOINT held")
            cursor.execute(f"UPDATE todos SET {change} WHERE id = %s", [todo.id])
            assert not db.fetch(beat, params), change
            cursor.execute("ROLLBACK TO SAVEPOINT held")
    assert db.fetch(beat, params)  # the holder's own, unfenced lease again


def test_the_write_once_twins_refuse_a_drifted_statement():
    twins = nohist.statements()
    close_ = twins["close_held_by_agent"]
    twins["close_held_by_agent"] = db.Statement(
        close_.name, close_.text.replace("FOR UPDATE OF t", "FOR SHARE OF t"), why=close_.why
    )
    with pytest.raises(nohist.Drifted, match="close_held_by_agent_nohist"):
        writeonce.statements(twins)
