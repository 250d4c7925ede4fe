"""board.drawer's rules over real records: rounds, the strip of tries, the selection."""

from __future__ import annotations

from board import drawer
from queues import transitions
from queues.selectors import board_todo
from queues.transitions import Actor
from tests.queues.helpers import make_retry_due


def _released_many(endpoint, user, n: int) -> int:
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(endpoint=endpoint, title="churn")
    for _ in range(n):
        transitions.claim(agent, todo.id)
        transitions.release(agent, todo.id)
    transitions.claim(agent, todo.id)
    transitions.complete(agent, todo.id)
    return todo.id


def test_a_long_run_of_one_outcome_collapses_around_the_selection(endpoint, user):
    todo_id = _released_many(endpoint, user, 7)  # tries 1-7 released, try 8 completed
    d = drawer.build(board_todo(user, todo_id), user=user)
    shown = [(item.attempt.attempt if item.attempt else f"+{item.hidden}") for item in d.strip]
    assert shown == [1, "+5", 7, 8]
    assert d.selected.attempt == 8
    # selecting a try inside the run shows the whole run
    d = drawer.build(board_todo(user, todo_id), user=user, attempt_param="4")
    assert [item.attempt.attempt for item in d.strip] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_rounds_newest_first_and_the_selection_follows_the_round(endpoint, user):
    todo_id = _released_many(endpoint, user, 1)
    transitions.rerun(user, todo_id)
    transitions.claim(Actor.human(user), todo_id)
    d = drawer.build(board_todo(user, todo_id), user=user)
    assert [(r.number, r.tries, r.live) for r in d.rounds] == [(2, 1, True), (1, 2, False)]
    assert (d.round, d.selected.attempt, d.selected.round) == (2, 1, 2)
    assert d.actions.mine and not d.actions.claim and not d.actions.rerun
    d = drawer.build(board_todo(user, todo_id), user=user, round_param="1")
    assert (d.round, d.selected.attempt) == (1, 2)
    assert d.result_of_record is None and not d.has_result_of_record  # claimed, not done
    # nonsense parameters fall back to the newest try
    d = drawer.build(board_todo(user, todo_id), user=user, attempt_param="x", round_param="99")
    assert (d.round, d.selected.round) == (2, 2)


def test_result_of_record_is_the_completing_tries_result(endpoint, user):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(endpoint=endpoint, title="r")
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, result={"try": 1})
    make_retry_due(todo.id)
    transitions.claim(agent, todo.id)
    transitions.complete(agent, todo.id, result={"try": 2})
    d = drawer.build(board_todo(user, todo.id), user=user)
    assert d.has_result_of_record and d.result_of_record == {"try": 2}
