"""``switchboard relay --a2a URL`` (issue 45): each claimed todo goes to a remote A2A agent, and
the remote task's end is the attempt's report. The remote agent here is the live server's own
``/a2a`` (a message to the endpoint ``remote``, worked by this test over the HTTP API), so the
todo the relay holds and the one the remote agent works are two todos of one ledger."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from switchboard.queues import transitions
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests.agents.api_helpers import ok
from tests.queues.helpers import attempts_of
from tests.test_relay import fast, run_relay, start_relay

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _todo_for_the_relay(vend, relay_env, url: str, title: str) -> tuple[Todo, str, Callable]:
    """A todo titled ``title`` on the endpoint ``dispatcher``'s queue, the token of the endpoint
    ``remote`` (the A2A agent's worker) and ``start()``, which starts the dispatcher's relay for
    one todo, sending it to ``remote`` through the live server's A2A (the gateway's token)."""
    sender, _ = vend("sender")
    dispatcher, token = vend("dispatcher")
    _, gateway = vend("gateway")
    _, remote = vend("remote")
    todo, _ = transitions.create_todo(Actor.agent(sender), endpoint=dispatcher, title=title)
    env = relay_env(token, SWITCHBOARD_A2A_TOKEN=gateway)
    options = ("--a2a", url, "--a2a-to", "remote", "--max-todos", "1", *fast())
    return todo, remote, lambda: start_relay(url, env, *options, command=())


def _remote_todo(title_part: str) -> Todo:
    return Todo.objects.get(endpoint__agent_id="remote", body__contains=title_part)


def test_a_todo_goes_to_the_a2a_agent_and_its_completion_completes_it(live_server, vend, relay_env):
    url = live_server.url
    todo, remote, start = _todo_for_the_relay(vend, relay_env, url, "summarise the incident report")
    relay = start()
    try:
        claimed = ok(url, remote, "claim_next", {"wait_seconds": 20})
        assert claimed["todo"]["title"] == "summarise the incident report"
        assert "Untrusted data" in claimed["todo"]["body"]  # context.md follows
        ok(url, remote, "complete", {"todo_id": claimed["todo"]["id"],
                                     "result": {"pages": 2}, "summary": "Two pages, sent."})  # fmt: skip
        stdout, stderr = relay.communicate(timeout=30)
    finally:
        relay.kill()
    assert relay.returncode == 0, stderr
    todo = Todo.objects.get(pk=todo.id)
    assert todo.state == "done" and todo.result == {"pages": 2}, stderr
    [attempt] = attempts_of(todo.id)
    assert attempt.summary.startswith("Two pages, sent.")
    assert attempt.summary.splitlines()[-1].startswith("A2A task: ")
    assert "each todo goes to the A2A agent" in stderr


def test_a_question_of_the_a2a_agent_is_asked_here_and_the_answer_goes_back(
    live_server, vend, relay_env, user
):
    """The remote agent needs input: the relay's todo waits on the question (with its
    choices); a person answers it on the Board; the relay's next attempt sends the answer to
    the same remote task, which the remote worker reads, and completes."""
    url = live_server.url
    todo, remote, start = _todo_for_the_relay(vend, relay_env, url, "deploy the billing service")
    relay = start()
    try:
        claimed = ok(url, remote, "claim_next", {"wait_seconds": 20})
        ok(url, remote, "release", {"todo_id": claimed["todo"]["id"],
                                    "question": "Which region?", "choices": ["eu", "us"]})  # fmt: skip
        _, stderr = relay.communicate(timeout=30)
    finally:
        relay.kill()
    assert relay.returncode == 0, stderr
    todo = Todo.objects.get(pk=todo.id)
    assert (todo.state, todo.waiting_for) == ("waiting", "people"), stderr
    question = todo.questions.get()
    assert question.text == "Which region?" and question.choices == ["eu", "us"]
    transitions.answer(Actor.human(user), todo.id, value="eu")

    relay = start()
    try:
        again = ok(url, remote, "claim_next", {"wait_seconds": 20})
        assert again["todo"]["id"] == claimed["todo"]["id"]  # the same remote task
        assert again["prior_attempts"][0]["question"]["answer"]["value"] == "eu"
        ok(
            url,
            remote,
            "complete",
            {"todo_id": again["todo"]["id"], "result": {"region": "eu-west-1"}},
        )
        _, stderr = relay.communicate(timeout=30)
    finally:
        relay.kill()
    assert relay.returncode == 0, stderr
    todo = Todo.objects.get(pk=todo.id)
    assert todo.state == "done" and todo.result == {"region": "eu-west-1"}, stderr
    assert "sending the answer to the A2A task" in stderr
    assert Todo.objects.filter(endpoint__agent_id="remote").count() == 1


def test_a2a_options_are_checked(live_server, vend, relay_env):
    _, token = vend("dispatcher")
    url = live_server.url
    status, _, stderr = run_relay(url, relay_env(token), "--a2a", url)  # with the stub command
    assert status == 2 and "name no command" in stderr
    status, _, stderr = run_relay(url, relay_env(token), "--a2a", "ftp://x", command=())
    assert status == 2 and "an http(s) URL" in stderr


@pytest.fixture
def odd_agent():
    """A remote "A2A agent" on loopback whose every answer is the JSON the test sets."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    said: dict = {"body": []}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # no Agent Card: the URL is the interface
            self.send_response(404)
            self.end_headers()

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps(said["body"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", said
    finally:
        server.shutdown()


@pytest.mark.django_db(transaction=False)
def test_an_answer_of_another_shape_is_the_remote_agents_refusal_not_a_dead_slot(odd_agent):
    """A remote answer that is no JSON object, or a SendMessage result that holds a bare
    message instead of a task (A2A allows one), is a RemoteError, which the attempt reports as
    a failure, not an exception that ends the relay's slot and leaves the lease to lapse."""
    from switchboard.relay.remote import Agent, RemoteError, _data, _task, _texts

    url, said = odd_agent
    agent = Agent(url, "t")
    for body in ([1, 2], "text", None):
        said["body"] = body
        with pytest.raises(RemoteError, match="other than a JSON object"):
            agent.call("SendMessage", {})
    said["body"] = {"jsonrpc": "2.0", "id": "1", "result": {"message": {"parts": []}}}
    with pytest.raises(RemoteError, match="holds no task"):
        _task(agent.call("SendMessage", {}), inside=True)
    for result in ([], {"task": "x"}, {"task": {"id": 5}}):
        with pytest.raises(RemoteError):
            _task(result, inside=True)
    odd = _task({"id": "r1", "status": "working", "artifacts": "none"})
    assert odd["status"] == {} and odd["artifacts"] == []
    kept = _task({"id": "r1", "status": {"state": "S", "message": "hi"}})
    assert kept["status"] == {"state": "S"}
    # A message's or an artifact's parts of another shape read as none, not a TypeError.
    for parts in (5, "text", {"text": "a"}, None):
        assert _texts(parts) == [] and _data(parts) == []
    mixed = [{"text": "a"}, 3, {"text": 4}, {"data": {"k": 1}}]
    assert _texts(mixed) == ["a"] and _data(mixed) == [{"k": 1}]
