"""switchboard.client beyond the verbs (which the API tests cover): its timeouts, its job loop
through refusals and lost answers (in front of the live server, a forwarding proxy that
records each exchange and can lose answers: tests/forwarding.py; the loop through a real
database outage is tests/crash/test_client_failover.py), and docs/api.md's MCP example run as
written."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from switchboard.client import (
    LONG_POLL_MARGIN_SECONDS,
    STOPPED,
    Backoff,
    Client,
    Job,
    SwitchboardError,
    read_timeout,
)
from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.forwarding import RecordingProxy
from tests.unanswered import first_connection_unanswered

live = pytest.mark.django_db(transaction=True)

API_DOCS = Path(__file__).parent.parent / "docs" / "api.md"


def test_a_call_after_a_timed_out_one_gets_a_fresh_connection():
    """A server that never answers the first connection and answers the second: the call
    after the timeout must not reuse the connection left mid-request."""
    with first_connection_unanswered() as url:
        client = Client(url, "token", timeout=0.5)
        with pytest.raises(TimeoutError):
            client.list_todos()

        assert client.list_todos() == {"todos": []}


def test_a_long_poll_is_read_for_longer_than_its_wait():
    assert read_timeout(45, "claim_next", {"wait_seconds": 30}) == 30 + LONG_POLL_MARGIN_SECONDS
    assert read_timeout(5, "claim_next", {"wait_seconds": 1}) == 1 + LONG_POLL_MARGIN_SECONDS
    assert read_timeout(5, "claim_next", {}) == 5
    assert read_timeout(5, "list_todos", {"wait_seconds": 30}) == 5


def _mcp_example() -> str:
    text = API_DOCS.read_text()
    start = text.index("With the official Python SDK")
    return re.search(r"```python\n(.*?)```", text[start:], re.DOTALL).group(1)


@pytest.mark.django_db(transaction=True)
def test_the_docs_mcp_example_runs_as_written_and_outlives_httpx2s_default_timeout(
    live_server, vend
):
    """docs/api.md's MCP example, run as a script against the live server: it claims a todo;
    on an empty queue it long-polls to the end of its wait (cut to 7 s from 20 to keep the
    test short), past httpx2's 5 s default read timeout, and prints a null todo."""
    endpoint, token = vend("mcp-reader")
    script = _mcp_example()
    assert "WAIT = 20" in script and "asyncio.run(main(" in script
    script = script.replace("WAIT = 20", "WAIT = 7")
    env = {**os.environ, "SWITCHBOARD_URL": live_server.url, "SWITCHBOARD_TOKEN": token}

    def run_example() -> subprocess.CompletedProcess:
        ran = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        return ran

    transitions.create_todo(Actor.agent(endpoint), title="for the mcp example")
    assert "for the mcp example" in run_example().stdout
    assert TodoAttempt.objects.get().claimant == "mcp/run-1"

    started = time.monotonic()
    assert "{'todo': None" in run_example().stdout
    assert time.monotonic() - started >= 7


# --- the job loop through refusals and lost answers (issue 41, item 6) ------------------------


@pytest.fixture
def proxy(live_server):
    with RecordingProxy(live_server.url) as recording:
        yield recording


class Loop(threading.Thread):
    """``Client.work()`` on a thread, completing each job: what it completed, and what it
    raised (the loop must not)."""

    def __init__(self, client: Client, **arguments) -> None:
        super().__init__(daemon=True)
        self.client, self.arguments = client, arguments
        self.stop = threading.Event()
        self.completed: list[dict] = []
        self.raised: BaseException | None = None
        self.ended_at: float | None = None

    def run(self) -> None:
        try:
            for job in self.client.work(stop=self.stop, **self.arguments):
                with job:
                    self.completed.append(job.complete(result={"by": "loop"}))
        except BaseException as error:
            self.raised = error
        finally:
            self.ended_at = time.monotonic()


