"""Scoped reads: get_todo and list_todos, with their query counts pinned."""

from __future__ import annotations

import pytest

from switchboard.queues import bounds, transitions
from switchboard.queues.errors import Invalid, NotFound
from switchboard.queues.transitions import Actor
from tests.queues.helpers import get_todo_for_endpoint, list_todos


def test_get_todo_returns_attempts_newest_first_with_totals(endpoint, agent, make_todo):
    todo = make_todo()
    for _ in range(3):
        transitions.claim(agent, todo.id)
        transitions.release(agent, todo.id)
    transitions.claim(agent, todo.id)

    detail = get_todo_for_endpoint(endpoint, todo.id, attempts_limit=2)

    assert [a.seq for a in detail.attempts] == [4, 3]
    assert detail.attempts[0].is_open and detail.attempts[0].outcome == ""
    assert detail.todo.attempts_total == 4 and detail.todo.attempts_pruned == 0
    api = detail.as_api()
    assert api["todo"]["attempts_total"] == 4 and "untrusted_notice" in api
    assert api["todo"]["attempts"][0]["died"] is False
    assert "result" not in api["todo"]["attempts"][0]  # per-attempt result is Board-only


def test_get_todo_reports_next_retry_and_dead_letter(endpoint, agent, make_todo):
    todo = make_todo(max_attempts=2)
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id, result={"e": 1})
    waiting = get_todo_for_endpoint(endpoint, todo.id).as_api()["todo"]
    assert waiting["next_retry_at"] and waiting["dead_letter"] is False
    assert waiting["result"] == {"e": 1}
    transitions.cancel(agent, todo.id)
    canceled = get_todo_for_endpoint(endpoint, todo.id).as_api()["todo"]
    assert canceled["state"] == "canceled" and canceled["next_retry_at"] is None


def test_open_attempt_shows_the_live_lease(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim_next(Actor.agent(endpoint), lease_seconds=60)
    expires = transitions.heartbeat(agent, todo.id, lease_seconds=900).lease_expires_at
    [attempt] = get_todo_for_endpoint(endpoint, todo.id).attempts
    assert attempt.lease_expires_at == expires and attempt.last_heartbeat_at is not None


@pytest.mark.parametrize("limit", [0, 51, "20", True])
def test_attempts_limit_is_bounded(endpoint, make_todo, limit):
    todo = make_todo()
    with pytest.raises(Invalid):
        get_todo_for_endpoint(endpoint, todo.id, attempts_limit=limit)


def test_requester_sees_state_and_result_without_attempts(make_endpoint, make_todo):
    worker, sender = make_endpoint("worker"), make_endpoint("sender")
    todo = make_todo(on=worker, requester=sender)
    transitions.claim_next(Actor.agent(worker))
    transitions.complete(Actor.agent(worker), todo.id, result={"answer": 42}, summary="s")

    api = get_todo_for_endpoint(sender, todo.id).as_api()

    assert api["todo"]["state"] == "done" and api["todo"]["result"] == {"answer": 42}
    assert "attempts" not in api["todo"] and "untrusted_notice" not in api
    assert api["todo"]["requester"] == "sender"


def test_list_todos_pages_by_keyset_newest_first(endpoint, make_endpoint, make_todo):
    ids = [make_todo(f"t{n}").id for n in range(5)]
    make_todo("elsewhere", on=make_endpoint("other"))

    page1, cursor = list_todos(endpoint, limit=2)
    page2, cursor2 = list_todos(endpoint, limit=2, cursor=cursor)
    page3, cursor3 = list_todos(endpoint, limit=2, cursor=cursor2)

    assert [t.id for t in page1 + page2 + page3] == ids[::-1]
    assert cursor3 is None


def test_list_todos_filters_by_state(endpoint, make_todo):
    first, _second = make_todo("a"), make_todo("b")
    transitions.claim(Actor.agent(endpoint), first.id)
    claimed, _ = list_todos(endpoint, state="claimed")
    assert [t.id for t in claimed] == [first.id]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"state": "nope"},
        {"limit": 201},
        {"limit": 0},
        {"cursor": "!!!"},
        {"cursor": "djI6MQ"},
        {"cursor": 5},
    ],
)
def test_list_todos_rejects_bad_arguments(endpoint, kwargs):
    with pytest.raises(Invalid):
        list_todos(endpoint, **kwargs)


def test_unknown_ids_out_of_range_are_not_found(endpoint):
    with pytest.raises(NotFound):
        get_todo_for_endpoint(endpoint, 2**63)
    with pytest.raises(Invalid):
        get_todo_for_endpoint(endpoint, "7")


def test_query_counts_are_pinned(django_assert_num_queries, endpoint, agent, make_todo):
    for n in range(30):
        make_todo(f"t{n}")
    transitions.claim_next(Actor.agent(endpoint))
    todo_id = transitions.claim_next(Actor.agent(endpoint)).todo.id
    transitions.release(agent, todo_id)

    # Each transition is one durable transaction; inside the test's own transaction it runs
    # as SAVEPOINT ... RELEASE SAVEPOINT (BEGIN/COMMIT in production), hence 1 + 2.
    # claim_next of the released todo: the claim statement (pick, freshness, move, open), then
    # its prior attempts (read only when the todo keeps one)
    with django_assert_num_queries(2 + 2):
        claim = transitions.claim_next(Actor.agent(endpoint))
    assert claim.todo.id == todo_id and len(claim.prior_attempts) == 1
    # claim_next of a todo never claimed: the claim statement alone
    with django_assert_num_queries(1 + 2):
        fresh = transitions.claim_next(Actor.agent(endpoint))
    assert fresh.prior_attempts == []
    transitions.release(agent, fresh.todo.id)
    # complete by the unfenced holder: the one close statement
    with django_assert_num_queries(1 + 2):
        transitions.complete(agent, claim.todo.id, attempt_seq=claim.attempt_seq)
    # heartbeat by the unfenced holder: one UPDATE
    other = transitions.claim_next(Actor.agent(endpoint))
    with django_assert_num_queries(1 + 2):
        transitions.heartbeat(agent, other.todo.id)
    # get_todo: the todo, then its attempts
    with django_assert_num_queries(2):
        get_todo_for_endpoint(endpoint, claim.todo.id)
    # list_todos: one keyset query, whatever the page size
    with django_assert_num_queries(1):
        todos, _ = list_todos(endpoint, limit=200)
    assert len(todos) == 30


def test_a_list_page_ends_early_at_about_a_mebibyte_of_todo_text(endpoint, make_todo):
    body = "x" * (60 * 1024)
    for n in range(40):  # 2.4 MB of bodies
        make_todo(f"big {n}", body=body)
    first, cursor = list_todos(endpoint, limit=200)
    assert 1 <= len(first) < 40 and cursor is not None
    assert sum(len(t.body) for t in first) <= bounds.LIST_MAX_BYTES
    seen = [t.id for t in first]
    while cursor is not None:
        page, cursor = list_todos(endpoint, limit=200, cursor=cursor)
        assert page
        seen += [t.id for t in page]
    assert len(seen) == len(set(seen)) == 40  # every todo once, newest first
    assert seen == sorted(seen, reverse=True)


def test_a_single_todo_over_the_budget_still_makes_a_page(endpoint, make_todo, settings):
    from unittest import mock

    make_todo("one", body="y" * 1000)
    make_todo("two", body="y" * 1000)
    with mock.patch.object(bounds, "LIST_MAX_BYTES", 10):
        page, cursor = list_todos(endpoint)
    assert len(page) == 1 and cursor is not None
