"""The row rules of todos and todo_attempts: one CHECK per table calling one PL/pgSQL function
(migration 0021). Each rule is broken once here and the database refuses the row; the
functions' value lists are held to the model's enums, so a new state or outcome added to the
model and not to the function fails here first."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from switchboard.queues import transitions
from switchboard.queues.models import (
    ClaimerKind,
    Disposition,
    Outcome,
    Todo,
    TodoAttempt,
    TodoState,
)
from switchboard.queues.transitions import Actor

# A todo's rules: each a change that breaks exactly one (the old constraint's name beside it).
TODO_BREAKS = {
    "todos_state_valid": "state = 'paused'",
    "todos_priority_range (high)": "priority = 101",
    "todos_priority_range (low)": "priority = -101",
    "todos_max_attempts_min": "max_attempts = 0",
    "todos_counters_valid (attempt)": "attempt = -1",
    "todos_counters_valid (failures)": "failures = -1",
    "todos_counters_valid (round)": "round = 0",
    "todos_counters_valid (pruned)": "attempts_pruned = -1",
    "todos_claimed_has_lease": "state = 'claimed', lease_expires_at = NULL",
    "todos_retry_wait_has_time": "state = 'retry_wait', next_retry_at = NULL",
    "todos_ended_only_terminal": "ended_at = now()",
    "todos_dead_has_reason": "state = 'dead', ended_at = now(), dead_letter_reason = ''",
}

ATTEMPT_BREAKS = {
    "todo_attempts_claimer_valid (kind)": "claimer_kind = 'robot'",
    "todo_attempts_claimer_valid (endpoint)": "endpoint_id = NULL",
    "an endpoint attempt with a user": "user_id = (SELECT min(id) FROM auth_user)",
    "todo_attempts_closed_valid (open with an outcome)": "outcome = 'completed'",
    "todo_attempts_closed_valid (closed without one)": "ended_at = now()",
    "todo_attempts_closed_valid (unknown outcome)": (
        "ended_at = now(), outcome = 'exploded', disposition = 'done'"
    ),
    "todo_attempts_closed_valid (unknown disposition)": (
        "ended_at = now(), outcome = 'completed', disposition = 'vanished'"
    ),
    "summary without its words": "summary = 'the build broke'",
    "summary with other words": (
        "summary = 'the build broke', summary_document = to_tsvector('simple', 'all fine')"
    ),
    "words without a summary": "summary_document = to_tsvector('simple', 'all fine')",
}


def _refused(sql: str, params: list) -> str:
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
    return str(caught.value)


@pytest.mark.parametrize("change", TODO_BREAKS.values(), ids=TODO_BREAKS.keys())
def test_a_todo_that_breaks_a_rule_is_refused_and_left_as_it_was(make_todo, change):
    todo = make_todo()
    before = Todo.objects.filter(pk=todo.id).values().get()
    message = _refused(f"UPDATE todos SET {change} WHERE id = %s", [todo.id])
    assert 'violates check constraint "todos_valid"' in message
    assert Todo.objects.filter(pk=todo.id).values().get() == before


@pytest.mark.parametrize("change", ATTEMPT_BREAKS.values(), ids=ATTEMPT_BREAKS.keys())
def test_an_attempt_that_breaks_a_rule_is_refused_and_left_as_it_was(endpoint, make_todo, change):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    attempt = TodoAttempt.objects.get(todo_id=todo.id)
    before = TodoAttempt.objects.filter(pk=attempt.pk).values().get()
    message = _refused(f"UPDATE todo_attempts SET {change} WHERE id = %s", [attempt.pk])
    assert 'violates check constraint "todo_attempts_valid"' in message
    assert TodoAttempt.objects.filter(pk=attempt.pk).values().get() == before


def _todo_valid(state: str) -> bool:
    """todos_valid for a row of ``state`` that has everything that state asks for."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT todos_valid(%s::varchar, 0::smallint, 3::smallint, 0, 0, 1, 0, now(),"
            " now(), CASE WHEN %s IN ('done', 'dead', 'canceled') THEN now() END,"
            " 'failed'::varchar)",
            [state, state],
        )
        return cursor.fetchone()[0]


def _attempt_valid(kind: str, outcome: str, disposition: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT todo_attempts_valid(%s::varchar, 1::bigint, NULL::integer,"
            " CASE WHEN %s = '' THEN NULL ELSE now() END, %s::varchar, %s::varchar, NULL, NULL)",
            [kind, outcome, outcome, disposition],
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_the_functions_accept_every_value_of_the_model_s_enums_and_nothing_else():
    assert all(_todo_valid(state) for state in TodoState.values)
    assert not _todo_valid("paused")
    assert all(_attempt_valid(kind, "", "") for kind in ClaimerKind.values)
    assert not _attempt_valid("robot", "", "")
    assert all(_attempt_valid("endpoint", o, "done") for o in Outcome.values)
    assert all(_attempt_valid("endpoint", "completed", d) for d in Disposition.values)
    assert not _attempt_valid("endpoint", "exploded", "done")
    assert not _attempt_valid("endpoint", "completed", "vanished")


def test_a_close_writes_the_summary_s_words_and_search_finds_them(endpoint, agent, make_todo):
    said, silent = make_todo(), make_todo()
    for todo, summary in ((said, "Rotated the SIGNING keys"), (silent, None)):
        transitions.claim_next(Actor.agent(endpoint))
        transitions.complete(agent, todo.id, summary=summary)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT todo_id, summary_document::text FROM todo_attempts WHERE todo_id IN (%s, %s)"
            " ORDER BY todo_id",
            [said.id, silent.id],
        )
        assert cursor.fetchall() == [
            (said.id, "'keys':4 'rotated':1 'signing':3 'the':2"),
            (silent.id, None),
        ]
        cursor.execute(
            "SELECT todo_id FROM todo_attempts WHERE summary > ''"
            " AND summary_document @@ to_tsquery('simple', 'signing')"
        )
        assert cursor.fetchall() == [(said.id,)]


@pytest.mark.django_db
def test_each_table_has_exactly_one_check_and_it_calls_its_function():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)"
            "  FROM pg_constraint WHERE contype = 'c'"
            "   AND conrelid IN ('todos'::regclass, 'todo_attempts'::regclass)"
            " ORDER BY 1"
        )
        checks = cursor.fetchall()
    assert [(table, name) for table, name, _ in checks] == [
        ("todo_attempts", "todo_attempts_valid"),
        ("todos", "todos_valid"),
    ]
    assert "todo_attempts_valid(claimer_kind, endpoint_id, user_id, ended_at" in checks[0][2]
    assert "todos_valid(state, priority, max_attempts" in checks[1][2]
