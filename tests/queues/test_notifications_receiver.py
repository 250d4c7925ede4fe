"""The receiver docs/notifications.md shows ("Forwarding questions to chat", with the signature
check of "Checking the signature"), run as written there: the two Python blocks are taken from
the page, run as a process of their own, and given real deliveries that the outbox's sender
signed, after an agent asked over the served HTTP API. It checks the signature, forwards a
question to a chat webhook (a receiver here) escaped, and ignores other events."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from switchboard.queues import outbox, teams, transitions
from switchboard.queues.models import Delivery
from switchboard.queues.transitions import Actor
from tests import loopback
from tests.crash.harness import free_port

DOC = Path(__file__).resolve().parents[2] / "docs" / "notifications.md"
BOARD = "https://board.example.test"
QUESTION = "Drop billing.legacy_rate? <!channel> <https://evil.example|approve> & ```run this```"

pytestmark = pytest.mark.django_db(transaction=True)  # the live server reads committed rows


def _block_after(heading: str, *, language: str = "python") -> str:
    """The first code block in ``language`` of the page after ``heading``."""
    text = DOC.read_text()
    found = re.search(re.escape(heading) + rf".*?```{language}\n(.*?)```\n", text, re.DOTALL)
    assert found, f"no {language} block after {heading!r} in {DOC}"
    return found.group(1)


def test_the_documented_receiver_is_short_and_checks_signatures():
    receiver = _block_after("### Forwarding questions to chat")
    check = _block_after("### Checking the signature")
    assert "is_from_switchboard(SECRET, self.headers, body)" in receiver
    assert "def is_from_switchboard(" in check
    code_lines = [line for line in receiver.splitlines() if line.strip()]
    assert len(code_lines) <= 22  # "a ten-line receiver", near enough, its setup included


@pytest.fixture
def documented_receiver(tmp_path, receiver):
    """The page's receiver, running: returns (its URL, the chat receiver it forwards to,
    set_secret). It starts once the secret is known (the sink's, shown once when made)."""
    chat = receiver()
    script = tmp_path / "questions_to_chat.py"
    script.write_text(
        _block_after("### Checking the signature")
        + "\n\n"
        + _block_after("### Forwarding questions to chat")
    )
    port = free_port()
    started: list[subprocess.Popen] = []
    log = tmp_path / "receiver.log"

    def start(secret: str) -> None:
        env = {"SECRET": secret, "CHAT_URL": chat.url, "BOARD_URL": BOARD, "PORT": str(port)}
        with log.open("w") as out:
            process = subprocess.Popen(
                [sys.executable, str(script)],
                env={"PATH": "/usr/bin:/bin", **env},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        started.append(process)
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, log.read_text()
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)

    try:
        yield f"http://127.0.0.1:{port}/questions", chat, start
    finally:
        for process in started:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _call(live_server, token: str, verb: str, body: dict) -> dict:
    response = loopback.post(
        f"{live_server.url}/api/v1/{verb}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _wait_for(predicate, what: str, seconds: float = 10.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.05)


def test_a_question_asked_over_http_reaches_chat_through_the_documented_receiver(
    allowed, live_server, documented_receiver, vend, user, team
):
    url, chat, start = documented_receiver
    sink, secret = teams.add_sink(team, url, by=user)
    start(secret)
    endpoint, token = vend("db-migrator")
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="migrate <b>billing</b>")

    claimed = _call(live_server, token, "claim_next", {"claimant": "run-42"})
    assert claimed["todo"]["id"] == todo.id
    released = _call(
        live_server,
        token,
        "release",
        {"todo_id": todo.id, "question": QUESTION, "choices": ["go ahead", "stop"]},
    )
    assert released["todo"]["state"] == "waiting"

    assert outbox.deliver_due() == 1  # the sender signs and POSTs; the receiver says 204
    [delivery] = Delivery.objects.filter(kind="todo.waiting")
    assert delivery.sink_id == sink.pk and delivery.last_status == 204
    # The page's example payload has the fields the real one has, no more, no fewer.
    example = json.loads(_block_after("## Questions (`todo.waiting`)", language="json"))
    assert example.keys() == delivery.payload.keys()
    assert example["todo"].keys() == delivery.payload["todo"].keys()
    assert example["question"].keys() == delivery.payload["question"].keys()
    text = example["question"]["text"]
    assert example["question"]["text_bytes"] == len(text.encode())
    _wait_for(lambda: len(chat.requests) == 1, "message in the chat")
    [message] = chat.requests
    assert message.headers["content-type"] == "application/json"
    said = message.json["text"]
    assert said.startswith(f"db-migrator asks, on <{BOARD}/todos/{todo.id}/|#{todo.id} ")
    assert "migrate &lt;b&gt;billing&lt;/b&gt;>" in said
    # The agent's words, escaped: no mention, no link, no way out of the code block.
    assert "&lt;!channel&gt;" in said and "<!channel>" not in said
    assert "&lt;https://evil.example|approve&gt;" in said
    assert "&amp;" in said and "'''run this'''" in said
    assert said.endswith("```") and said.count("```") == 2


def test_the_documented_receiver_refuses_what_the_secret_did_not_sign(
    allowed, documented_receiver, endpoint, make_todo, user, team
):
    url, chat, start = documented_receiver
    sink, secret = teams.add_sink(team, url, by=user)
    start(secret)
    todo = make_todo("migrate billing")
    transitions.claim(Actor.agent(endpoint), todo.id)
    transitions.release(Actor.agent(endpoint), todo.id, question="Go ahead?")
    [delivery] = Delivery.objects.filter(kind="todo.waiting")
    body = json.dumps(delivery.payload).encode()

    def post(key: str, *, at: int | None = None, sent: bytes = body) -> int:
        stamp = str(int(time.time()) if at is None else at)
        mac = hmac.new(key.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
        headers = {
            "Content-Type": "application/json",
            "X-Switchboard-Event": "todo.waiting",
            "X-Switchboard-Delivery": str(delivery.pk),
            "X-Switchboard-Timestamp": stamp,
            "X-Switchboard-Signature": f"sha256={mac}",
        }
        return loopback.post(url, content=sent, headers=headers, timeout=10).status_code

    assert post("sbw_not-the-secret") == 401
    assert post(secret, at=int(time.time()) - 3600) == 401  # an old request replayed
    assert post(secret, sent=body.replace(b"Go ahead?", b"Go ahead!")) == 401  # altered
    assert chat.requests == []
    assert post(secret) == 204  # signed as the sender signs: forwarded
    _wait_for(lambda: len(chat.requests) == 1, "message in the chat")


def test_the_documented_receiver_takes_a_dead_letter_and_forwards_nothing(
    allowed, documented_receiver, endpoint, make_todo, user, team
):
    url, chat, start = documented_receiver
    _, secret = teams.add_sink(team, url, by=user)
    start(secret)
    todo = make_todo("dies", max_attempts=1)
    transitions.claim(Actor.agent(endpoint), todo.id)
    transitions.fail(Actor.agent(endpoint), todo.id, summary="no disk")

    assert outbox.deliver_due() == 1
    [delivery] = Delivery.objects.filter(kind="dead_letter")
    assert delivery.last_status == 204
    time.sleep(0.3)  # a forward, had there been one, is sent right after the 204
    assert chat.requests == []
