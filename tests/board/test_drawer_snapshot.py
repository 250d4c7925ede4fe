"""The drawer reads its todo and the todo's attempts in one snapshot: a claim committed
between the two reads cannot give a header that says "pending, try 1" above a strip with an
open try 2 (nor offer both "Claim it myself" and "Release their lease")."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test import Client

from switchboard.board import drawer
from switchboard.queues import db, selectors, transitions
from switchboard.queues.selectors import details
from switchboard.queues.transitions import Actor
from tests.board.pages import HTMX

pytestmark = pytest.mark.django_db(transaction=True)


def _claim_in_another_connection(endpoint, todo_id: int) -> None:
    def claim():
        try:
            transitions.claim(Actor.agent(endpoint), todo_id, claimant="run-2")
        finally:
            connections.close_all()

    thread = threading.Thread(target=claim)
    thread.start()
    thread.join(timeout=30)


def test_a_claim_committed_between_the_two_reads_is_not_half_seen(
    monkeypatch, user, endpoint, make_todo
):
    todo = make_todo("raced")
    agent = Actor.agent(endpoint)
    transitions.claim(agent, todo.id, claimant="run-1")
    transitions.release(Actor.human(user), todo.id)  # pending, try 1 released

    reads = details._attempts

    def attempts_after_a_claim(record, limit):
        _claim_in_another_connection(endpoint, todo.id)  # commits between the two reads
        return (yield from reads(record, limit))

    monkeypatch.setattr(details, "_attempts", attempts_after_a_claim)
    detail = selectors.board_todo(user, todo.id)
    monkeypatch.undo()

    # The snapshot saw the todo before the claim, and its attempts before it too.
    assert detail.todo.state == "pending" and detail.todo.last_attempt_seq == 1
    assert [a.seq for a in detail.attempts] == [1]
    d = drawer.build(detail, user=user)
    assert d.actions.claim and not d.actions.theirs and d.open_attempt is None
    # The claim did happen; the next read shows it whole.
    fresh = drawer.build(selectors.board_todo(user, todo.id), user=user)
    assert fresh.todo.state == "claimed" and fresh.open_attempt.seq == 2
    assert fresh.actions.theirs and not fresh.actions.claim


def test_without_the_snapshot_the_same_race_is_half_seen(monkeypatch, user, endpoint, make_todo):
    """The test above can fail: the same two reads, each in its own transaction, disagree."""
    todo = make_todo("raced")
    reads = details._attempts

    def attempts_after_a_claim(record, limit):
        _claim_in_another_connection(endpoint, todo.id)
        return (yield from reads(record, limit))

    # A todo claimed once, so its attempts are read at all (never-claimed todos skip that).
    agent = Actor.agent(endpoint)
    transitions.claim(agent, todo.id)
    transitions.release(agent, todo.id)
    monkeypatch.setattr(details, "_attempts", attempts_after_a_claim)
    # Two autocommit reads, as board_todo made before the snapshot.
    detail = db.run(selectors.get_todo_for_user_plan(user, todo.id, attempts_limit=50))
    assert detail.todo.state == "pending"
    assert [a.seq for a in detail.attempts] == [2, 1] and detail.attempts[0].is_open


def test_the_drawer_refresh_is_eight_statements_with_its_snapshot(
    user, endpoint, make_todo, django_assert_num_queries
):
    todo = make_todo("refreshed")
    agent = Actor.agent(endpoint)
    for _ in range(6):
        transitions.claim(agent, todo.id)
        transitions.release(agent, todo.id)
    client = Client()
    client.force_login(user)
    client.get(f"/todos/{todo.id}/", **HTMX)  # the session row exists, as in a browser
    # session, user, then the snapshot: BEGIN, SET TRANSACTION ... REPEATABLE READ, READ ONLY,
    # the todo (scoped to the user's teams), its attempts, people's actions on it, COMMIT
    with django_assert_num_queries(8) as captured:
        response = client.get(f"/todos/{todo.id}/?attempt=3", **HTMX)
    assert response.status_code == 200
    statements = [q["sql"].split()[0] for q in captured.captured_queries]
    assert statements[2:4] == ["BEGIN", "SET"] and statements[-1] == "COMMIT"
    assert "REPEATABLE READ, READ ONLY" in captured.captured_queries[3]["sql"]
    assert not connection.in_atomic_block
