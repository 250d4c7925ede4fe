"""Asking a person over MCP (issue 43): ``release`` with ``question`` and the ``answer`` tool,
driven by the official ``mcp`` Python client over streamable HTTP against a live server."""

from __future__ import annotations

import asyncio
import json

import pytest

from switchboard.queues.models import Todo, TodoAttempt
from tests.agents.test_mcp import call, mcp_client, run
from tests.queues.helpers import approval_form

pytestmark = pytest.mark.django_db(transaction=True)

ASKING = ("question", "choices", "answer_schema", "answer_within_seconds", "on_no_answer")


def test_release_and_answer_are_tools_that_say_how_to_ask_and_answer(live_server, vend):
    _, token = vend("lister")

    async def scenario():
        async with mcp_client(live_server.url, token) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = run(scenario())
    release = tools["release"]
    assert "With `question`, ask" in release.description
    # Each optional argument is its type or null, the description on its type.
    said = {
        name: next(option for option in schema["anyOf"] if option["type"] != "null")
        for name, schema in release.input_schema["properties"].items()
        if name in ASKING
    }
    assert set(said) == set(ASKING)
    assert "waiting" in said["question"]["description"]
    assert "prior_attempts" in said["question"]["description"]
    assert "instead of answer_schema" in said["choices"]["description"]
    assert said["choices"]["maxItems"] == 10 and said["choices"]["items"]["maxLength"] == 100
    assert "requestedSchema" in said["answer_schema"]["description"]
    assert said["answer_within_seconds"]["maximum"] == 30 * 24 * 3600
    assert "requeue" in said["on_no_answer"]["description"]
    assert set(said["on_no_answer"]["enum"]) == {"requeue", "dead_letter"}
    answer = tools["answer"]
    assert set(answer.input_schema["properties"]) == {"todo_id", "value"}
    assert set(answer.input_schema["required"]) == {"todo_id", "value"}
    assert answer.input_schema["additionalProperties"] is False
    for said in ("choices", "answer_schema", "not_found", "conflict", "invalid"):
        assert said in answer.description, said
    assert answer.output_schema["properties"]["todo"]


