"""A2A push-notification configs (issue 45): set with ``SendMessage``'s configuration or the
``*TaskPushNotificationConfig`` methods (driven by the ``a2a-sdk`` client), sent through the
signed webhook outbox at each state change of the todo, to a receiver this test runs."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import TaskNotFoundError

from switchboard.queues import outbox
from switchboard.queues.models import Delivery, TaskPushConfig, Todo
from tests.agents.api_helpers import ok
from tests.agents.test_a2a import rpc, send_message

pytestmark = pytest.mark.django_db(transaction=True)


class Receiver:
    """A webhook receiver on loopback: every POST's headers and JSON body."""

    def __init__(self) -> None:
        heard = self.heard = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 -- http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                heard.append((dict(self.headers), body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/a2a-push"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def states(self) -> list[str]:
        return [json.loads(body)["statusUpdate"]["status"]["state"] for _, body in self.heard]

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver(settings):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True  # the receiver is on loopback
    found = Receiver()
    yield found
    found.close()


def send(url: str, token: str, text: str, push: dict | None = None) -> dict:
    return send_message(url, token, text, push=push)


def set_config(url: str, token: str, task: str, /, **config) -> dict:
    """CreateTaskPushNotificationConfig over JSON-RPC of ``config`` (its own ``url`` and
    ``token`` among them) for ``task``: the JSON-RPC answer, whole."""
    return rpc(url, token, "CreateTaskPushNotificationConfig", {"taskId": task, **config}).json()


def test_a_task_pushes_its_states_signed_with_the_clients_token(live_server, vend, receiver):
    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    push = {
        "url": receiver.url,
        "token": "tok-123",
        "authentication": {"scheme": "Bearer", "credentials": "secret-abc"},
    }
    task = send(url, token, "Push me", push)["result"]["task"]
    claimed = ok(url, worker, "claim_next", {})
    assert outbox.deliver_due() == 1
    ok(url, worker, "complete", {"todo_id": claimed["todo"]["id"], "result": 1})
    assert outbox.deliver_due() == 1
    assert receiver.states() == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    headers, body = receiver.heard[-1]
    said = json.loads(body)["statusUpdate"]
    assert said["taskId"] == said["contextId"] == task["id"]
    assert headers["X-A2A-Notification-Token"] == "tok-123"
    assert headers["Authorization"] == "Bearer secret-abc"
    assert headers["X-Switchboard-Event"] == "task.push"
    stamp = headers["X-Switchboard-Timestamp"]
    mac = hmac.new(b"tok-123", stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    assert headers["X-Switchboard-Signature"] == f"sha256={mac}"


def test_configs_are_set_read_listed_and_deleted_by_the_sdk_and_only_by_their_endpoint(
    live_server, vend, receiver, make_user
):
    _, token = vend("sender")
    _, worker = vend("worker")
    _, other = vend("other")
    url = live_server.url
    task = send(url, token, "Configure me")["result"]["task"]["id"]

    async def scenario():
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
            client = await create_client(url, ClientConfig(httpx_client=http))
            made = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(
                    task_id=task,
                    id="ops",
                    url=receiver.url,
                    token="t1",
                    authentication=AuthenticationInfo(scheme="Basic", credentials="dTpw"),
                )
            )
            second = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task, url=receiver.url)
            )
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task, id="ops")
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task)
            )
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task, id=second.id)
            )
            after = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task)
            )
            with pytest.raises(TaskNotFoundError):
                await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task, id=second.id)
                )
            return made, second, got, listed, after

    made, second, got, listed, after = asyncio.run(scenario())
    assert made.id == "ops" and made.task_id == task and made.url == receiver.url
    assert got.authentication.scheme == "Basic" and got.token == "t1"
    assert len(second.id) == 16  # made for it
    assert sorted(c.id for c in listed.configs) == sorted(["ops", second.id])
    assert [c.id for c in after.configs] == ["ops"]
    assert Todo.objects.get(pk=int(task.split("-")[0])).push_configs == 1
    # The worker (its queue's endpoint: it may read the task) neither sees nor replaces it.
    theirs = rpc(url, worker, "ListTaskPushNotificationConfigs", {"taskId": task}).json()
    assert theirs["result"] == {"configs": []}
    replaced = set_config(url, worker, task, id="ops", url=receiver.url)
    assert (
        replaced["error"]["code"] == -32602 and "Another endpoint" in replaced["error"]["message"]
    )
    # An endpoint that may not read the task, another team's, a made-up id: not found alike.
    bob_team = make_user("bob").teams.get()
    _, bobs = vend("bobs", team=bob_team)
    for caller, asked in ((other, task), (bobs, task), (token, task + "x")):
        said = set_config(url, caller, asked, url=receiver.url)
        assert said["error"]["code"] == -32001, said
    assert TaskPushConfig.objects.count() == 1


