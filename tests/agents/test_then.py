"""``then`` on complete, fail and release: the close and the next claim in one request (HTTP
and MCP), the close committed whatever the claim finds, a replay claiming nothing, bad input
refused before anything is written; and the Python clients' job loops using it."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from switchboard.client import Client
from switchboard.queues import endpoints, transitions
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.agents.api_helpers import check_shape, keyed_endpoint, post, statements_run
from tests.agents.test_mcp import call as mcp_call
from tests.agents.test_mcp import mcp_client, run

pytestmark = pytest.mark.django_db(transaction=True)


def _call(base: str, token: str, verb: str, body: dict, status: int = 200) -> dict:
    response = post(base, verb, body, token=token)
    data = check_shape(verb, response)
    assert response.status_code == status, data
    return data


def _claimed(base: str, token: str, title: str) -> dict:
    _call(base, token, "create_todo", {"title": title})
    return _call(base, token, "claim_next", {})


@pytest.mark.parametrize("verb", ["complete", "fail", "release"])
def test_a_close_then_claims_the_next_todo_in_the_same_request(live_server, vend, verb):
    _, token = vend("then-agent")
    base = live_server.url
    first = _claimed(base, token, "first")
    second = _call(base, token, "create_todo", {"title": "second", "priority": 5})["todo"]
    ids = {"todo_id": first["todo"]["id"], "attempt_seq": first["attempt_seq"]}
    closed = _call(base, token, verb, {**ids, "then": {"claimant": "relay/run-2"}})
    assert closed["todo"]["id"] == first["todo"]["id"] and closed["replayed"] is False
    assert closed["todo"]["state"] == {"complete": "done", "fail": "retry_wait"}.get(
        verb, "pending"
    )
    nxt = closed["next"]
    assert nxt["todo"]["id"] == second["id"] and nxt["attempt_seq"] == 1
    assert nxt["todo"]["state"] == "claimed" and "untrusted_notice" in nxt
    attempt = TodoAttempt.objects.get(todo_id=second["id"], seq=1)
    assert attempt.claimant == "relay/run-2" and attempt.ended_at is None


def test_an_empty_queue_answers_no_next_todo_and_the_close_stands(live_server, vend):
    _, token = vend("then-empty")
    base = live_server.url
    only = _claimed(base, token, "only")
    ids = {"todo_id": only["todo"]["id"], "attempt_seq": only["attempt_seq"]}
    closed = _call(base, token, "complete", {**ids, "then": {}})
    assert closed["todo"]["state"] == "done" and closed["next"]["todo"] is None
    assert "next_error" not in closed


def test_then_long_polls_and_wakes_for_a_todo_made_meanwhile(live_server, vend):
    endpoint, token = vend("then-waits")
    base = live_server.url
    only = _claimed(base, token, "only")
    ids = {"todo_id": only["todo"]["id"], "attempt_seq": only["attempt_seq"]}

    def later():
        time.sleep(0.5)
        transitions.create_todo(Actor.agent(endpoint), title="made while waiting")

    maker = threading.Thread(target=later)
    maker.start()
    started = time.monotonic()
    closed = _call(base, token, "complete", {**ids, "then": {"wait_seconds": 10}})
    maker.join()
    assert closed["next"]["todo"]["title"] == "made while waiting"
    assert time.monotonic() - started < 5


def test_a_replayed_close_claims_nothing_new(live_server, vend):
    _, token = vend("then-replay")
    base = live_server.url
    first = _claimed(base, token, "first")
    _call(base, token, "create_todo", {"title": "second"})
    _call(base, token, "create_todo", {"title": "third"})
    ids = {"todo_id": first["todo"]["id"], "attempt_seq": first["attempt_seq"]}
    once = _call(base, token, "complete", {**ids, "then": {}})
    assert once["next"]["todo"]["title"] == "second"
    # The answer was lost; the client sends the same close again.
    again = _call(base, token, "complete", {**ids, "then": {}})
    assert again["replayed"] is True and again["next"] is None
    assert Todo.objects.get(title="third").state == "pending"  # not claimed a second time


def test_bad_then_and_no_claim_next_verb_are_refused_before_the_close(live_server, vend):
    _, token = vend("then-bad")
    base = live_server.url
    held = _claimed(base, token, "held")
    ids = {"todo_id": held["todo"]["id"], "attempt_seq": held["attempt_seq"]}
    for then in ({"wait_seconds": -1}, {"todo_id": 3}, {"lease_seconds": "long"}, [], "soon"):
        refused = _call(base, token, "complete", {**ids, "then": then}, status=400)
        assert refused["error"]["code"] == "invalid"
    _, frozen = vend("no-claim-next", verbs=["create_todo", "claim", "complete"])
    mine = _call(base, frozen, "create_todo", {"title": "mine"})["todo"]
    claim = _call(base, frozen, "claim", {"todo_id": mine["id"]})
    refused = _call(
        base,
        frozen,
        "complete",
        {"todo_id": mine["id"], "attempt_seq": claim["attempt_seq"], "then": {}},
        status=403,
    )
    assert "claim_next" in refused["error"]["message"]
    assert Todo.objects.get(pk=held["todo"]["id"]).state == "claimed"
    assert Todo.objects.get(pk=mine["id"]).state == "claimed"  # the close was not made


def test_a_claim_that_cannot_be_made_says_why_and_the_close_stands(live_server, vend, settings):
    endpoint, token = vend("then-paused")
    base = live_server.url
    held = _claimed(base, token, "held")
    _call(base, token, "create_todo", {"title": "waiting"})
    endpoints.pause(endpoint)
    live_server.forgets(endpoint)  # heard, as another process would
    ids = {"todo_id": held["todo"]["id"], "attempt_seq": held["attempt_seq"]}
    closed = _call(base, token, "complete", {**ids, "then": {}})
    assert closed["todo"]["state"] == "done" and closed["next"]["paused"] is True
    endpoints.resume(endpoint)
    live_server.forgets(endpoint)
    # Past the long-poll cap the claim is refused, not the close.
    settings.SWITCHBOARD_WAITERS_PER_ENDPOINT = 0
    again = _call(base, token, "claim_next", {})
    ids = {"todo_id": again["todo"]["id"], "attempt_seq": again["attempt_seq"]}
    closed = _call(base, token, "complete", {**ids, "then": {"wait_seconds": 5}})
    assert closed["todo"]["state"] == "done" and closed["next"] is None
    assert closed["next_error"]["code"] == "rate_limited"


def test_then_through_mcp(live_server, vend):
    _, token = vend("then-mcp")

    async def scenario():
        async with mcp_client(live_server.url, token) as client:
            await mcp_call(client, "create_todo", {"title": "one"})
            await mcp_call(client, "create_todo", {"title": "two"})
            first = await mcp_call(client, "claim_next", {})
            ids = {"todo_id": first["todo"]["id"], "attempt_seq": first["attempt_seq"]}
            return await mcp_call(client, "complete", {**ids, "then": {"claimant": "mcp/2"}})

    closed = run(scenario())
    assert closed["todo"]["state"] == "done" and closed["next"]["todo"]["title"] == "two"


class _Counting(Client):
    """The client, counting the verbs it sends."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[str] = []

    def call(self, verb: str, **arguments):
        self.sent.append(verb)
        return super().call(verb, **arguments)


