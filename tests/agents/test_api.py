"""The agent HTTP API against a live server (pytest-django's live_server: a real HTTP
server on a real socket, over the test database)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from switchboard.client import Client, SwitchboardError
from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoAttempt, TodoEvent
from switchboard.queues.transitions import Actor
from tests.agents.api_helpers import check_shape, post
from tests.queues.helpers import lapse_lease, make_retry_due

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sb(live_server, vend):
    """A client for a fresh endpoint with every verb, plus its endpoint and token."""
    endpoint, token = vend("agent-a")
    return Client(live_server.url, token), endpoint, token


def call(base: str, token: str, verb: str, body: dict | None = None) -> dict:
    response = post(base, verb, body or {}, token=token)
    data = check_shape(verb, response)
    assert response.status_code == 200, data
    return data


# --- ADR-0039's Confirmation, end to end over HTTP ---------------------------------------------


def test_claim_heartbeat_fail_requeue_claim_lists_the_first_attempt(live_server, sb):
    client, endpoint, token = sb
    base = live_server.url
    todo = call(base, token, "create_todo", {"title": "fix the build", "max_attempts": 3})["todo"]
    first = call(base, token, "claim_next", {"claimant": "relay/run-1"})
    assert first["todo"]["id"] == todo["id"] and first["prior_attempts"] == []
    assert "untrusted_notice" in first
    call(base, token, "heartbeat", {"todo_id": todo["id"], "attempt_seq": first["attempt_seq"]})
    failed = call(
        base,
        token,
        "fail",
        {"todo_id": todo["id"], "attempt_seq": 1, "summary": "tests red", "result": {"n": 3}},
    )
    assert failed["todo"]["state"] == "retry_wait" and failed["todo"]["next_retry_at"]
    make_retry_due(todo["id"])
    assert transitions.requeue_due_retries() == 1

    second = call(base, token, "claim_next", {"claimant": "relay/run-2"})

    assert second["attempt_seq"] == 2
    [prior] = second["prior_attempts"]
    assert prior["seq"] == 1 and prior["outcome"] == "failed" and prior["died"] is False
    assert prior["summary"] == "tests red" and prior["claimant"] == "relay/run-1"
    assert "result" not in prior  # per-attempt results are not replayed to agents
    detail = call(base, token, "get_todo", {"todo_id": todo["id"]})["todo"]
    assert [a["outcome"] for a in detail["attempts"]] == [None, "failed"]
    assert detail["result"] == {"n": 3}


def test_reaped_and_taken_over_attempts_are_died_over_http(live_server, sb):
    _, _, token = sb
    base = live_server.url
    reaped = call(base, token, "create_todo", {"title": "reap me"})["todo"]
    call(base, token, "claim", {"todo_id": reaped["id"]})
    lapse_lease(reaped["id"])
    transitions.reap_lapsed()
    again = call(base, token, "claim", {"todo_id": reaped["id"]})
    assert again["prior_attempts"][0]["outcome"] == "reaped"
    assert again["prior_attempts"][0]["died"] is True

    lapse_lease(reaped["id"])
    takeover = call(base, token, "claim_next", {})
    assert takeover["todo"]["id"] == reaped["id"]
    assert [(a["outcome"], a["died"]) for a in takeover["prior_attempts"]] == [
        ("lease_expired", True),
        ("reaped", True),
    ]


def test_foreign_and_unknown_ids_answer_byte_identically(live_server, vend):
    _, token_a = vend("endpoint-a")
    _, token_b = vend("endpoint-b")
    base = live_server.url
    todo = call(base, token_a, "create_todo", {"title": "mine"})["todo"]
    for verb, extra in [
        ("get_todo", {}),
        ("claim", {}),
        ("heartbeat", {}),
        ("complete", {}),
        ("fail", {}),
        ("release", {}),
        ("cancel", {}),
    ]:
        foreign = post(base, verb, {"todo_id": todo["id"], **extra}, token=token_b)
        unknown = post(base, verb, {"todo_id": 999_999_999, **extra}, token=token_b)
        assert foreign.status_code == unknown.status_code == 404, verb
        assert foreign.content == unknown.content, verb
        assert foreign.json()["error"]["code"] == "not_found"
    assert Todo.objects.get(pk=todo["id"]).state == "pending"


def test_fenced_complete_needs_the_token(live_server, sb):
    _, _, token = sb
    base = live_server.url
    todo = call(base, token, "create_todo", {"title": "fenced"})["todo"]
    claim = call(base, token, "claim_next", {"require_fence": True})
    assert claim["lease_token"]
    no_token = post(base, "complete", {"todo_id": todo["id"]}, token=token)
    wrong = post(
        base, "complete", {"todo_id": todo["id"], "lease_token": "sbl_not-it"}, token=token
    )
    assert no_token.status_code == wrong.status_code == 409
    assert Todo.objects.get(pk=todo["id"]).state == "claimed"
    done = call(
        base, token, "complete", {"todo_id": todo["id"], "lease_token": claim["lease_token"]}
    )
    assert done["todo"]["state"] == "done"
    # a retry after a lost response replays the recorded result
    again = call(
        base, token, "complete", {"todo_id": todo["id"], "lease_token": claim["lease_token"]}
    )
    assert again["replayed"] is True and again["outcome"] == "completed"


def test_sixty_claims_keep_fifty_attempts(live_server, sb):
    client, _, _ = sb
    todo = client.create_todo(title="churn")["todo"]
    for _ in range(60):
        claimed = client.claim(todo_id=todo["id"])
        client.release(todo_id=todo["id"], attempt_seq=claimed["attempt_seq"])
    detail = client.get_todo(todo_id=todo["id"], attempts_limit=50)["todo"]
    assert detail["attempts_total"] == 50 and detail["attempts_pruned"] == 10
    assert len(detail["attempts"]) == 50
    assert TodoAttempt.objects.filter(todo_id=todo["id"]).count() == 50


# --- Tenancy, A2A and verb sets -----------------------------------------------------------------


def test_a2a_send_cancel_and_read_by_the_requester(live_server, vend, make_user):
    from switchboard.queues import endpoints

    _, worker_token = vend("worker")
    _, sender_token = vend("sender")
    base = live_server.url
    sent = call(base, sender_token, "create_todo", {"title": "please", "to": "worker"})["todo"]
    assert sent["endpoint"] == "worker" and sent["requester"] == "sender"
    claim = call(base, worker_token, "claim_next", {})
    call(base, worker_token, "complete", {"todo_id": sent["id"], "result": {"ok": 1}})
    seen = call(base, sender_token, "get_todo", {"todo_id": sent["id"]})
    assert seen["todo"]["state"] == "done" and seen["todo"]["result"] == {"ok": 1}
    assert "attempts" not in seen["todo"] and claim["attempt_seq"] == 1

    second = call(base, sender_token, "create_todo", {"title": "never mind", "to": "worker"})
    canceled = call(base, sender_token, "cancel", {"todo_id": second["todo"]["id"]})
    assert canceled["todo"]["state"] == "canceled"
    # the sender cannot claim or list the worker's queue
    assert (
        post(base, "claim", {"todo_id": second["todo"]["id"]}, token=sender_token).status_code
        == 404
    )
    listed = call(base, sender_token, "list_todos", {})
    assert listed["todos"] == []

    # unknown and foreign agent_ids answer alike
    stranger = make_user("stranger")
    endpoints.vend(stranger.teams.get(), "outsider")
    foreign = post(base, "create_todo", {"title": "x", "to": "outsider"}, token=sender_token)
    unknown = post(base, "create_todo", {"title": "x", "to": "nobody"}, token=sender_token)
    assert foreign.status_code == unknown.status_code == 404
    assert foreign.content == unknown.content


def test_verbs_outside_the_frozen_set_are_forbidden(live_server, vend):
    _, token = vend("reader", verbs="list_todos")
    _, writer_token = vend("writer")
    base = live_server.url
    todo = call(base, writer_token, "create_todo", {"title": "x"})["todo"]
    for verb in ("create_todo", "claim_next", "complete", "cancel"):
        response = post(base, verb, {"title": "x"} if verb == "create_todo" else {}, token=token)
        assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    # get_todo is allowed to a list_todos holder (on its own queue: this one is foreign)
    assert post(base, "get_todo", {"todo_id": todo["id"]}, token=token).status_code == 404
    assert post(base, "list_todos", {}, token=token).status_code == 200


def test_revoked_and_rotated_tokens_are_unauthorized(live_server, vend):
    from switchboard.queues import endpoints

    endpoint, token = vend("doomed")
    base = live_server.url
    new_token = endpoints.rotate(endpoint)
    assert post(base, "list_todos", {}, token=token).status_code == 401
    assert post(base, "list_todos", {}, token=new_token).status_code == 200
    transitions.revoke_endpoint(None, endpoint)
    live_server.forgets(endpoint)  # heard, as another process would (test_token_cache.py)
    response = post(base, "list_todos", {}, token=new_token)
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


# --- Long-poll ----------------------------------------------------------------------------------


def test_a_waiting_claim_next_wakes_when_a_todo_is_created(live_server, sb, vend):
    client, endpoint, token = sb
    result: dict = {}

    def wait() -> None:
        started = time.monotonic()
        result["claim"] = client.claim_next(wait_seconds=10)
        result["returned"] = time.monotonic()
        result["started"] = started

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(1.0)  # the waiter is parked on the doorbell by now
    assert "claim" not in result
    created_at = time.monotonic()
    other = Client(live_server.url, token)  # another connection
    todo = other.create_todo(title="wake up")["todo"]
    waiter.join(15)

    assert result["claim"]["todo"]["id"] == todo["id"]
    # woken by the doorbell, not by the 10 s timeout or a 5 s re-check
    assert result["returned"] - created_at < 0.25


def test_a_long_poll_with_nothing_to_do_returns_null_after_its_wait(live_server, sb):
    client, _, _ = sb
    started = time.monotonic()
    answer = client.claim_next(wait_seconds=1)
    assert answer["todo"] is None and answer["prior_attempts"] == []
    assert time.monotonic() - started >= 0.9


def test_sixteen_long_polls_do_not_starve_other_requests(live_server, sb):
    client, _, token = sb
    results: list = []

    def wait() -> None:
        results.append(Client(live_server.url, token).claim_next(wait_seconds=3))

    waiters = [threading.Thread(target=wait) for _ in range(16)]
    for w in waiters:
        w.start()
    time.sleep(0.5)
    started = time.monotonic()
    listed = client.list_todos()
    assert listed["todos"] == [] and time.monotonic() - started < 2.5
    for w in waiters:
        w.join(10)
    assert len(results) == 16


# --- Logs never carry tokens ------------------------------------------------------------------


def test_no_token_or_lease_token_reaches_a_log_line(live_server, vend, caplog):
    endpoint, token = vend("quiet")
    base = live_server.url
    with caplog.at_level(logging.DEBUG):
        todo = call(base, token, "create_todo", {"title": "t"})["todo"]
        claim = call(base, token, "claim_next", {"require_fence": True, "claimant": "c"})
        lease = claim["lease_token"]
        ids = {"todo_id": todo["id"], "lease_token": lease}
        call(base, token, "heartbeat", ids)
        call(base, token, "get_todo", {"todo_id": todo["id"]})
        call(base, token, "list_todos", {})
        call(base, token, "release", ids)
        claim = call(base, token, "claim", {"todo_id": todo["id"], "require_fence": True})
        ids = {"todo_id": todo["id"], "lease_token": claim["lease_token"]}
        call(base, token, "fail", {**ids, "retryable": False})
        post(base, "complete", ids, token=token)  # a conflict
        post(base, "complete", ids, token=token + "x")  # a wrong token
        second = call(base, token, "create_todo", {"title": "u"})["todo"]
        call(base, token, "claim", {"todo_id": second["id"]})
        call(base, token, "complete", {"todo_id": second["id"]})
        third = call(base, token, "create_todo", {"title": "v"})["todo"]
        call(base, token, "cancel", {"todo_id": third["id"]})
    text = "\n".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    assert caplog.records, "nothing was logged at all: the test would prove nothing"
    for secret in (token, lease, claim["lease_token"]):
        assert secret not in text
    assert TodoEvent.objects.count() >= 1


# --- The Python client's worker loop --------------------------------------------------------


def test_the_worker_loop_claims_heartbeats_and_completes(live_server, sb):
    client, _, _ = sb
    client.create_todo(title="one")
    client.create_todo(title="two")
    stop = threading.Event()
    seen = []
    for job in client.work(wait_seconds=1, stop=stop, claimant="loop", require_fence=True):
        with job:
            seen.append(job.todo["title"])
            job.complete(result={"title": job.todo["title"]})
        if len(seen) == 2:
            stop.set()
    assert sorted(seen) == ["one", "two"]
    assert set(Todo.objects.values_list("state", flat=True)) == {"done"}


def test_the_worker_loop_fails_a_job_that_raises(live_server, sb):
    client, _, _ = sb
    todo = client.create_todo(title="boom", max_attempts=1)["todo"]
    job = next(client.work(wait_seconds=1))
    with pytest.raises(RuntimeError), job:
        raise RuntimeError("the build broke")
    detail = client.get_todo(todo_id=todo["id"])["todo"]
    assert detail["state"] == "dead"
    assert detail["attempts"][0]["summary"] == "RuntimeError: the build broke"
    with pytest.raises(SwitchboardError) as error:
        client.complete(todo_id=todo["id"], attempt_seq=1)
    assert error.value.code == "conflict" and error.value.status == 409


@contextmanager
def _a_waiting_claim_next(url: str, token: str) -> Iterator[dict]:
    """A claim_next waiting up to 10 s, on a thread, parked on the doorbell when the block
    starts; the end of the block waits for its answer: ``answer["response"]``."""
    answer: dict = {}

    def wait() -> None:
        answer["response"] = post(url, "claim_next", {"wait_seconds": 10}, token=token)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(1.0)  # parked on the doorbell
    try:
        yield answer
    finally:
        waiter.join(15)


def test_a_waiter_whose_token_is_rotated_claims_nothing_with_it(live_server, vend):
    from switchboard.queues import endpoints

    endpoint, token = vend("rotating")
    with _a_waiting_claim_next(live_server.url, token) as answer:
        endpoints.rotate(endpoint)
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title="for the new token only")

    response = answer["response"]
    assert response.status_code == 401 and response.json()["error"]["code"] == "unauthorized"
    assert "for the new token only" not in response.text
    assert Todo.objects.get(pk=todo.id).state == "pending"


def test_a_waiter_of_a_revoked_endpoint_claims_nothing(live_server, vend):
    endpoint, token = vend("revoked-while-waiting")
    with _a_waiting_claim_next(live_server.url, token) as answer:
        transitions.revoke_endpoint(None, endpoint)
    assert answer["response"].status_code == 401
