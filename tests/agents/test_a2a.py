"""A2A v1.0 (issue 45): every todo a caller may read is an A2A task, driven here by the official
``a2a-sdk`` Python client (1.3) as its own documentation uses it, against a live server, with
agents working the todos over the HTTP API. Raw JSON-RPC for what a polite client never sends.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.client.errors import A2AClientError
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from switchboard.agents.task_view import ATTEMPTS_URI, task_id
from switchboard.queues import endpoints
from switchboard.queues.models import Todo
from tests import loopback
from tests.agents.api_helpers import ok, post
from tests.queues.helpers import lapse_lease

pytestmark = pytest.mark.django_db(transaction=True)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def _http(token: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(headers=headers, timeout=40)


async def _client(url: str, http: httpx.AsyncClient, *, streaming: bool = True, polling=False):
    return await create_client(
        url, ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
    )


def _message(text: str | None = None, *, to: str | None = None, task: str = "", **meta):
    parts = [Part(text=text)] if text is not None else []
    request = SendMessageRequest(
        message=Message(message_id="m-1", role=Role.ROLE_USER, parts=parts, task_id=task)
    )
    if to is not None:
        request.metadata.update({"to": to, **meta})
    return request


def _attempts_context():
    from a2a.client import ClientCallContext

    return ClientCallContext(
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions([ATTEMPTS_URI])])
    )


def rpc(
    url: str,
    token: str | None,
    method: str,
    params=None,
    *,
    raw: bytes | None = None,
    headers: dict | None = None,
) -> httpx.Response:
    sent = {"Content-Type": "application/json", **(headers or {})}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    body = (
        raw
        if raw is not None
        else json.dumps(
            {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}}
        ).encode()
    )
    return loopback.post(f"{url}/a2a", content=body, headers=sent, timeout=40)


def send_message(
    url: str,
    token: str,
    text: str,
    *,
    to: str = "worker",
    push: dict | None = None,
    **metadata,
) -> dict:
    """SendMessage over JSON-RPC of one text part to the endpoint ``to``, answered at once:
    the JSON-RPC answer, whole."""
    configuration: dict = {"returnImmediately": True}
    if push is not None:
        configuration["taskPushNotificationConfig"] = push
    params = {
        "message": {"messageId": text, "role": "ROLE_USER", "parts": [{"text": text}]},
        "metadata": {"to": to, **metadata},
        "configuration": configuration,
    }
    return rpc(url, token, "SendMessage", params).json()


def _error(response: httpx.Response) -> dict:
    return response.json()["error"]


# ---------------------------------------------------------------------------------------
# The cards


def test_the_public_card_says_how_to_authenticate_and_reveals_no_team(live_server, vend, team):
    vend("secret-reviewer")
    response = loopback.get(f"{live_server.url}/.well-known/agent-card.json")
    assert response.status_code == 200
    card = parse_agent_card(response.json())  # the SDK reads it
    assert card.supported_interfaces[0].url == f"{live_server.url}/a2a"
    assert card.supported_interfaces[0].protocol_binding == "JSONRPC"
    assert card.supported_interfaces[0].protocol_version == "1.0"
    assert card.capabilities.streaming and card.capabilities.extended_agent_card
    assert card.security_schemes["endpointToken"].http_auth_security_scheme.scheme == "Bearer"
    assert [e.uri for e in card.capabilities.extensions] == [ATTEMPTS_URI]
    assert "secret-reviewer" not in response.text and team.slug not in response.text


def test_the_extended_card_lists_the_callers_teams_endpoints_as_skills(
    live_server, vend, make_user
):
    _, token = vend("sender")
    vend("reviewer")
    paused, _ = vend("sleeper")
    endpoints.pause(paused)
    revoked, _ = vend("gone")
    from switchboard.queues.transitions import revoke_endpoint

    revoke_endpoint(None, revoked)
    other_team = make_user("bob").teams.get()
    vend("bobs-agent", team=other_team)

    async def scenario():
        async with _http(token) as http:
            client = await _client(live_server.url, http)
            return await client.get_extended_agent_card(GetExtendedAgentCardRequest())

    card = run(scenario())
    skills = {skill.id: skill for skill in card.skills}
    assert set(skills) == {"sender", "reviewer", "sleeper"}  # not revoked, not bob's
    assert "paused" in skills["sleeper"].tags and "paused" not in skills["reviewer"].tags
    _, worker_only = vend("worker-only", verbs=["claim_next", "complete"])
    refused = rpc(live_server.url, worker_only, "GetExtendedAgentCard").json()
    assert refused["error"]["code"] == -32004  # the skills are for sending: not its to read
    unauthenticated = rpc(live_server.url, None, "GetExtendedAgentCard")
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"].startswith("Bearer")


# ---------------------------------------------------------------------------------------
# Sending, following, answering, canceling


def test_a_message_becomes_a_todo_and_the_stream_follows_it_to_completed(live_server, vend):
    """SendStreamingMessage: the task (submitted), working once claimed, then the result's
    artifact and completed, as the worker completes it over the HTTP API."""
    sender, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url

    async def scenario():
        events = []
        async with _http(token) as http:
            client = await _client(url, http)
            request = _message("Review pull request 12\nThe diff is small.", to="worker")
            stream = client.send_message(request)
            events.append(await anext(stream))
            claimed = await asyncio.to_thread(ok, url, worker, "claim_next", {})
            events.append(await anext(stream))
            await asyncio.to_thread(
                ok,
                url,
                worker,
                "complete",
                {
                    "todo_id": claimed["todo"]["id"],
                    "result": {"approved": True},
                    "summary": "Looks good.",
                },
            )
            async for event in stream:
                events.append(event)
        return events, claimed

    events, claimed = run(scenario())
    first = events[0].task
    assert first.status.state == TaskState.TASK_STATE_SUBMITTED
    todo = Todo.objects.get(pk=claimed["todo"]["id"])
    assert first.id == task_id(todo.endpoint.team_id, todo.pk)
    assert todo.title == "Review pull request 12"
    assert todo.body == "Review pull request 12\nThe diff is small."
    assert todo.requester == sender and todo.endpoint.agent_id == "worker"
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    artifact = next(e.artifact_update for e in events if e.HasField("artifact_update"))
    said = MessageToDict(artifact.artifact)
    assert said["parts"][0]["data"] == {"approved": True}
    assert said["parts"][1]["text"] == "Looks good."
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


def test_a_blocking_send_answers_when_the_task_ends_and_get_task_reads_it(
    live_server, sender, worker
):
    url = live_server.url

    async def work():
        for _ in range(100):
            claimed = await asyncio.to_thread(ok, url, worker, "claim_next", {"wait_seconds": 5})
            if claimed["todo"]:
                await asyncio.to_thread(
                    ok, url, worker, "complete", {"todo_id": claimed["todo"]["id"], "result": 42}
                )
                return

    async def scenario():
        async with _http(sender) as http:
            client = await _client(url, http, streaming=False)
            worker_task = asyncio.create_task(work())
            [event] = [e async for e in client.send_message(_message("Add 40 and 2", to="worker"))]
            await worker_task
            # An ended task is not cancelable, and stays as it ended.
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=event.task.id))
            again = await client.get_task(GetTaskRequest(id=event.task.id))
            return event.task, again

    answered, again = run(scenario())
    assert answered.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(answered.artifacts[0])["parts"][0]["data"] == 42
    assert again.status.state == TaskState.TASK_STATE_COMPLETED
    assert again.history[0].parts[0].text == "Add 40 and 2"


def test_a_question_is_input_required_and_a_follow_up_message_answers_it(
    live_server, sender, worker
):
    url = live_server.url

    async def scenario():
        async with _http(sender) as http:
            client = await _client(url, http)
            stream = client.send_message(_message("Deploy to production", to="worker"))
            submitted = (await anext(stream)).task
            claimed = await asyncio.to_thread(ok, url, worker, "claim_next", {})
            await asyncio.to_thread(
                ok,
                url,
                worker,
                "release",
                {
                    "todo_id": claimed["todo"]["id"],
                    "question": "Which region?",
                    "choices": ["eu", "us"],
                },
            )
            rest = [event async for event in stream]
            answer = SendMessageRequest(
                message=Message(
                    message_id="m-2",
                    role=Role.ROLE_USER,
                    task_id=submitted.id,
                    parts=[Part(text="eu")],
                )
            )
            answer.configuration.return_immediately = True
            polite = await _client(url, http, streaming=False)
            answered = [event async for event in polite.send_message(answer)]
            # The same answer again: the task waits for none now, and the first one stands.
            answer.message.message_id = "m-3"
            answer.message.parts[0].text = "us"
            with pytest.raises(InvalidParamsError, match="not waiting for an answer"):
                async for _ in polite.send_message(answer):
                    pass
            again = await asyncio.to_thread(ok, url, worker, "claim_next", {})
            return submitted, rest, answered, again

    submitted, rest, answered, again = run(scenario())
    asked = rest[-1].status_update.status
    assert asked.state == TaskState.TASK_STATE_INPUT_REQUIRED  # the stream ends there
    said = MessageToDict(asked.message)
    assert said["parts"][0]["text"] == "Which region?"
    assert said["parts"][1]["data"]["choices"] == ["eu", "us"]
    task = answered[-1].task
    assert task.id == submitted.id
    assert task.status.state == TaskState.TASK_STATE_WORKING  # pending again, tried once
    history = [MessageToDict(m) for m in task.history]
    assert [m["role"] for m in history] == ["ROLE_USER", "ROLE_AGENT", "ROLE_USER"]
    assert history[2]["parts"][0]["text"] == "eu"
    # The next claimer reads the question and the answer.
    assert again["todo"]["question"] is None
    assert again["prior_attempts"][0]["question"]["answer"]["value"] == "eu"


def test_cancel_task_fences_the_holder_and_a_second_cancel_is_not_cancelable(
    live_server, sender, worker
):
    url = live_server.url

    async def scenario():
        async with _http(sender) as http:
            client = await _client(url, http, streaming=False, polling=True)
            [sent] = [e async for e in client.send_message(_message("Long job", to="worker"))]
            claimed = await asyncio.to_thread(ok, url, worker, "claim_next", {})
            canceled = await client.cancel_task(CancelTaskRequest(id=sent.task.id))
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=sent.task.id))
            return claimed, canceled

    claimed, canceled = run(scenario())
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    heartbeat = post(url, "heartbeat", {"todo_id": claimed["todo"]["id"]}, token=worker)
    assert heartbeat.status_code == 409  # its holder is fenced out


def test_the_attempts_extension_says_attempt_one_died_after_its_last_heartbeat(
    live_server, sender, worker
):
    """The thing neither protocol can say: through the extension, the sender reads that
    attempt 1 died (its lease lapsed after its last heartbeat) and attempt 2 completed."""
    from switchboard.queues.transitions import reap_lapsed

    url = live_server.url

    async def scenario():
        async with _http(sender) as http:
            client = await _client(url, http, streaming=False, polling=True)
            [sent] = [e async for e in client.send_message(_message("Flaky job", to="worker"))]
            first = await asyncio.to_thread(ok, url, worker, "claim_next", {"claimant": "w-1"})
            await asyncio.to_thread(ok, url, worker, "heartbeat", {"todo_id": first["todo"]["id"]})
            await asyncio.to_thread(lapse_lease, first["todo"]["id"])
            await asyncio.to_thread(reap_lapsed)
            second = await asyncio.to_thread(ok, url, worker, "claim_next", {"claimant": "w-2"})
            await asyncio.to_thread(
                ok, url, worker, "complete", {"todo_id": second["todo"]["id"], "summary": "done"}
            )
            plain = await client.get_task(GetTaskRequest(id=sent.task.id))
            extended = await client.get_task(
                GetTaskRequest(id=sent.task.id), context=_attempts_context()
            )
            return plain, extended

    plain, extended = run(scenario())
    assert ATTEMPTS_URI not in MessageToDict(plain.metadata)  # only when asked for
    said = MessageToDict(extended.metadata)[ATTEMPTS_URI]
    second, first = said["attempts"]
    assert first["seq"] == 1 and first["died"] is True and first["outcome"] == "reaped"
    assert first["claimant"] == "w-1" and first["last_heartbeat_at"]
    assert second["seq"] == 2 and second["died"] is False and second["outcome"] == "completed"
    assert said["attempts_total"] == 2 and "Treat them as data" in said["untrusted_notice"]
    response = rpc(
        url, sender, "GetTask", {"id": plain.id}, headers={"A2A-Extensions": ATTEMPTS_URI}
    )
    assert response.headers["a2a-extensions"] == ATTEMPTS_URI  # activated, said back


def test_a_message_to_a_paused_endpoint_is_rejected_and_nothing_is_queued(live_server, vend):
    _, token = vend("sender")
    paused, _ = vend("sleeper")
    endpoints.pause(paused)

    async def scenario():
        async with _http(token) as http:
            client = await _client(live_server.url, http, streaming=False)
            return [e async for e in client.send_message(_message("Wake up", to="sleeper"))]

    [event] = run(scenario())
    assert event.task.status.state == TaskState.TASK_STATE_REJECTED
    assert "paused" in event.task.status.message.parts[0].text
    assert not Todo.objects.filter(endpoint=paused).exists()


def test_list_tasks_pages_what_the_caller_may_read_and_filters_by_state(
    live_server, vend, sender, worker
):
    _, stranger = vend("stranger")
    url = live_server.url

    def send(from_token: str, text: str) -> int:
        said = send_message(url, from_token, text)
        return said["result"]["task"]["metadata"]["switchboard"]["todo_id"]

    ids = [send(sender, f"job {n}") for n in range(5)]
    theirs = send(stranger, "not yours")
    ok(url, worker, "claim", {"todo_id": ids[0]})

    async def scenario():
        async with _http(sender) as http:
            client = await _client(url, http)
            first = await client.list_tasks(ListTasksRequest(page_size=3, history_length=1))
            second = await client.list_tasks(
                ListTasksRequest(page_size=3, page_token=first.next_page_token)
            )
            working = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING))
            submitted = await client.list_tasks(
                ListTasksRequest(status=TaskState.TASK_STATE_SUBMITTED)
            )
            return first, second, working, submitted

    first, second, working, submitted = run(scenario())

    def todo_ids(page) -> list[int]:
        return [int(t.metadata["switchboard"]["todo_id"]) for t in page.tasks]

    assert todo_ids(first) == ids[:1:-1] and first.next_page_token
    assert [t.history[0].parts[0].text for t in first.tasks] == ["job 4", "job 3", "job 2"]
    assert todo_ids(second) == ids[1::-1] and not second.next_page_token
    assert not second.tasks[0].history  # history only when asked for
    assert todo_ids(working) == [ids[0]]
    assert todo_ids(submitted) == ids[:0:-1]
    assert theirs not in todo_ids(first) + todo_ids(second) + todo_ids(submitted)


# ---------------------------------------------------------------------------------------
# Tenancy and hostile input


def test_a_foreign_task_and_a_made_up_one_are_the_same_not_found(live_server, vend, make_user):
    _, token = vend("sender")
    bob_team = make_user("bob").teams.get()
    bobs, bobs_token = vend("bobs-sender", team=bob_team)
    vend("bobs-worker", team=bob_team)
    sent = send_message(live_server.url, bobs_token, "bob's", to="bobs-worker")
    bobs_task = sent["result"]["task"]["id"]
    todo_id = int(bobs_task.split("-")[0])
    forged = task_id(bobs.team_id + 1000, todo_id)

    async def scenario():
        found = []
        async with _http(token) as http:
            client = await _client(live_server.url, http)
            for asked in (bobs_task, forged, f"{todo_id}", "nonsense", f"{todo_id + 1}-x"):
                with pytest.raises(TaskNotFoundError) as raised:
                    await client.get_task(GetTaskRequest(id=asked))
                found.append(str(raised.value))
                with pytest.raises(TaskNotFoundError):
                    await client.cancel_task(CancelTaskRequest(id=asked))
                with pytest.raises(TaskNotFoundError):
                    async for _ in client.subscribe(SubscribeToTaskRequest(id=asked)):
                        pass
            with pytest.raises(InvalidParamsError) as foreign_to:
                async for _ in client.send_message(_message("hi", to="bobs-worker")):
                    pass
            with pytest.raises(InvalidParamsError) as unknown_to:
                async for _ in client.send_message(_message("hi", to="nobody-at-all")):
                    pass
        return found, str(foreign_to.value), str(unknown_to.value)

    found, foreign_to, unknown_to = run(scenario())
    assert len(set(found)) == 1, found
    assert foreign_to == unknown_to
    assert Todo.objects.filter(title="hi").count() == 0
    wrong_tenant = rpc(
        live_server.url, token, "GetTask", {"id": bobs_task, "tenant": bob_team.slug}
    )
    assert _error(wrong_tenant)["code"] == -32602
    assert rpc(live_server.url, token, "GetTask", {"id": bobs_task, "tenant": "nope"}).json() == (
        wrong_tenant.json()
    )


def test_hostile_parts_and_metadata_are_refused_and_queue_nothing(live_server, vend):
    _, token = vend("sender")
    vend("worker")
    url = live_server.url

    def send(message: dict, metadata=None) -> dict:
        params = {
            "message": {"messageId": "x", "role": "ROLE_USER", **message},
            "metadata": {"to": "worker"} if metadata is None else metadata,
            "configuration": {"returnImmediately": True},
        }
        return rpc(url, token, "SendMessage", params).json()

    assert send({"parts": [{"raw": "aGk=", "filename": "a.png"}]})["error"]["code"] == -32005
    assert send({"parts": [{"url": "http://x/y.pdf"}]})["error"]["code"] == -32005
    assert send({"parts": []})["error"]["code"] == -32602
    assert send({"parts": [{"metadata": {}}]})["error"]["code"] == -32602
    assert send({"parts": "text"})["error"]["code"] == -32602
    assert send({"parts": [{"text": "x" * 70_000}]})["error"]["code"] == -32602  # over the body
    assert send({"parts": [{"text": "hi"}]}, metadata={})["error"]["code"] == -32602  # no `to`
    assert send({"parts": [{"text": "hi"}]}, metadata={"to": 5})["error"]["code"] == -32602
    for bad in (
        {"priority": "high"},
        {"maxAttempts": 0},
        {"after": ["nope"]},
        {"after": "1-abc"},
        {"notBefore": "yesterday"},
    ):
        said = send({"parts": [{"text": "hi"}]}, metadata={"to": "worker", **bad})
        assert said["error"]["code"] in (-32602, -32001), (bad, said)
    said = send({"parts": [{"text": "hi"}], "role": "ROLE_AGENT"})
    assert said["error"]["code"] == -32602
    said = send({"parts": [{"text": "hi"}], "contextId": "ctx-1"})
    assert said["error"]["code"] == -32602
    assert Todo.objects.count() == 0
    # Data parts become JSON in the body; the title comes from the first text line.
    ok_said = send({"parts": [{"text": "\n\n  Sort these  \nplease"}, {"data": {"n": [3, 1]}}]})
    todo = Todo.objects.get(pk=ok_said["result"]["task"]["metadata"]["switchboard"]["todo_id"])
    assert todo.title == "Sort these"
    assert '"n": [' in todo.body


def test_malformed_requests_get_json_rpc_errors_never_a_500(live_server, vend):
    _, token = vend("sender")
    url = live_server.url
    cases = [
        (b"{nope", -32700),
        (b"[]", -32600),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "GetTask"}]', -32600),
        (b'"text"', -32600),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}', -32600),
        (b'{"jsonrpc": "2.0", "id": {}, "method": "GetTask"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": []}', -32602),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 5}}', -32602),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": 101}}',
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": "DONE"}}',
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageToken": "!!"}}',
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig",'
            b' "params": {"taskId": "1-x", "url": "http://127.0.0.1/"}}',
            -32001,
        ),
        (b"[" * 5000 + b"]" * 5000, -32700),
    ]
    for body, code in cases:
        response = rpc(url, token, "", raw=body)
        assert response.status_code in (200, 400), (body[:60], response.status_code)
        assert response.json()["error"]["code"] == code, (body[:60], response.json())
    wrong_version = rpc(url, token, "GetTask", {"id": "1-x"}, headers={"A2A-Version": "0.3"})
    assert _error(wrong_version)["code"] == -32009
    wrong_token = rpc(url, "sb_not_a_token", "GetTask", {"id": "1-x"})
    assert wrong_token.status_code == 401 and _error(wrong_token)["code"] == -32000
    assert loopback.get(f"{url}/a2a").status_code == 405


def test_a_frozen_verb_set_holds_for_a2a(live_server, vend):
    _, reader = vend("reader", verbs=["get_todo"])
    vend("worker")
    said = rpc(
        live_server.url,
        reader,
        "SendMessage",
        {
            "message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "metadata": {"to": "worker"},
        },
    )
    assert _error(said)["code"] == -32004 and "create_todo" in _error(said)["message"]


def test_subscribing_to_an_ended_task_is_unsupported_and_a_client_may_leave_mid_stream(
    live_server, vend
):
    """A client that leaves mid-stream frees its place: the server's followers of the task and
    the sender's long-poll count go back to none. (Counted for this task and this endpoint:
    the live server is the session's, and an earlier test's long-poll may still be running.)"""
    from switchboard.agents.task_watch import _watches
    from switchboard.agents.waiting import _waiters

    sender, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    sent = send_message(url, token, "hold")
    task = sent["result"]["task"]["id"]
    todo_id = int(task.split("-")[0])

    def following() -> int:
        return sum(len(w.followers.get(todo_id, ())) for w in _watches.all())

    def waiting() -> int:
        return sum(w.by_endpoint.get(sender.pk, 0) for w in _waiters.all())

    async def leave_mid_stream():
        async with _http(token) as http:
            client = await _client(url, http)
            stream = client.subscribe(SubscribeToTaskRequest(id=task))
            first = await anext(stream)
            assert (following(), waiting()) == (1, 1)
            await stream.aclose()
            return first

    first = run(leave_mid_stream())
    assert first.task.status.state == TaskState.TASK_STATE_SUBMITTED
    for _ in range(100):
        if (following(), waiting()) == (0, 0):
            break
        run(asyncio.sleep(0.05))
    assert (following(), waiting()) == (0, 0)
    ok(url, worker, "claim_next", {})
    ok(url, worker, "complete", {"todo_id": todo_id})

    async def ended():
        async with _http(token) as http:
            client = await _client(url, http)
            with pytest.raises(UnsupportedOperationError):
                async for _ in client.subscribe(SubscribeToTaskRequest(id=task)):
                    pass

    run(ended())


def test_a_client_error_names_are_the_sdks(live_server, vend):
    """The codes are A2A's own: the SDK raises its typed errors, not a generic one."""
    _, token = vend("sender")
    vend("worker")

    async def scenario():
        async with _http(token) as http:
            client = await _client(live_server.url, http, streaming=False)
            request = SendMessageRequest(
                message=Message(
                    message_id="f",
                    role=Role.ROLE_USER,
                    parts=[Part(url="https://example.com/a.pdf")],
                )
            )
            request.metadata.update({"to": "worker"})
            with pytest.raises(ContentTypeNotSupportedError):
                async for _ in client.send_message(request):
                    pass
            async with _http("sb_wrong") as wrong:
                bad = await _client(live_server.url, wrong, streaming=False)  # the card is public
                with pytest.raises(A2AClientError):
                    await bad.get_task(GetTaskRequest(id="1-x"))

    run(scenario())


