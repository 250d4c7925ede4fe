"""board.drawer's rules over real records: rounds, the strip of tries, the selection."""

from __future__ import annotations

import pytest

from switchboard.board import drawer
from switchboard.queues import transitions
from switchboard.queues.selectors import board_todo
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease, make_retry_due


@pytest.fixture
def signed_in_client(client, user):
    client.force_login(user)
    return client


def _released_many(endpoint, user, n: int) -> int:
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="churn")
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
    transitions.rerun(Actor.human(user), todo_id)
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
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="r")
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, result={"try": 1})
    make_retry_due(todo.id)
    transitions.claim(agent, todo.id)
    transitions.complete(agent, todo.id, result={"try": 2})
    d = drawer.build(board_todo(user, todo.id), user=user)
    assert d.has_result_of_record and d.result_of_record == {"try": 2}


def test_a_collapsed_run_names_its_tries_and_opens_whole_on_request(endpoint, user):
    todo_id = _released_many(endpoint, user, 12)  # tries 1-12 released, try 13 completed
    d = drawer.build(board_todo(user, todo_id), user=user)
    run = next(item for item in d.strip if item.attempt is None)
    assert (run.hidden, run.first_hidden) == (10, 2)
    d = drawer.build(board_todo(user, todo_id), user=user, all_param="1")
    assert [item.attempt.attempt for item in d.strip] == list(range(1, 14))
    assert d.expanded and d.params == {"all": "1"}


def test_every_round_is_on_the_rail_even_one_without_tries(endpoint, user):
    todo_id = _released_many(endpoint, user, 1)  # round 1: released, completed
    transitions.rerun(Actor.human(user), todo_id)  # round 2: canceled before anyone claimed it
    transitions.cancel(Actor.human(user), todo_id)
    transitions.rerun(Actor.human(user), todo_id)  # round 3, pending
    d = drawer.build(board_todo(user, todo_id), user=user)
    assert [(r.number, r.tries) for r in d.rounds] == [(3, 0), (2, 0), (1, 2)]
    assert d.selected is None and d.timeline is None
    d = drawer.build(board_todo(user, todo_id), user=user, round_param="2")
    # No tries in round 2: only what the person did in it (tests/board/test_timeline.py).
    assert d.round == 2 and [item.attempt for item in d.strip] == [None, None]
    assert [item.act.words for item in d.strip] == ["canceled it", "reran it: a new round follows"]


def test_a_todo_never_tried_says_so_not_try_0(signed_in_client, make_todo):
    todo = make_todo("untouched")
    page = signed_in_client.get(f"/todos/{todo.id}/").content.decode()
    assert f"todo #{todo.id} · not tried yet · round 1" in page
    assert "try 0" not in page


def test_the_budget_tells_failed_and_died_tries_apart(endpoint, user):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="b", max_attempts=5)
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id)
    make_retry_due(todo.id)
    transitions.claim(agent, todo.id)
    lapse_lease(todo.id)
    transitions.reap_lapsed()
    transitions.claim(agent, todo.id)
    transitions.complete(agent, todo.id)
    d = drawer.build(board_todo(user, todo.id), user=user)
    assert (d.budget.spent, d.budget.allowed, d.budget.failed, d.budget.died) == (2, 5, 1, 1)
    assert [lane.marker.kind for lane in d.timeline.lanes] == ["failed", "died", "completed"]
    died = d.timeline.lanes[1]
    assert died.silent_width > 0 and died.silent_left >= died.left  # after its last sign of life
    lefts = [lane.left for lane in d.timeline.lanes]
    assert lefts == sorted(lefts) and lefts[0] == 0


def test_actions_follow_the_open_attempt_the_todo_names(endpoint, user):
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="held")
    transitions.claim(agent, todo.id)
    detail = board_todo(user, todo.id)
    d = drawer.build(detail, user=user)
    assert d.actions.theirs and not d.actions.claim and d.open_attempt.seq == 1
    # A record pair that disagrees (a pending todo beside an open attempt, as two reads at
    # different instants gave): the drawer goes by the todo, offering no release.
    from dataclasses import replace

    torn = replace(detail, todo=replace(detail.todo, state="pending", lease_expires_at=None))
    d = drawer.build(torn, user=user)
    assert d.open_attempt is None and not d.actions.theirs and d.actions.claim