def until(predicate, *, seconds: float = 20, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@live
def test_a_close_whose_answer_was_lost_is_sent_again_and_answered_as_replayed(proxy, vend):
    """The complete reaches the server, which completes the todo; its answer is lost (twice:
    the client's one quiet retry on a fresh connection included). The loop sends it again
    with the same attempt, is answered ``replayed`` with ``next: null``, long-polls as usual
    and works on."""
    _, token = vend("loses-answers")
    sb = Client(proxy.url, token, backoff=Backoff(first_seconds=0.05))
    first = sb.create_todo(title="first")["todo"]
    proxy.lose_answers("complete", 2)
    stop = threading.Event()
    ended = []
    for job in sb.work(wait_seconds=1, stop=stop, claimant="loop"):
        with job:
            ended.append(job.complete(result={"n": len(ended)}))
        if len(ended) == 1:
            sb.create_todo(title="second")
        else:
            stop.set()

    assert ended[0]["replayed"] is True and ended[0]["next"] is None
    assert ended[1]["replayed"] is False
    closes = [e for e in proxy.seen() if e.verb == "complete"]
    assert [e.status for e in closes] == [None, None, 200, 200]
    assert [e.asked["attempt_seq"] for e in closes[:3]] == [1, 1, 1]
    assert all("then" in e.asked for e in closes)  # the replayed close carried then too
    # After the replay, the loop long-polled for the next todo as usual.
    verbs = [e.verb for e in proxy.seen() if e.verb != "create_todo"]
    assert verbs[verbs.index("complete") + 3] == "claim_next", verbs
    [attempt] = TodoAttempt.objects.filter(todo_id=first["id"])
    assert (attempt.outcome, attempt.result) == ("completed", {"n": 0})
    assert set(Todo.objects.values_list("state", flat=True)) == {"done"}


@live
def test_the_loop_waits_at_least_what_retry_after_asks_and_works_on(proxy, vend, settings):
    """No long-poll is let wait (the endpoint's cap at 0): each claim_next is refused 429
    with ``Retry-After: 2``; the loop tries again no sooner, and works once the cap is back."""
    settings.SWITCHBOARD_WAITERS_PER_ENDPOINT = 0
    _, token = vend("told-to-wait")
    loop = Loop(Client(proxy.url, token), wait_seconds=1)
    loop.start()
    try:
        claims = lambda: [e for e in proxy.seen() if e.verb == "claim_next"]  # noqa: E731
        until(lambda: len(claims()) >= 2, what="two claims refused")
        settings.SWITCHBOARD_WAITERS_PER_ENDPOINT = 1000
        Client(proxy.url, token).create_todo(title="after the refusals")
        until(lambda: loop.completed or loop.raised, what="the todo to be completed")
    finally:
        loop.stop.set()
        loop.join(timeout=30)
    assert loop.raised is None, loop.raised
    assert len(loop.completed) == 1
    refused = [e for e in claims() if e.status == 429]
    assert refused and all(e.retry_after == "2" for e in refused)
    for before, after in zip(claims(), claims()[1:], strict=False):
        if before.status == 429:
            assert after.started - before.ended >= 2.0, (before, after)


@live
def test_stop_ends_a_loop_waiting_to_try_a_claim_again(proxy, vend, settings):
    """One claim a minute: the loop's claim is refused 429 with ``Retry-After`` near 60 s;
    told to stop while it waits, the loop ends then, without trying again or raising."""
    settings.SWITCHBOARD_CLAIMS_PER_MINUTE = 1
    _, token = vend("one-a-minute")
    sb = Client(proxy.url, token)
    sb.create_todo(title="spends the minute's claim")
    claimed = sb.claim_next()
    sb.complete(todo_id=claimed["todo"]["id"], attempt_seq=claimed["attempt_seq"])
    loop = Loop(sb, wait_seconds=1)
    loop.start()
    refusals = lambda: [e for e in proxy.seen() if e.status == 429]  # noqa: E731
    until(lambda: refusals() or loop.raised, what="the loop's claim to be refused")
    [refused] = refusals()
    assert float(refused.retry_after) >= 30
    told = time.monotonic()
    loop.stop.set()
    loop.join(timeout=20)
    assert not loop.is_alive() and loop.raised is None, loop.raised
    assert loop.ended_at - told < float(refused.retry_after)
    assert proxy.verbs()[-1] == "claim_next" and proxy.verbs().count("claim_next") == 2


@live
def test_the_loop_raises_at_once_what_trying_again_cannot_fix(proxy, vend, user):
    """400, 401, 403, 404 and 409, each asked once: no retry can change their answer. (A
    loop that tried them again would stop after a few seconds and a close give up after
    three, each having asked more than once.)"""
    _, token = vend("refused-for-good")
    _, no_claims = vend("cannot-claim", verbs=["create_todo"])
    sb = Client(proxy.url, token, backoff=Backoff(first_seconds=0.1, close_seconds=3))
    refused = {}

    def first_job(client: Client, **arguments) -> Job:
        stop = threading.Event()
        timer = threading.Timer(5, stop.set)
        timer.start()
        try:
            return next(client.work(wait_seconds=1, stop=stop, **arguments))
        finally:
            timer.cancel()

    with pytest.raises(SwitchboardError) as refused["invalid claim"]:
        first_job(sb, lease_seconds=0)
    with pytest.raises(SwitchboardError) as refused["unauthorized"]:
        first_job(Client(proxy.url, "sbt_not-a-token", backoff=sb.backoff))
    with pytest.raises(SwitchboardError) as refused["forbidden"]:
        first_job(Client(proxy.url, no_claims, backoff=sb.backoff))
    todo = sb.create_todo(title="taken back")["todo"]
    job = first_job(sb)
    with pytest.raises(SwitchboardError) as refused["invalid close"]:
        job.complete(summary=["not", "text"])
    transitions.release(Actor.human(user), todo["id"])  # from the Board
    with pytest.raises(SwitchboardError) as refused["conflict"]:
        job.complete()
    with pytest.raises(SwitchboardError) as refused["not_found"]:
        Job(sb, {"todo": {"id": 999_999_999}, "attempt_seq": 1}).complete()

    statuses = {name: (error.value.status, error.value.code) for name, error in refused.items()}
    assert statuses == {
        "invalid claim": (400, "invalid"),
        "unauthorized": (401, "unauthorized"),
        "forbidden": (403, "forbidden"),
        "invalid close": (400, "invalid"),
        "conflict": (409, "conflict"),
        "not_found": (404, "not_found"),
    }
    assert job.lost  # the close's conflict: leaving a block would send nothing more
    verbs = [verb for verb in proxy.verbs() if verb != "create_todo"]
    assert verbs == ["claim_next"] * 4 + ["complete"] * 3, verbs


def test_a_close_that_cannot_get_through_gives_up_at_its_bound_and_sends_nothing_more(caplog):
    """Nothing listens: the complete is tried again until ``close_seconds`` would be passed,
    then its error raises; leaving the block then sends no fail (it would wait as long)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: connections are refused
    backoff = Backoff(first_seconds=0.05, cap_seconds=0.2, close_seconds=1)
    job = Job(
        Client(f"http://127.0.0.1:{port}", "token", backoff=backoff),
        {
            "todo": {"id": 7},
            "attempt_seq": 1,
        },
    )
    caplog.set_level(logging.WARNING, logger="switchboard.client")
    started = time.monotonic()
    with pytest.raises(ConnectionRefusedError), job:
        job.complete(summary="done, but nobody to tell")
    took = time.monotonic() - started

    said = [record.getMessage() for record in caplog.records]
    assert len(said) >= 3 and all(s.startswith("complete of todo 7 attempt 1 ") for s in said)
    assert took >= backoff.close_seconds - backoff.cap_seconds
    assert job.ended is None


# --- asking a person (issue 43): ask, answer, the next claim reads both -------------------------


@live
def test_a_job_asks_its_requester_answers_and_the_next_claim_reads_both(live_server, vend):
    """An agent sends a todo to a worker; the worker's job asks (its close bringing the
    worker's next todo with it); the sender answers; the worker's next claim of that todo
    reads the question and the answer, who gave it and when."""
    _, sender_token = vend("sender")
    _, worker_token = vend("worker")
    _, no_answer_token = vend("sender-of-old", verbs=["create_todo", "get_todo"])
    sender, worker = Client(live_server.url, sender_token), Client(live_server.url, worker_token)
    todo = sender.create_todo(title="migrate the orders table", to="worker")["todo"]
    other = worker.create_todo(title="unrelated work", priority=-1)["todo"]

    for job in worker.work(wait_seconds=1):
        with job:
            assert job.todo["id"] == todo["id"] and job.questions == []
            asked = job.ask(
                "The migration drops a column with data in it: go ahead?",
                choices=["drop it", "keep it"],
                answer_within_seconds=3600,
                summary="stopped before the destructive step",
            )
        break
    assert (asked["outcome"], asked["disposition"]) == ("asked", "waiting")
    assert asked["todo"]["state"] == "waiting" and asked["todo"]["waiting_for"] == "people"
    # The loop's then: the ask claimed the next todo, which leaving the loop gave back.
    assert asked["next"]["todo"]["id"] == other["id"]
    assert TodoAttempt.objects.get(todo_id=other["id"]).summary == STOPPED

    seen = sender.get_todo(todo_id=todo["id"])["todo"]
    assert seen["state"] == "waiting" and seen["question"]["choices"] == ["drop it", "keep it"]
    assert seen["question"]["text"].startswith("The migration drops a column")
    assert [q["attempt_seq"] for q in seen["questions"]] == [1]

    refused = {}
    with pytest.raises(SwitchboardError) as refused["not a choice"]:
        sender.answer(todo_id=todo["id"], value="maybe")
    with pytest.raises(SwitchboardError) as refused["not the requester"]:
        worker.answer(todo_id=todo["id"], value="keep it")
    with pytest.raises(SwitchboardError) as refused["unknown todo"]:
        sender.answer(todo_id=999_999_999, value="keep it")
    with pytest.raises(SwitchboardError) as refused["vended without answer"]:
        Client(live_server.url, no_answer_token).answer(todo_id=todo["id"], value="keep it")
    answered = sender.answer(todo_id=todo["id"], value="keep it")
    with pytest.raises(SwitchboardError) as refused["answered already"]:
        sender.answer(todo_id=todo["id"], value="drop it")
    assert {name: (e.value.status, e.value.code) for name, e in refused.items()} == {
        "not a choice": (400, "invalid"),
        "not the requester": (404, "not_found"),  # as an unknown id: no existence oracle
        "unknown todo": (404, "not_found"),
        "vended without answer": (403, "forbidden"),
        "answered already": (409, "conflict"),
    }
    assert "'drop it', 'keep it'" in refused["not a choice"].value.message
    assert answered["todo"]["state"] == "pending" and answered["todo"]["question"] is None

    claimed = worker.claim(todo_id=todo["id"])
    job = Job(worker, claimed)
    [prior] = job.prior_attempts
    assert (prior["seq"], prior["outcome"], prior["summary"]) == (
        1,
        "asked",
        "stopped before the destructive step",
    )
    [question] = job.questions
    assert question["text"] == "The migration drops a column with data in it: go ahead?"
    assert (question["ending"], question["answer_within_seconds"]) == ("answered", 3600)
    assert question["answer"]["value"] == "keep it"
    assert question["answer"]["answered_by"] == {"kind": "endpoint", "label": "sender"}
    assert question["answer"]["answered_at"] >= question["asked_at"]
    job.complete(result={"kept": True})
    assert Todo.objects.get(pk=todo["id"]).state == "done"
    # The ask spent no try: one failure budget untouched, two attempts in the round.
    assert Todo.objects.filter(pk=todo["id"], failures=0, attempt=2).exists()


@live
def test_a_job_spawns_children_waits_for_them_and_reads_their_outcomes(live_server, vend):
    """Issue 44 through the client: a planner's job makes two children on a worker's queue
    and waits for them; the worker does them; the planner's next job reads them."""
    _, planner_token = vend("planner")
    _, worker_token = vend("worker")
    planner, worker = Client(live_server.url, planner_token), Client(live_server.url, worker_token)
    plan = planner.create_todo(title="ship it")["todo"]

    for job in planner.work(wait_seconds=1):
        with job:
            assert job.children == []
            pieces = [job.spawn(title, to="worker", key="repo-app") for title in ("build", "tag")]
            waited = job.wait_for_children(summary="split in two")
        break
    assert waited["todo"]["state"] == "waiting" and waited["todo"]["waiting_for"] == "children"
    assert {p["parent"] for p in pieces} == {plan["id"]}

    done = 0
    for job in worker.work(wait_seconds=1):
        with job:
            job.complete(result={"piece": job.todo["title"]}, summary="ok")
        done += 1
        if done == 2:
            break

    for job in planner.work(wait_seconds=1):
        with job:
            assert job.todo["id"] == plan["id"]
            children = {c["title"]: c for c in job.children}
            job.complete(summary="merged")
        break
    assert set(children) == {"build", "tag"}
    assert children["tag"]["result"] == {"piece": "tag"} and children["tag"]["state"] == "done"