def test_a_push_url_must_pass_the_ssrf_rules_and_a_refused_one_queues_nothing(
    live_server, vend, settings
):
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = False
    _, token = vend("sender")
    vend("worker")
    url = live_server.url
    for bad in (
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/x",
        "ftp://example.com/x",
        "http://10.0.0.7/x",
        "https://example.com/" + "a" * 490,  # 510 characters: past the 500
        "https://example.com/a\x00b",  # no header carries a NUL
    ):
        said = send(url, token, "nope", {"url": bad})
        assert said["error"]["code"] == -32602, (bad, said)
    for bad_header in (
        {"token": "a\r\nX-Evil: 1"},
        {"token": "t" * 129},  # it keys the signature too: at most 128
        {"id": "a b"},
        {"id": "x" * 65},
        {"url": 5},
        {"authentication": {"scheme": "Bearer x"}},
        {"authentication": {"scheme": "Bearer", "credentials": "é"}},
    ):
        said = send(url, token, "nope", {"url": "https://example.com/hook", **bad_header})
        assert said["error"]["code"] == -32602, (bad_header, said)
    assert Todo.objects.count() == 0 and TaskPushConfig.objects.count() == 0


def test_a_task_has_at_most_ten_configs_and_a_deleted_one_is_not_sent(live_server, vend, receiver):
    _, token = vend("sender")
    _, worker = vend("worker")
    url = live_server.url
    task = send(url, token, "Many")["result"]["task"]["id"]
    for n in range(10):
        said = set_config(url, token, task, id=f"c{n}", url=receiver.url)
        assert "result" in said, said
    eleventh = set_config(url, token, task, id="c10", url=receiver.url)
    assert eleventh["error"]["code"] == -32602 and "at most 10" in eleventh["error"]["message"]
    again = set_config(url, token, task, id="c0", url=receiver.url, token="new")  # replaces c0
    assert again["result"]["token"] == "new"
    ok(url, worker, "claim_next", {})
    assert Delivery.objects.filter(kind="task.push").count() == 10
    for n in range(9):
        rpc(url, token, "DeleteTaskPushNotificationConfig", {"taskId": task, "id": f"c{n}"})
    assert outbox.deliver_due() == 1
    assert len(receiver.heard) == 1
    gone = Delivery.objects.filter(kind="task.push", gave_up_at__isnull=False)
    assert gone.count() == 9
    assert {d.last_error for d in gone} == {"not sent: its push config was deleted"}