def test_the_job_loop_takes_its_next_todo_from_the_close(live_server, vend):
    endpoint, token = vend("then-loop")
    for n in range(5):
        transitions.create_todo(Actor.agent(endpoint), title=f"job {n}")
    sb = _Counting(live_server.url, token)
    stop = threading.Event()
    done = []
    for job in sb.work(wait_seconds=0.2, stop=stop, claimant="loop"):
        with job:
            job.complete(result={"n": len(done)})
        done.append(job.todo["id"])
        if len(done) == 5:
            stop.set()
    assert len(done) == 5 and Todo.objects.filter(state="done").count() == 5
    # One claim_next to start, then each complete brought the next todo: 6 requests, not 10.
    assert sb.sent == ["claim_next"] + ["complete"] * 5


def test_a_job_loop_left_by_break_gives_back_the_todo_its_last_close_brought(live_server, vend):
    endpoint, token = vend("then-break")
    first, _ = transitions.create_todo(Actor.agent(endpoint), title="done, then break")
    second, _ = transitions.create_todo(Actor.agent(endpoint), title="brought, not worked")
    loop = Client(live_server.url, token).work(wait_seconds=0.2)
    for job in loop:
        with job:
            job.complete()
        assert job.next["todo"]["id"] == second.id  # the close brought it
        break
    loop.close()  # what leaving the loop does once nothing holds it
    assert Todo.objects.get(pk=first.id).state == "done"
    assert Todo.objects.get(pk=second.id).state == "pending"
    [attempt] = TodoAttempt.objects.filter(todo_id=second.id)
    assert (attempt.outcome, attempt.summary) == ("released", "worker stopped; released")


# ---------------------------------------------------------------------------------------
# complete with ``then`` in one statement (queues/sql/close.py CLOSE_THEN_CLAIM_NEXT), and
# where it hands over to the close and claim_next as two