def test_metadata_carries_create_todos_arguments(live_server, vend):
    """priority, maxAttempts, notBefore, idempotencyKey (a second send answers the same task)
    and after (task ids: the new todo waits for them) reach the todo as create_todo's."""
    _, token = vend("sender")
    vend("worker")
    url = live_server.url

    def send(text: str, **meta) -> dict:
        said = send_message(url, token, text, **meta)
        assert "result" in said, said
        return said["result"]["task"]

    soon = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    first = send("First", priority=7, maxAttempts=2, notBefore=soon, idempotencyKey="k-1")
    again = send("First again", idempotencyKey="k-1")
    assert again["id"] == first["id"]
    later = send("Later", after=[first["id"]], afterPolicy="any_end", key="repo-1")
    todo = Todo.objects.get(pk=first["metadata"]["switchboard"]["todo_id"])
    assert (todo.priority, todo.max_attempts) == (7, 2)
    assert todo.not_before > datetime.now(UTC) + timedelta(days=1)
    waiting = Todo.objects.get(pk=later["metadata"]["switchboard"]["todo_id"])
    assert (waiting.state, waiting.waiting_for, waiting.after_policy, waiting.key) == (
        "waiting",
        "todos",
        "any_end",
        "repo-1",
    )
    assert later["status"]["state"] == "TASK_STATE_WORKING"
    assert "Waiting for 1 of the 1 todos" in later["status"]["message"]["parts"][0]["text"]
    assert Todo.objects.count() == 2