def test_every_config_method_reads_the_task_as_get_task_does(
    live_server, vend, make_user, receiver
):
    """Get, List and Delete as Create: the get_todo verb held, the task readable, another
    team's task and a made-up id one "not found" with one message; a config is its setter's
    alone (the worker cannot delete it); an unknown config id or none is not found, and bad
    input is invalid params, with nothing changed."""
    _, token = vend("sender")
    _, worker = vend("worker")
    _, sender_only = vend("sender-only", verbs=["create_todo"])
    _, bystander = vend("bystander")  # of the team, neither the task's sender nor its queue
    url = live_server.url
    task = send(url, token, "Watched", {"id": "ops", "url": receiver.url})["result"]["task"]["id"]
    bob_team = make_user("bob").teams.get()
    _, bobs = vend("bobs", team=bob_team)
    methods = (
        ("CreateTaskPushNotificationConfig", {"url": receiver.url}),
        ("GetTaskPushNotificationConfig", {"id": "ops"}),
        ("ListTaskPushNotificationConfigs", {}),
        ("DeleteTaskPushNotificationConfig", {"id": "ops"}),
    )
    # Nor set with the task by SendMessage, which create_todo alone allows: nothing queued.
    before = Todo.objects.count()
    inline = send(url, sender_only, "Watched too", {"id": "ops", "url": receiver.url})
    assert inline["error"]["code"] == -32004, inline
    assert Todo.objects.count() == before
    for method, extra in methods:
        refused = rpc(url, sender_only, method, {"taskId": task, **extra}).json()
        assert refused["error"]["code"] == -32004, (method, refused)  # UnsupportedOperation
        made_up = rpc(url, token, method, {"taskId": task + "x", **extra}).json()
        assert made_up["error"]["code"] == -32001, (method, made_up)
        for caller in (bobs, bystander):
            said = rpc(url, caller, method, {"taskId": task, **extra}).json()
            assert said["error"] == made_up["error"], (method, said)
        for bad_task in (5, None, "x" * 65):
            said = rpc(url, token, method, {"taskId": bad_task, **extra}).json()
            assert said["error"]["code"] in (-32001, -32602), (method, bad_task, said)
    # The worker may read the task, but the sender's config is not its to delete or read.
    for method in ("DeleteTaskPushNotificationConfig", "GetTaskPushNotificationConfig"):
        said = rpc(url, worker, method, {"taskId": task, "id": "ops"}).json()
        assert said["error"]["code"] == -32001, (method, said)
    for asked in ({"id": "nope"}, {}):
        got = rpc(url, token, "GetTaskPushNotificationConfig", {"taskId": task, **asked}).json()
        assert got["error"]["code"] == -32001, got
    gone = rpc(url, token, "DeleteTaskPushNotificationConfig", {"taskId": task, "id": "nope"})
    assert gone.json()["error"]["code"] == -32001
    assert list(TaskPushConfig.objects.values_list("config_id", flat=True)) == ["ops"]
    assert Todo.objects.get(pk=int(task.split("-")[0])).push_configs == 1


def test_two_configs_set_at_once_never_pass_the_limit(make_todo, endpoint):
    """Nine configs, and two new ones set at the same moment: they take turns on the todo's
    row, so one is refused and the count the push trigger reads stays the configs' number.
    (Held on a lock here so that both are in flight at once: counted without it, both saw
    nine and both were kept.)"""
    import psycopg
    from django.db import connection

    from switchboard import dburl
    from switchboard.queues import db, push
    from switchboard.queues.errors import Conflict

    todo = make_todo("watched")

    def set_config(config_id: str):
        return db.run(
            push.set_plan(
                endpoint,
                todo.id,
                config_id=config_id,
                task_id="t",
                url="https://e.x/",
                token="",
                auth_scheme="",
                auth_credentials="",
            )  # fmt: skip
        )

    for n in range(9):
        set_config(f"c{n}")
    url = dburl.build(connection.settings_dict)
    outcomes: list[str] = []

    def attempt(config_id: str) -> None:
        try:
            set_config(config_id)
            outcomes.append("kept")
        except Conflict:
            outcomes.append("refused")
        finally:
            connection.close()  # this thread's

    threads = [threading.Thread(target=attempt, args=(f"new{n}",)) for n in range(2)]
    with psycopg.connect(url) as holder, psycopg.connect(url, autocommit=True) as observer:
        holder.execute("SELECT 1 FROM todos WHERE id = %s FOR UPDATE", [todo.id])
        for thread in threads:
            thread.start()
        try:
            deadline, waiting = time.monotonic() + 10, 0
            while time.monotonic() < deadline and waiting < 2 and len(outcomes) < 2:
                waiting = observer.execute(  # in this worker's database, not another test's
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = current_database() AND wait_event_type = 'Lock'"
                ).fetchone()[0]
                time.sleep(0.02)
        finally:
            holder.rollback()
            for thread in threads:
                thread.join(timeout=10)
    assert waiting == 2, f"both sets in flight at once; saw {waiting} waiting, {outcomes}"
    assert sorted(outcomes) == ["kept", "refused"]
    assert TaskPushConfig.objects.filter(todo_id=todo.id).count() == 10
    assert Todo.objects.get(pk=todo.id).push_configs == 10
