"""Idempotency keys are scoped by sender: a sender only ever gets back a todo it made.

The red-team finding (issue 10, item 1): with ``to``, the key was looked up on the *target*
endpoint, so an endpoint vended only ``create_todo`` got back a teammate's own todo (title,
body and result) by guessing its key. Tested over HTTP and MCP, against a live server.
"""

from __future__ import annotations

import asyncio

import pytest

from switchboard.queues import transitions
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests.agents.api_helpers import post
from tests.agents.test_mcp import call as mcp_call
from tests.agents.test_mcp import mcp_client

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def teammates(vend):
    """a2 keeps its own todo under the key "deploy-42" and completes it with a result; the
    sender may only create_todo."""
    a2, a2_token = vend("a2")
    _, sender_token = vend("sender", verbs="create_todo")
    own, _ = transitions.create_todo(
        Actor.agent(a2),
        title="a2's secret deploy",
        body="password=hunter2",
        idempotency_key="deploy-42",
    )
    claimed = transitions.claim_next(Actor.agent(a2))
    transitions.complete(Actor.agent(a2), own.id, result={"token": "s3cr3t"})
    assert claimed.todo.id == own.id
    return a2, own, sender_token


def _leaks(todo: dict, own) -> bool:
    return (
        todo["id"] == own.id
        or "hunter2" in str(todo)
        or "s3cr3t" in str(todo)
        or "secret deploy" in str(todo)
    )


def test_a_sender_never_gets_back_a_teammates_todo_by_its_key_over_http(live_server, teammates):
    a2, own, sender_token = teammates
    body = {"title": "x", "to": "a2", "idempotency_key": "deploy-42"}
    first = post(live_server.url, "create_todo", body, token=sender_token)
    assert first.status_code == 200
    sent = first.json()
    assert sent["created"] is True and not _leaks(sent["todo"], own)
    assert sent["todo"]["title"] == "x" and sent["todo"]["requester"] == "sender"
    # The same sender repeating its key gets its own todo back, unchanged.
    again = post(live_server.url, "create_todo", {**body, "title": "y"}, token=sender_token).json()
    assert again["created"] is False and again["todo"]["id"] == sent["todo"]["id"]
    assert again["todo"]["title"] == "x"
    # Two todos on a2's queue under one key: a2's own and the sender's.
    assert Todo.objects.filter(endpoint=a2, idempotency_key="deploy-42").count() == 2


def test_a_senders_create_answer_is_what_a_requester_may_read(live_server, teammates):
    _, _, sender_token = teammates
    sent = post(
        live_server.url, "create_todo", {"title": "x", "to": "a2"}, token=sender_token
    ).json()
    # As get_todo shows a todo to its requester: no owner, no attempt counts.
    for key in ("owner", "attempts_total", "attempts_pruned", "attempts"):
        assert key not in sent["todo"]
    assert sent["todo"]["state"] == "pending"


def test_an_endpoints_own_key_still_returns_its_own_todo(live_server, vend):
    _, token = vend("solo")
    body = {"title": "nightly", "idempotency_key": "nightly-1"}
    first = post(live_server.url, "create_todo", body, token=token).json()
    second = post(live_server.url, "create_todo", body, token=token).json()
    assert first["created"] is True and second["created"] is False
    assert first["todo"]["id"] == second["todo"]["id"]
    assert "owner" in second["todo"]  # its own queue: the whole todo


def test_a_sender_never_gets_back_a_teammates_todo_by_its_key_over_mcp(live_server, teammates):
    _, own, sender_token = teammates

    async def scenario():
        async with mcp_client(live_server.url, sender_token) as client:
            arguments = {"title": "x", "to": "a2", "idempotency_key": "deploy-42"}
            return await mcp_call(client, "create_todo", arguments)

    sent = asyncio.run(scenario())
    assert sent["created"] is True and not _leaks(sent["todo"], own)


def test_two_senders_with_one_key_get_a_todo_each(vend):
    target, _ = vend("target")
    one, _ = vend("one")
    two, _ = vend("two")
    first, created_first = transitions.create_todo(
        Actor.agent(one),
        endpoint=target,
        title="a",
        idempotency_key="k",
    )
    second, created_second = transitions.create_todo(
        Actor.agent(two),
        endpoint=target,
        title="b",
        idempotency_key="k",
    )
    again, created_again = transitions.create_todo(
        Actor.agent(one),
        endpoint=target,
        title="c",
        idempotency_key="k",
    )
    assert created_first and created_second and not created_again
    assert first.id != second.id and again.id == first.id