def test_an_agent_asks_its_requester_answers_and_the_next_claim_reads_both_over_mcp(
    live_server, vend, make_user
):
    """The worker asks with choices (the todo waits, no try spent); the requester's bad
    answers and the worker's own are refused as readable tool errors (an unknown id and
    another team's id alike); its good answer makes the todo claimable; the worker's next
    claim holds the question, the answer and who gave it; a second answer is a conflict."""
    _, sender_token = vend("sender")
    _, worker_token = vend("worker")
    _, foreign_token = vend("foreign", team=make_user("mallory").teams.get())
    url = live_server.url

    async def scenario():
        async with mcp_client(url, foreign_token) as foreign:
            created = await call(foreign, "create_todo", {"title": "another team's"})
            foreign_id = created["todo"]["id"]
        async with mcp_client(url, sender_token) as sender, mcp_client(url, worker_token) as worker:
            sent = await call(
                sender, "create_todo", {"title": "migrate the orders table", "to": "worker"}
            )
            todo_id = sent["todo"]["id"]
            claimed = await call(worker, "claim_next", {"claimant": "mcp/run-1"})
            assert claimed["todo"]["id"] == todo_id and claimed["prior_attempts"] == []
            seq = claimed["attempt_seq"]

            form = {"type": "object", "properties": {"go": {"type": "boolean"}}}
            both = await call(
                worker,
                "release",
                {
                    "todo_id": todo_id,
                    "attempt_seq": seq,
                    "question": "Go ahead?",
                    "choices": ["yes", "no"],
                    "answer_schema": form,
                },
            )
            assert both["tool_error"]["error"] == {
                "code": "invalid",
                "message": "Give choices or answer_schema, not both.",
            }
            nested = await call(
                worker,
                "release",
                {
                    "todo_id": todo_id,
                    "attempt_seq": seq,
                    "question": "Go ahead?",
                    "answer_schema": {
                        "type": "object",
                        "properties": {"go": {"type": "object", "properties": {}}},
                    },
                },
            )
            assert nested["tool_error"]["error"]["code"] == "invalid"
            assert "nothing nested" in nested["tool_error"]["error"]["message"]
            # Refused asks close nothing: the attempt is still the worker's.
            assert await _state(todo_id) == "claimed"

            asked = await call(
                worker,
                "release",
                {
                    "todo_id": todo_id,
                    "attempt_seq": seq,
                    "summary": "stopped before the destructive step",
                    "question": "The migration drops a column with data in it: go ahead?",
                    "choices": ["drop it", "keep it"],
                    "answer_within_seconds": 3600,
                },
            )
            assert (asked["outcome"], asked["disposition"]) == ("asked", "waiting")
            assert asked["todo"]["state"] == "waiting"
            assert asked["todo"]["waiting_for"] == "people" and asked["todo"]["failures"] == 0
            assert asked["todo"]["question"]["choices"] == ["drop it", "keep it"]

            # Waiting: not claimable by agents.
            nothing = await call(worker, "claim_next", {})
            assert nothing["todo"] is None
            seen = await call(sender, "get_todo", {"todo_id": todo_id})
            assert seen["todo"]["state"] == "waiting"
            assert seen["todo"]["question"]["text"].startswith("The migration drops a column")
            # The requester reads no attempts, but the question is the worker's text.
            assert "questions" in seen["untrusted_notice"]
            waiting = await call(sender, "list_todos", {"state": "waiting"})
            assert [todo["id"] for todo in waiting["todos"]] == []  # it is on the worker's queue
            waiting = await call(worker, "list_todos", {"state": "waiting"})
            assert [todo["id"] for todo in waiting["todos"]] == [todo_id]

            not_a_choice = await call(sender, "answer", {"todo_id": todo_id, "value": "maybe"})
            assert not_a_choice["tool_error"]["error"] == {
                "code": "invalid",
                "message": "The answer must be one of the question's choices: "
                "'drop it', 'keep it'.",
            }
            not_requester = await call(worker, "answer", {"todo_id": todo_id, "value": "keep it"})
            unknown = await call(sender, "answer", {"todo_id": 999_999_999, "value": "keep it"})
            foreign = await call(sender, "answer", {"todo_id": foreign_id, "value": "keep it"})
            assert unknown["tool_error"]["error"]["code"] == "not_found"
            assert foreign == unknown and not_requester == unknown  # no existence oracle
            no_value = await sender.call_tool("answer", {"todo_id": todo_id})
            assert no_value.is_error
            assert json.loads(no_value.content[0].text)["error"]["code"] == "invalid"
            assert "value" in no_value.content[0].text
            assert await _state(todo_id) == "waiting"

            answered = await call(sender, "answer", {"todo_id": todo_id, "value": "keep it"})
            assert answered["todo"]["state"] == "pending" and answered["todo"]["question"] is None
            again = await call(sender, "answer", {"todo_id": todo_id, "value": "drop it"})
            assert again["tool_error"]["error"]["code"] == "conflict"

            claimed = await call(worker, "claim_next", {"claimant": "mcp/run-2"})
            assert claimed["todo"]["id"] == todo_id and claimed["attempt_seq"] == 2
            assert "untrusted_notice" in claimed
            [prior] = claimed["prior_attempts"]
            assert (prior["seq"], prior["outcome"], prior["claimant"]) == (1, "asked", "mcp/run-1")
            assert prior["summary"] == "stopped before the destructive step"
            question = prior["question"]
            assert question["text"] == "The migration drops a column with data in it: go ahead?"
            assert question["choices"] == ["drop it", "keep it"]
            assert (question["ending"], question["answer_within_seconds"]) == ("answered", 3600)
            assert question["answer"]["value"] == "keep it"
            assert question["answer"]["answered_by"] == {"kind": "endpoint", "label": "sender"}
            assert question["answer"]["answered_at"] >= question["asked_at"]
            done = await call(worker, "complete", {"todo_id": todo_id, "attempt_seq": 2})
            assert done["todo"]["state"] == "done"
            return todo_id

    todo_id = run(scenario())
    assert list(
        TodoAttempt.objects.filter(todo_id=todo_id).order_by("seq").values_list("outcome")
    ) == [("asked",), ("completed",)]
    # The ask spent no try.
    assert Todo.objects.filter(pk=todo_id, failures=0, state="done").exists()


def test_a_form_is_answered_with_an_object_of_its_fields_over_mcp(live_server, vend):
    """An agent that asks on its own queue is its todo's requester: it answers the form."""
    _, token = vend("self-asker")
    form = approval_form("approve", title="Approve the refund?", most=1000)

    async def scenario():
        async with mcp_client(live_server.url, token) as client:
            todo_id = (await call(client, "create_todo", {"title": "refund"}))["todo"]["id"]
            claimed = await call(client, "claim", {"todo_id": todo_id})
            asked = await call(
                client,
                "release",
                {
                    "todo_id": todo_id,
                    "attempt_seq": claimed["attempt_seq"],
                    "question": "Approve this refund of 840 EUR?",
                    "answer_schema": form,
                },
            )
            assert asked["todo"]["question"]["answer_schema"] == form
            missing = await call(client, "answer", {"todo_id": todo_id, "value": {"amount": 5}})
            assert missing["tool_error"]["error"]["code"] == "invalid"
            assert "approve" in missing["tool_error"]["error"]["message"]
            text = await call(client, "answer", {"todo_id": todo_id, "value": "yes"})
            assert text["tool_error"]["error"]["code"] == "invalid"
            value = {"approve": True, "amount": 840}
            answered = await call(client, "answer", {"todo_id": todo_id, "value": value})
            assert answered["todo"]["state"] == "pending"
            claimed = await call(client, "claim_next", {})
            [prior] = claimed["prior_attempts"]
            assert prior["question"]["answer"]["value"] == value
            assert prior["question"]["answer"]["answered_by"]["label"] == "self-asker"

    run(scenario())


async def _state(todo_id: int) -> str:
    return await asyncio.to_thread(lambda: Todo.objects.get(pk=todo_id).state)
