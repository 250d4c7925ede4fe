"""switchboard.client.AsyncClient: the sync client's flows (tests/test_client.py and the
worker-loop tests in tests/agents/test_api.py) over asyncio, against the live server."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.db import connections

from switchboard.client import AsyncClient, AsyncJob, Backoff, Client, SwitchboardError
from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.forwarding import RecordingProxy
from tests.queues.helpers import approval_form
from tests.unanswered import first_connection_unanswered

live = pytest.mark.django_db(transaction=True)


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def token(live_server, vend):
    _, token = vend("async-agent")
    return token


def test_a_call_after_a_timed_out_one_gets_a_fresh_connection():
    """As for the sync client: a server that never answers the first connection and answers
    the second; the call after the timeout must not reuse the connection left mid-request."""

    async def scenario(url: str) -> dict:
        async with AsyncClient(url, "token", timeout=0.5) as client:
            with pytest.raises(TimeoutError):
                await client.list_todos()
            return await client.list_todos()

    with first_connection_unanswered() as url:
        assert run(scenario(url)) == {"todos": []}


@live
def test_the_worker_loop_claims_heartbeats_and_completes(live_server, token):
    async def scenario() -> list[str]:
        async with AsyncClient(live_server.url, token) as client:
            await client.create_todo(title="one")
            await client.create_todo(title="two")
            stop = asyncio.Event()
            seen = []
            async for job in client.work(
                wait_seconds=1, stop=stop, claimant="loop", require_fence=True
            ):
                async with job:
                    seen.append(job.todo["title"])
                    await job.complete(result={"title": job.todo["title"]})
                if len(seen) == 2:
                    stop.set()
            return seen

    assert sorted(run(scenario())) == ["one", "two"]
    assert set(Todo.objects.values_list("state", flat=True)) == {"done"}
    assert set(TodoAttempt.objects.values_list("claimant", flat=True)) == {"loop"}
    assert all(TodoAttempt.objects.values_list("lease_token_hash", flat=True))


@live
def test_the_worker_loop_fails_a_job_that_raises(live_server, token):
    async def scenario() -> tuple[dict, SwitchboardError]:
        async with AsyncClient(live_server.url, token) as client:
            todo = (await client.create_todo(title="boom", max_attempts=1))["todo"]
            job = await anext(client.work(wait_seconds=1))
            with pytest.raises(RuntimeError):
                async with job:
                    raise RuntimeError("the build broke")
            detail = (await client.get_todo(todo_id=todo["id"]))["todo"]
            with pytest.raises(SwitchboardError) as error:
                await client.complete(todo_id=todo["id"], attempt_seq=1)
            return detail, error.value

    detail, error = run(scenario())
    assert detail["state"] == "dead"
    assert detail["attempts"][0]["summary"] == "RuntimeError: the build broke"
    assert error.code == "conflict" and error.status == 409


@live
def test_a_job_heartbeats_in_the_background_while_inside(live_server, token):
    async def scenario() -> int:
        async with AsyncClient(live_server.url, token) as client:
            todo = (await client.create_todo(title="slow"))["todo"]
            # A 3 s lease: beats every second; 4 s of work outlives the lease it started with.
            claimed = await client.claim_next(lease_seconds=3, require_fence=True)
            async with AsyncJob(client, claimed) as job:
                await asyncio.sleep(4)
                assert not job.lost
                await job.complete(summary="slow but alive")
            return todo["id"]

    todo_id = run(scenario())
    [attempt] = TodoAttempt.objects.filter(todo_id=todo_id)
    assert (attempt.outcome, attempt.summary) == ("completed", "slow but alive")
    assert attempt.last_heartbeat_at is not None
    assert (attempt.last_heartbeat_at - attempt.claimed_at).total_seconds() >= 2


@live
def test_a_canceled_job_is_released(live_server, token):
    async def scenario() -> int:
        async with AsyncClient(live_server.url, token) as client:
            todo = (await client.create_todo(title="canceled midway"))["todo"]
            job = await anext(client.work(wait_seconds=1, require_fence=True))
            started = asyncio.Event()

            async def work() -> None:
                async with job:
                    started.set()
                    await asyncio.sleep(60)

            task = asyncio.create_task(work())
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return todo["id"]

    todo_id = run(scenario())
    assert Todo.objects.get(pk=todo_id).state == "pending"
    [attempt] = TodoAttempt.objects.filter(todo_id=todo_id)
    assert (attempt.outcome, attempt.summary) == ("released", "worker canceled; released")


@live
def test_a_job_released_by_a_person_is_lost(live_server, vend, user):
    endpoint, token = vend("async-agent")
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="taken back")

    def release_by_hand() -> None:  # from the Board, on a thread with its own connection
        try:
            transitions.release(Actor.human(user), todo.id)
        finally:
            connections.close_all()

    async def scenario() -> tuple[bool, SwitchboardError]:
        async with AsyncClient(live_server.url, token) as client:
            claimed = await client.claim_next(lease_seconds=3, require_fence=True)
            async with AsyncJob(client, claimed) as job:
                await asyncio.to_thread(release_by_hand)
                await asyncio.sleep(1.5)  # one beat (every second) answers conflict
                lost = job.lost
                with pytest.raises(SwitchboardError) as error:
                    await job.complete()
            return lost, error.value

    lost, error = run(scenario())
    assert lost is True
    assert error.code == "conflict"
    assert TodoAttempt.objects.get(todo_id=todo.id).outcome == "released"


@live
def test_a_long_poll_outlives_a_read_timeout_shorter_than_its_wait(live_server, token):
    """Both clients read a long-poll with at least wait_seconds plus a margin, whatever their
    timeout: with a 1 s timeout, a 3 s wait on an empty queue returns null, not a timeout."""

    async def scenario() -> dict:
        async with AsyncClient(live_server.url, token, timeout=1) as client:
            return await client.claim_next(wait_seconds=3)

    started = time.monotonic()
    assert run(scenario())["todo"] is None
    assert Client(live_server.url, token, timeout=1).claim_next(wait_seconds=3)["todo"] is None
    assert time.monotonic() - started >= 5  # both really waited


@live
def test_capabilities_come_without_a_token(live_server):
    async def scenario() -> dict:
        async with AsyncClient(live_server.url, "not a token") as client:
            return await client.capabilities()

    document = run(scenario())
    assert document["name"] == "switchboard"
    assert document["features"]["attempt_history"] is True
    assert Client(live_server.url, "not a token").capabilities() == document


@live
def test_errors_carry_the_apis_code_and_the_token_stays_out_of_sight(live_server, token):
    async def scenario() -> tuple[SwitchboardError, SwitchboardError, str]:
        async with AsyncClient(live_server.url, token) as client:
            with pytest.raises(SwitchboardError) as missing:
                await client.get_todo(todo_id=999_999)
            with pytest.raises(SwitchboardError) as invalid:
                await client.create_todo(title="x", priority=1000)
            return missing.value, invalid.value, repr(client)

    missing, invalid, shown = run(scenario())
    assert (missing.status, missing.code) == (404, "not_found")
    assert (invalid.status, invalid.code) == (400, "invalid")
    for text in (shown, str(missing), str(invalid)):
        assert token not in text


# --- the job loop through refusals and lost answers (issue 41, item 6) ------------------------


@pytest.fixture
def proxy(live_server):
    with RecordingProxy(live_server.url) as recording:
        yield recording


@live
def test_a_close_whose_answer_was_lost_is_sent_again_and_answered_as_replayed(proxy, token):
    """As for the sync client (tests/test_client.py): the complete lands, its answer is lost
    (twice: the client's one quiet retry on a fresh connection included); the loop sends it
    again with the same attempt and is answered ``replayed``."""

    async def scenario() -> list[dict]:
        async with AsyncClient(proxy.url, token, backoff=Backoff(first_seconds=0.05)) as sb:
            await sb.create_todo(title="first")
            proxy.lose_answers("complete", 2)
            stop, ended = asyncio.Event(), []
            async for job in sb.work(wait_seconds=1, stop=stop, claimant="loop"):
                async with job:
                    ended.append(await job.complete(result={"n": len(ended)}))
                if len(ended) == 1:
                    await sb.create_todo(title="second")
                else:
                    stop.set()
            return ended

    ended = run(scenario())
    assert ended[0]["replayed"] is True and ended[0]["next"] is None
    assert ended[1]["replayed"] is False
    closes = [e for e in proxy.seen() if e.verb == "complete"]
    assert [e.status for e in closes] == [None, None, 200, 200]
    assert [e.asked["attempt_seq"] for e in closes[:3]] == [1, 1, 1]
    assert set(Todo.objects.values_list("state", flat=True)) == {"done"}
    assert TodoAttempt.objects.filter(outcome="completed").count() == 2


@live
def test_stop_ends_a_loop_waiting_to_try_a_claim_again(proxy, token, settings):
    """One claim a minute: the loop's claim is refused 429 with ``Retry-After`` near 60 s;
    told to stop while it waits, the loop ends then, without trying again or raising."""
    settings.SWITCHBOARD_CLAIMS_PER_MINUTE = 1
    sb = Client(proxy.url, token)
    sb.create_todo(title="spends the minute's claim")
    claimed = sb.claim_next()
    sb.complete(todo_id=claimed["todo"]["id"], attempt_seq=claimed["attempt_seq"])

    async def scenario() -> tuple[float, float, list]:
        async with AsyncClient(proxy.url, token) as client:
            stop, jobs = asyncio.Event(), []

            async def loop() -> None:
                async for job in client.work(wait_seconds=1, stop=stop):
                    jobs.append(job)

            task = asyncio.create_task(loop())
            while not any(e.status == 429 for e in proxy.seen()) and not task.done():
                await asyncio.sleep(0.02)
            told = time.monotonic()
            stop.set()
            await asyncio.wait_for(task, 20)  # raises what the loop raised
            return told, time.monotonic(), jobs

    told, ended, jobs = run(scenario())
    [refused] = [e for e in proxy.seen() if e.status == 429]
    assert float(refused.retry_after) >= 30 and jobs == []
    assert ended - told < float(refused.retry_after)
    assert proxy.verbs()[-1] == "claim_next" and proxy.verbs().count("claim_next") == 2


# --- asking a person (issue 43) ------------------------------------------------------------------

FORM = approval_form("refund", title="Refund it?", most=840)


@live
def test_an_async_job_asks_with_a_form_and_the_next_claims_read_each_answer(
    live_server, token, user
):
    """On its own queue an endpoint is its todo's requester: it answers its own form. The
    second ask is free text, answered by a person; the third claim reads both questions,
    newest first, each with who answered."""

    async def ask(client: AsyncClient, question: str, **arguments) -> tuple[int, dict, list]:
        job = await anext(client.work(wait_seconds=1, require_fence=True))
        async with job:
            known = job.questions
            asked = await job.ask(question, **arguments)
        return job.todo["id"], asked, known

    async def first() -> tuple[dict, dict[str, SwitchboardError]]:
        async with AsyncClient(live_server.url, token) as client:
            await client.create_todo(title="refund order 1042")
            todo_id, asked, known = await ask(
                client, "Approve this refund of 840 EUR?", answer_schema=FORM
            )
            assert known == [] and asked["todo"]["state"] == "waiting"
            refused = {}
            for name, value in (
                ("missing field", {"amount": 10}),
                ("over", {"refund": True, "amount": 900}),
            ):
                with pytest.raises(SwitchboardError) as refused[name]:
                    await client.answer(todo_id=todo_id, value=value)
            with pytest.raises(SwitchboardError) as refused["unknown todo"]:
                await client.answer(todo_id=999_999_999, value={"refund": True})
            answered = await client.answer(todo_id=todo_id, value={"refund": True, "amount": 840})
            with pytest.raises(SwitchboardError) as refused["answered already"]:
                await client.answer(todo_id=todo_id, value={"refund": False})
            return answered, {name: error.value for name, error in refused.items()}

    answered, refused = run(first())
    assert answered["todo"]["state"] == "pending"
    assert {name: (e.status, e.code) for name, e in refused.items()} == {
        "missing field": (400, "invalid"),
        "over": (400, "invalid"),
        "unknown todo": (404, "not_found"),
        "answered already": (409, "conflict"),
    }
    assert "required" in refused["missing field"].message

    async def second() -> tuple[int, list]:
        async with AsyncClient(live_server.url, token) as client:
            todo_id, asked, known = await ask(
                client, "Which account should the refund go to?", summary="refund approved"
            )
            assert asked["todo"]["question"]["choices"] is None
            return todo_id, known

    todo_id, known = run(second())
    [first_question] = known
    assert first_question["answer_schema"] == FORM
    assert first_question["answer"]["value"] == {"refund": True, "amount": 840}
    assert first_question["answer"]["answered_by"] == {"kind": "endpoint", "label": "async-agent"}
    transitions.answer(Actor.human(user), todo_id, value="the card it was paid with")  # Board

    async def third() -> tuple[list, dict]:
        async with AsyncClient(live_server.url, token) as client:
            job = await anext(client.work(wait_seconds=1))
            async with job:
                await job.complete(result={"refunded": 840})
            return job.questions, job.prior_attempts[0]

    questions, newest = run(third())
    assert [q["text"] for q in questions] == [
        "Which account should the refund go to?",
        "Approve this refund of 840 EUR?",
    ]
    assert questions[0]["answer"]["value"] == "the card it was paid with"
    assert questions[0]["answer"]["answered_by"] == {"kind": "person", "label": "alice"}
    assert (newest["outcome"], newest["summary"]) == ("asked", "refund approved")
    assert Todo.objects.get(pk=todo_id).state == "done"
