"""The bench's reference for ADR-0039's bar (bench/nohist.py): the product's claim, heartbeat
and close statements rebuilt by their builders without attempt history. The default builders
must make exactly the product's statements, and the variants must be valid SQL that moves the
todo and leaves the attempts alone."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from bench import nohist
from queues import db, sql, transitions
from queues.models import TodoAttempt, TodoState
from queues.sql import claim, close


def test_the_default_builders_make_exactly_the_product_statements():
    held = "t.id = %(todo_id)s AND " + sql.SCOPE_ENDPOINT
    agent = {"attempt_filter": close._HELD_BY_AGENT}
    why = sql.CLAIM_NEXT.why
    assert claim._claim("claim_next", sql.SCOPE_ENDPOINT, "SKIP LOCKED", why) == sql.CLAIM_NEXT
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

    claimed = db.run(nohist.swapped(transitions.claim_next_plan(endpoint=agent.endpoint), twins))
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
