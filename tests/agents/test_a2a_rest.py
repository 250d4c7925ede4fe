"""A2A's HTTP+JSON binding (``/a2a/rest``, agents/a2a_rest.py): the ``a2a-sdk`` client told to
use it, and raw requests for its routes, query parameters and errors."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from tests import loopback
from tests.agents.api_helpers import ok
from tests.agents.test_a2a import _message

pytestmark = pytest.mark.django_db(transaction=True)


def _client(url: str, http: httpx.AsyncClient, *, streaming: bool = True):
    config = ClientConfig(
        httpx_client=http, supported_protocol_bindings=["HTTP+JSON"], streaming=streaming
    )
    return create_client(url, config)


def test_the_sdk_over_http_json_sends_follows_lists_and_cancels(live_server, vend, settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True
    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url

    async def scenario():
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            client = await _client(url, http)
            stream = client.send_message(_message("Via REST", to="worker"))
            first = await anext(stream)
            claimed = await asyncio.to_thread(ok, url, worker, "claim_next", {})
            await asyncio.to_thread(
                ok, url, worker, "complete", {"todo_id": claimed["todo"]["id"], "result": 3}
            )
            rest = [event async for event in stream]
            done = await client.get_task(GetTaskRequest(id=first.task.id, history_length=1))
            other = _message("Second", to="worker")
            other.configuration.return_immediately = True
            polite = await _client(url, http, streaming=False)
            second = [e async for e in polite.send_message(other)][0].task
            config = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=second.id, url="http://127.0.0.1:9/hook")
            )
            listed = await client.list_tasks(
                ListTasksRequest(status=TaskState.TASK_STATE_SUBMITTED, page_size=10)
            )
            canceled = await client.cancel_task(CancelTaskRequest(id=second.id))
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=second.id + "x"))
            with pytest.raises(InvalidParamsError):  # to no endpoint
                async for _ in client.send_message(_message("?")):
                    pass
            return first, rest, done, second, config, listed, canceled

    first, rest, done, second, config, listed, canceled = asyncio.run(scenario())
    assert first.task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert MessageToDict(done.artifacts[0])["parts"][0]["data"] == 3
    assert [m.parts[0].text for m in done.history] == ["Via REST"]
    assert config.task_id == second.id and config.url == "http://127.0.0.1:9/hook"
    assert [t.id for t in listed.tasks] == [second.id]
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


def test_routes_query_parameters_tenants_and_errors(live_server, vend, team):
    _, token = vend("sender")
    vend("worker")
    url = f"{live_server.url}/a2a/rest"
    auth = {"Authorization": f"Bearer {token}"}
    sent = loopback.post(f"{url}/message:send", headers=auth, json={
        "message": {"messageId": "x", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "metadata": {"to": "worker"}, "configuration": {"returnImmediately": True}})  # fmt: skip
    assert sent.status_code == 200, sent.text
    task = sent.json()["task"]["id"]  # bare: no JSON-RPC envelope
    assert loopback.get(f"{url}/tasks/{task}", headers=auth).json()["id"] == task
    assert loopback.get(f"{url}/{team.slug}/tasks/{task}", headers=auth).json()["id"] == task
    listed = loopback.get(
        f"{url}/tasks", params={"pageSize": "1", "historyLength": "0"}, headers=auth
    )
    assert [t["id"] for t in listed.json()["tasks"]] == [task]

    def error(response: httpx.Response) -> tuple[int, str, str]:
        said = response.json()["error"]
        return response.status_code, said["status"], said["details"][0]["reason"]

    assert error(loopback.get(f"{url}/tasks/1-nope", headers=auth)) == (
        404,
        "NOT_FOUND",
        "TASK_NOT_FOUND",
    )
    assert error(loopback.get(f"{url}/nothing/here/at/all", headers=auth)) == (
        404,
        "NOT_FOUND",
        "METHOD_NOT_FOUND",
    )
    assert error(loopback.get(f"{url}/tasks", params={"pageSize": "many"}, headers=auth))[0] == 400
    for odd in ("--5", "-", "5-"):  # a whole number or nothing: never a 500
        assert error(loopback.get(f"{url}/tasks", params={"pageSize": odd}, headers=auth))[0] == 400
    # The path names the task: a query's id names no other.
    other = f"{task.split('-')[0]}-nope"
    assert (
        loopback.get(f"{url}/tasks/{task}", params={"id": other}, headers=auth).json()["id"] == task
    )
    assert error(loopback.get(f"{url}/tasks", params={"pageSize": "500"}, headers=auth)) == (
        400,
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )
    assert (
        error(loopback.get(f"{url}/other-team/tasks/{task}", headers=auth))[2] == "INVALID_PARAMS"
    )
    assert error(loopback.post(f"{url}/message:send", headers=auth, content=b"{nope"))[0] == 400
    assert error(loopback.post(f"{url}/message:send", headers=auth, content=b"[1]"))[0] == 400
    refused = loopback.get(f"{url}/tasks/{task}")
    assert refused.status_code == 401 and refused.json()["error"]["status"] == "UNAUTHENTICATED"
    assert error(loopback.delete(f"{url}/tasks/{task}", headers=auth))[0] == 404
