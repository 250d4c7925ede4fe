"""The bench's reference for ADR-0039 (bench/nohist.py): the product's drain statements with
their attempt parts cut out. Held here, against the real schema, so the twins cannot rot
unseen: each prepares, a drain through them moves the todos as the product does and writes
no attempt, and a product statement that changed shape stops them."""

from __future__ import annotations

import pytest
from django.db import connection

from bench import nohist
from queues import db, endpoints, sql, transitions
from queues.db.plans import Statement
from queues.models import Todo, TodoAttempt
from queues.transitions import Actor


@pytest.fixture
def twins_in_place():
    nohist.use(True)
    yield
    nohist.use(False)


@pytest.mark.django_db
@pytest.mark.parametrize("statement", nohist.twins(), ids=lambda s: s.name)
def test_each_twin_prepares_against_the_schema_and_names_no_attempt(statement):
    assert "todo_attempts" not in statement.text
    with connection.cursor() as cursor:
        cursor.execute(f"PREPARE bench_twin AS {statement.native}")
        cursor.execute("DEALLOCATE bench_twin")


@pytest.mark.django_db
def test_a_drain_through_the_twins_moves_every_todo_and_writes_no_attempt(team, twins_in_place):
    endpoint, _ = endpoints.vend(team, "twin-drainer")
    for n in range(3):
        transitions.create_todo(Actor.agent(endpoint), title=f"t{n}")
    agent = Actor.agent(endpoint)
    claim = db.run(transitions.claim_next_plan(agent))
    seen = []
    while claim is not None:
        seen.append((claim.todo.id, claim.attempt_seq, claim.todo.state))
        both = db.run(
            transitions.complete_then_claim_next_plan(
                agent, claim.todo.id, attempt_seq=claim.attempt_seq, result={"ok": True}
            )
        )
        assert both is not None  # the one statement, not the two-statement fallback
        assert both.closed.attempt.outcome == "completed" and both.closed.todo.state == "done"
        claim = both.claim
    assert [(seq, state) for _, seq, state in seen] == [(1, "claimed")] * 3
    assert len({todo_id for todo_id, _, _ in seen}) == 3
    assert set(Todo.objects.filter(endpoint=endpoint).values_list("state", flat=True)) == {"done"}
    assert not TodoAttempt.objects.filter(todo__endpoint=endpoint).exists()


def test_the_product_statements_are_back_after_use_false():
    product = sql.CLOSE_THEN_CLAIM_NEXT
    try:
        nohist.use(True)
        assert sql.CLOSE_THEN_CLAIM_NEXT.name == "nohist_close_then_claim_next"
    finally:  # never leave the twins in place for the tests after this one
        nohist.use(False)
    assert sql.CLOSE_THEN_CLAIM_NEXT is product


def test_a_statement_without_the_block_a_twin_cuts_stops_the_bench():
    reshaped = Statement(
        "close_reshaped",
        "WITH closed AS (UPDATE todo_attempts a SET ended_at = now() RETURNING a.seq) SELECT 1",
        why="a close whose shape changed",
    )
    with pytest.raises(nohist.Drifted):
        nohist.twin(reshaped)
    with pytest.raises(nohist.Drifted):
        nohist.twin(Statement("reads_attempts", "SELECT 1 FROM todo_attempts", why="x"))
