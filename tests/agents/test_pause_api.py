"""A paused endpoint over HTTP and MCP, against the live server agents talk to: claim and
claim_next claim nothing and say ``paused: true``; long-polls keep waiting through the pause
(a todo created meanwhile does not end them) and claim once it is resumed; every other verb
keeps working."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from switchboard.queues import endpoints
from switchboard.queues.models import Todo
from tests.agents.api_helpers import check_shape, ok, post
from tests.agents.test_mcp import call, mcp_client

pytestmark = pytest.mark.django_db(transaction=True)


def test_claim_and_claim_next_say_paused_and_everything_else_works(live_server, vend, user):
    endpoint, token = vend("paused-http")
    base = live_server.url
    held = ok(base, token, "create_todo", {"title": "held"})["todo"]
    waiting = ok(base, token, "create_todo", {"title": "waiting"})["todo"]
    claim = ok(base, token, "claim", {"todo_id": held["id"], "require_fence": True})
    assert claim["paused"] is False
    endpoints.pause(endpoint, user=user)
    live_server.forgets(endpoint)  # heard, as another process would

    for verb, body in (("claim_next", {}), ("claim", {"todo_id": waiting["id"]})):
        answer = ok(base, token, verb, body)
        assert answer["paused"] is True and answer["todo"] is None
        assert answer["prior_attempts"] == [] and "attempt_seq" not in answer
    assert Todo.objects.get(pk=waiting["id"]).state == "pending"

    fence = {"todo_id": held["id"], "lease_token": claim["lease_token"]}
    ok(base, token, "heartbeat", fence)
    assert ok(base, token, "get_todo", {"todo_id": held["id"]})["todo"]["state"] == "claimed"
    assert len(ok(base, token, "list_todos")["todos"]) == 2
    assert ok(base, token, "create_todo", {"title": "more"})["created"] is True
    assert ok(base, token, "complete", fence)["todo"]["state"] == "done"
    assert ok(base, token, "cancel", {"todo_id": waiting["id"]})["todo"]["state"] == "canceled"

    endpoints.resume(endpoint, user=user)
    live_server.forgets(endpoint)  # heard, as another process would
    resumed = ok(base, token, "claim_next")
    assert resumed["paused"] is False and resumed["todo"]["title"] == "more"


def test_a_long_poll_waits_through_the_pause_and_claims_on_resume(live_server, vend, user):
    endpoint, token = vend("paused-wait")
    endpoints.pause(endpoint, user=user)
    answer: dict = {}

    def wait() -> None:
        answer["response"] = post(live_server.url, "claim_next", {"wait_seconds": 8}, token=token)
        answer["at"] = time.monotonic()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.8)  # parked on the doorbell
    ok(live_server.url, token, "create_todo", {"title": "made while paused"})  # rings
    time.sleep(0.8)
    assert waiter.is_alive()  # the ring found the endpoint paused: still waiting
    resumed_at = time.monotonic()
    endpoints.resume(endpoint, user=user)
    waiter.join(10)

    data = check_shape("claim_next", answer["response"])
    assert data["paused"] is False and data["todo"]["title"] == "made while paused"
    assert answer["at"] - resumed_at < 1.0  # woken by the resume's ring, not a re-check


def test_a_long_poll_that_ends_paused_says_so(live_server, vend, user):
    endpoint, token = vend("paused-out")
    ok(live_server.url, token, "create_todo", {"title": "not for now"})
    endpoints.pause(endpoint, user=user)
    live_server.forgets(endpoint)  # heard, as another process would
    started = time.monotonic()
    data = ok(live_server.url, token, "claim_next", {"wait_seconds": 1})
    assert data["paused"] is True and data["todo"] is None
    assert time.monotonic() - started >= 0.9


def test_over_mcp_claims_say_paused_and_a_waiting_claim_wakes_on_resume(live_server, vend, user):
    endpoint, token = vend("paused-mcp")

    async def paused_calls():
        async with mcp_client(live_server.url, token) as client:
            todo = (await call(client, "create_todo", {"title": "over mcp"}))["todo"]
            for tool, arguments in (("claim_next", {}), ("claim", {"todo_id": todo["id"]})):
                answer = await call(client, tool, arguments)
                assert answer["paused"] is True and answer["todo"] is None, answer
            created = await call(client, "create_todo", {"title": "also"})
            assert created["created"] is True

    endpoints.pause(endpoint, user=user)
    asyncio.run(paused_calls())

    async def waiting_claim():
        async with mcp_client(live_server.url, token) as client:
            started = time.monotonic()
            answer = await call(client, "claim_next", {"wait_seconds": 8})
            return answer, time.monotonic() - started

    timer = threading.Timer(1.0, lambda: endpoints.resume(endpoint, user=user))
    timer.start()
    answer, waited = asyncio.run(waiting_claim())
    timer.join()
    assert answer["paused"] is False and answer["todo"]["title"] == "over mcp"
    assert 0.9 <= waited < 3.0