def _held(claimed: dict) -> dict:
    return {"todo_id": claimed["todo"]["id"], "attempt_seq": claimed["attempt_seq"]}


def test_a_complete_then_is_one_statement_and_a_release_then_is_two(live_server, vend, monkeypatch):
    _, token = vend("then-one")
    base = live_server.url
    first = _claimed(base, token, "first")
    for n in range(2):
        _call(base, token, "create_todo", {"title": f"more {n}"})
    with statements_run(monkeypatch) as names:
        second = _call(base, token, "complete", {**_held(first), "then": {}})["next"]
    assert names == ["close_then_claim_next"] and second["todo"]["title"] == "more 0"
    with statements_run(monkeypatch) as names:
        closed = _call(base, token, "release", {**_held(second), "then": {}})
    assert names[:3] == ["close_held_by_agent", "ring_doorbell", "claim_next"], names
    # The claim after it saw the release: the todo given back was the longest waiting.
    assert closed["next"]["todo"]["id"] == second["todo"]["id"]


def test_a_keyed_complete_then_is_one_statement_and_counts_its_own_key_freed(
    live_server, vend, monkeypatch
):
    """Under max_claimed_per_key the close and the claim stay one statement: the claim counts
    the key the close frees as freed (its snapshot still shows it held), and passes over a
    key another agent holds."""
    endpoint, token, base = keyed_endpoint(live_server, vend, "then-keyed")
    made = {}
    for title, key in [("a1", "a"), ("c1", "c"), ("a2", "a"), ("c2", "c"), ("d1", "d")]:
        made[title] = _call(base, token, "create_todo", {"title": title, "key": key})["todo"]
    first = _call(base, token, "claim_next", {})
    other = _call(base, token, "claim_next", {})  # key c, held by another agent
    assert (first["todo"]["title"], other["todo"]["title"]) == ("a1", "c1")

    with statements_run(monkeypatch) as names:
        second = _call(base, token, "complete", {**_held(first), "then": {}})["next"]
    assert names == ["close_then_claim_next_keyed"]
    assert second["todo"]["title"] == "a2"  # its own key, freed by the close before it
    with statements_run(monkeypatch) as names:
        third = _call(base, token, "complete", {**_held(second), "then": {}})["next"]
    assert names == ["close_then_claim_next_keyed"]
    assert third["todo"]["title"] == "d1"  # c2 passed over: c1 is held
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, count(*) FROM todos WHERE endpoint_id = %s AND state = 'claimed'"
            " GROUP BY key ORDER BY key",
            [endpoint.pk],
        )
        assert cursor.fetchall() == [("c", 1), ("d", 1)]


def test_the_close_stands_when_its_one_statement_fails(live_server, vend):
    """A claim that errors takes the one statement down with it: nothing of it stands, the
    close is made again alone, and claim_next, run after it, says why it failed."""
    _, token = vend("then-fails")
    base = live_server.url
    held = _claimed(base, token, "held")
    waiting = _call(base, token, "create_todo", {"title": "waiting"})["todo"]
    with connection.cursor() as cursor:
        cursor.execute(_REFUSE_BOOM)
        cursor.execute(
            "CREATE TRIGGER test_refuse_boom BEFORE INSERT ON todo_attempts"
            " FOR EACH ROW EXECUTE FUNCTION test_refuse_boom()"
        )
    try:
        closed = _call(base, token, "complete", {**_held(held), "then": {"claimant": "boom"}})
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER test_refuse_boom ON todo_attempts")
            cursor.execute("DROP FUNCTION test_refuse_boom()")
    assert closed["todo"]["state"] == "done" and closed["next"] is None
    assert closed["next_error"]["code"], closed
    assert Todo.objects.get(pk=held["todo"]["id"]).state == "done"
    assert Todo.objects.get(pk=waiting["id"]).state == "pending"  # nothing half-written
    assert not TodoAttempt.objects.filter(todo_id=waiting["id"]).exists()


_REFUSE_BOOM = """
CREATE FUNCTION test_refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.claimant = 'boom' THEN
        RAISE EXCEPTION 'refused by the test';
    END IF;
    RETURN NEW;
END $$"""


def test_the_one_statement_never_claims_the_todo_it_closes(live_server, vend):
    """A lease that lapsed while its holder worked (no sweeper came by) is still the
    holder's to complete, and its todo, claimable by its lease's time, is not picked again
    by the claim in the same statement."""
    _, token = vend("then-lapsed")
    base = live_server.url
    _call(base, token, "create_todo", {"title": "only"})
    held = _call(base, token, "claim_next", {"lease_seconds": 1})
    time.sleep(1.2)
    closed = _call(base, token, "complete", {**_held(held), "then": {}})
    assert closed["todo"]["state"] == "done" and closed["next"]["todo"] is None
    [attempt] = TodoAttempt.objects.filter(todo_id=held["todo"]["id"])
    assert attempt.outcome == "completed"


def test_a_lapsed_lease_found_by_the_one_statement_is_taken_over_by_claim_next(
    live_server, vend, monkeypatch
):
    """The one statement's claim is the fast claim: a pick that needs the takeover arms
    (here another attempt's lapsed lease) writes nothing there, and claim_next, after the
    close, takes it over with the lapsed attempt among the prior ones."""
    _, token = vend("then-takeover")
    base = live_server.url
    _call(base, token, "create_todo", {"title": "lapses"})
    lapsed = _call(base, token, "claim_next", {"lease_seconds": 1})
    held = _claimed(base, token, "held")
    time.sleep(1.2)
    with statements_run(monkeypatch) as names:
        closed = _call(base, token, "complete", {**_held(held), "then": {}})
    nxt = closed["next"]
    assert nxt["todo"]["id"] == lapsed["todo"]["id"] and nxt["attempt_seq"] == 2
    assert [a["outcome"] for a in nxt["prior_attempts"]] == ["lease_expired"]
    assert names[0] == "close_then_claim_next" and "claim_next_takeover" in names
    assert Todo.objects.get(pk=held["todo"]["id"]).state == "done"


def test_a_fenced_then_hands_its_token_and_the_token_fences(live_server, vend):
    _, token = vend("then-fenced")
    base = live_server.url
    first = _claimed(base, token, "first")
    _call(base, token, "create_todo", {"title": "second"})
    nxt = _call(base, token, "complete", {**_held(first), "then": {"require_fence": True}})["next"]
    assert nxt["lease_token"]
    ids = _held(nxt)
    stale = _call(base, token, "complete", {**ids, "lease_token": "x" * 20}, status=409)
    assert stale["error"]["code"] == "conflict"
    done = _call(base, token, "complete", {**ids, "lease_token": nxt["lease_token"]})
    assert done["todo"]["state"] == "done"


def test_under_an_admission_limit_a_then_is_two_statements_and_charged(
    live_server, vend, settings, monkeypatch
):
    settings.SWITCHBOARD_CLAIMS_PER_MINUTE = 2
    _, token = vend("then-admitted")
    base = live_server.url
    first = _claimed(base, token, "first")  # one unit
    for title in ("second", "third"):
        _call(base, token, "create_todo", {"title": title})
    with statements_run(monkeypatch) as names:
        second = _call(base, token, "complete", {**_held(first), "then": {}})
    assert "close_then_claim_next" not in names and second["next"]["todo"] is not None
    third = _call(base, token, "complete", {**_held(second["next"]), "then": {}})
    assert third["todo"]["state"] == "done" and third["next"] is None
    assert third["next_error"]["code"] == "rate_limited"


def test_a_foreign_or_stale_complete_then_claims_nothing_from_either_queue(live_server, vend):
    """The one statement claims only once its close has closed: another endpoint's todo
    (not_found, as an unknown id) and a stale attempt_seq (conflict) leave both queues as
    they were."""
    _, mine = vend("then-mine")
    _, theirs = vend("then-theirs")
    base = live_server.url
    held = _claimed(base, mine, "mine, held")
    mine_waiting = _call(base, mine, "create_todo", {"title": "mine, waiting"})["todo"]
    their_held = _claimed(base, theirs, "theirs, held")
    their_waiting = _call(base, theirs, "create_todo", {"title": "theirs, waiting"})["todo"]
    foreign = _call(base, mine, "complete", {**_held(their_held), "then": {}}, status=404)
    unknown = _call(
        base, mine, "complete", {"todo_id": 987654321, "attempt_seq": 1, "then": {}}, status=404
    )
    assert foreign == unknown
    stale = {"todo_id": held["todo"]["id"], "attempt_seq": held["attempt_seq"] + 1, "then": {}}
    refused = _call(base, mine, "complete", stale, status=409)
    assert refused["error"]["code"] == "conflict"
    for todo, state in (
        (held["todo"], "claimed"),
        (mine_waiting, "pending"),
        (their_held["todo"], "claimed"),
        (their_waiting, "pending"),
    ):
        assert Todo.objects.get(pk=todo["id"]).state == state
    assert not TodoAttempt.objects.filter(todo_id__in=[mine_waiting["id"], their_waiting["id"]])
