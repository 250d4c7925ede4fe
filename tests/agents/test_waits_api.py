"""Todos that wait (issue 44) as agents use them, against the live server: a planner splits
its todo into children over MCP, two agents work them side by side and the planner's next
claim reads their outcomes; a todo made ``after`` another wakes a waiting long-poll when the
last prerequisite completes; a key keeps two agents off one repository; bad arguments and
other teams' ids answer as documented, writing nothing."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from switchboard.agents import doorbell
from switchboard.queues import endpoints, teams, transitions
from switchboard.queues.models import Endpoint, Todo
from tests.agents.api_helpers import check_shape, keyed_endpoint, ok, post
from tests.agents.test_mcp import call, mcp_client, run
from tests.queues.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def refused(base: str, token: str, verb: str, body: dict, status: int) -> dict:
    response = post(base, verb, body, token=token)
    data = check_shape(verb, response)
    assert response.status_code == status, data
    return data["error"]


def test_a_planner_splits_its_todo_over_mcp_and_reads_its_childrens_outcomes(live_server, vend):
    _, planner_token = vend("planner")
    _, worker_token = vend("worker")
    base = live_server.url
    todo = ok(base, planner_token, "create_todo", {"title": "ship the release"})["todo"]

    async def plan() -> None:
        async with mcp_client(base, planner_token) as client:
            claimed = await call(client, "claim_next", {"claimant": "planner/1"})
            assert claimed["todo"]["id"] == todo["id"]
            for piece in ("notes", "build", "tag"):
                made = await call(
                    client,
                    "create_todo",
                    {"title": piece, "to": "worker", "parent": todo["id"], "key": "repo-app"},
                )
                assert made["todo"]["parent"] == todo["id"]
            waited = await call(
                client,
                "release",
                {"todo_id": todo["id"], "summary": "split in three", "wait_for_children": True},
            )
            assert waited["todo"]["state"] == "waiting"
            assert waited["todo"]["waiting_for"] == "children"
            assert waited["todo"]["children_open"] == 3

    run(plan())

    # Two workers side by side, each claiming and completing until nothing is left.
    results: list[str] = []

    def work(n: int) -> None:
        while True:
            claim = ok(base, worker_token, "claim_next", {"claimant": f"worker/{n}"})
            if claim["todo"] is None:
                return
            title = claim["todo"]["title"]
            ok(
                base,
                worker_token,
                "complete",
                {"todo_id": claim["todo"]["id"], "result": {"piece": title}, "summary": "ok"},
            )
            results.append(title)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == ["build", "notes", "tag"]

    async def merge() -> dict:
        async with mcp_client(base, planner_token) as client:
            return await call(client, "claim_next", {"claimant": "planner/2"})

    claimed = run(merge())
    assert claimed["todo"]["id"] == todo["id"] and claimed["attempt_seq"] == 2
    children = {child["title"]: child for child in claimed["children"]}
    assert set(children) == {"notes", "build", "tag"}
    assert all(c["state"] == "done" and c["summary"] == "ok" for c in children.values())
    assert children["tag"]["result"] == {"piece": "tag"}
    [prior] = claimed["prior_attempts"]
    assert prior["outcome"] == "released" and prior["summary"] == "split in three"
    shown = ok(base, planner_token, "get_todo", {"todo_id": todo["id"]})["todo"]
    assert len(shown["children"]) == 3 and shown["children_open"] == 0


def test_the_last_prerequisite_wakes_a_waiting_long_poll(live_server, vend):
    _, token = vend("pipeline")
    base = live_server.url
    first = ok(base, token, "create_todo", {"title": "extract"})["todo"]
    claim = ok(base, token, "claim", {"todo_id": first["id"]})
    second = ok(base, token, "create_todo", {"title": "load", "after": [first["id"]]})["todo"]
    assert (second["state"], second["waiting_for"], second["after_left"]) == ("waiting", "todos", 1)

    woken: dict = {}

    def poll() -> None:
        started = time.monotonic()
        woken["claim"] = ok(base, token, "claim_next", {"wait_seconds": 20})
        woken["after"] = time.monotonic() - started

    waiter = threading.Thread(target=poll)
    waiter.start()
    time.sleep(0.5)  # the poll is waiting: nothing is claimable
    completed_at = time.monotonic()
    ok(base, token, "complete", {"todo_id": first["id"], "attempt_seq": claim["attempt_seq"]})
    waiter.join(30)
    assert woken["claim"]["todo"]["id"] == second["id"]
    assert woken["after"] < 20 and time.monotonic() - completed_at < 5


def test_a_key_keeps_two_agents_off_one_repository(live_server, vend, team):
    _, token, base = keyed_endpoint(live_server, vend, "repo-bots")
    for n in range(4):
        ok(base, token, "create_todo", {"title": f"x{n}", "key": "repo-x"})
    ok(base, token, "create_todo", {"title": "y", "key": "repo-y"})

    first = ok(base, token, "claim_next", {"claimant": "a"})
    second = ok(base, token, "claim_next", {"claimant": "b"})
    assert {first["todo"]["key"], second["todo"]["key"]} == {"repo-x", "repo-y"}
    assert ok(base, token, "claim_next", {"claimant": "c"})["todo"] is None
    x = first if first["todo"]["key"] == "repo-x" else second
    ok(base, token, "complete", {"todo_id": x["todo"]["id"]})
    assert ok(base, token, "claim_next", {"claimant": "c"})["todo"]["key"] == "repo-x"
    assert Todo.objects.filter(key="repo-x", state="claimed").count() == 1

    made = ok(
        base,
        token,
        "create_todo",
        {"title": "x again", "key": "repo-x", "unique_while_active": True},
    )
    assert made["created"] is False and made["todo"]["key"] == "repo-x"


def test_a_long_poll_behind_a_held_key_wakes_when_the_key_is_freed(live_server, vend, monkeypatch):
    """Only the ring wakes it (the doorbell's periodic look is put off past the poll's wait):
    the long-poll marked its endpoint before it waited, so the freed key rang."""
    monkeypatch.setattr(doorbell, "RECHECK_SECONDS", 3600.0)
    endpoint, token, base = keyed_endpoint(live_server, vend, "one-at-a-time")
    for n in range(2):
        ok(base, token, "create_todo", {"title": f"x{n}", "key": "repo-x"})
    held = ok(base, token, "claim_next", {"claimant": "a"})
    claim, _ = _woken_by_its_complete(base, token, endpoint, held)
    assert claim["todo"]["key"] == "repo-x"
    assert claim["todo"]["id"] != held["todo"]["id"]


def _woken_by_its_complete(
    base: str, token: str, endpoint, held: dict, free=None
) -> tuple[dict, float]:
    """A claim_next long-poll (20 s) parked behind a limit, then ``held``'s complete (or
    ``free()``): what the poll answered, and the seconds from the complete's call to that
    answer."""
    woken: dict = {}

    def poll() -> None:
        woken["claim"] = ok(base, token, "claim_next", {"claimant": "b", "wait_seconds": 20})
        woken["at"] = time.monotonic()

    def parked() -> int:  # the live server runs in this process: its doorbells' waiters
        return sum(len(bell._waiters.get(endpoint.pk, ())) for bell in doorbell.doorbells.all())

    waiter = threading.Thread(target=poll)
    waiter.start()
    # It looked, marked, looked again and waits: the limit is reached.
    assert wait_for(lambda: parked() or "claim" in woken, seconds=10) and "claim" not in woken
    started = time.monotonic()
    if free is None:
        ok(base, token, "complete", {"todo_id": held["todo"]["id"]})
    else:
        free()
    waiter.join(30)
    return woken["claim"], woken["at"] - started


def test_a_long_poll_behind_max_claimed_wakes_when_a_claim_is_freed(live_server, vend, monkeypatch):
    """The same under max_claimed (all keys): the long-poll refused by the cap marked its
    endpoint before it waited, so the complete that freed a claim rang (the doorbell's periodic
    look put off past the poll's wait, as above)."""
    monkeypatch.setattr(doorbell, "RECHECK_SECONDS", 3600.0)
    endpoint, token = vend("capped")
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed=1)
    live_server.forgets(endpoint)
    base = live_server.url
    for n in range(2):
        ok(base, token, "create_todo", {"title": f"t{n}"})
    held = ok(base, token, "claim_next", {"claimant": "a"})
    claim, seconds = _woken_by_its_complete(base, token, endpoint, held)
    assert claim["todo"]["title"] == "t1"
    assert seconds < 10  # the ring, not the poll's 20 s running out


def test_a_long_poll_behind_max_claimed_wakes_when_the_sweeper_dead_letters_a_lapsed_lease(
    live_server, vend, monkeypatch
):
    """A lease that lapsed on its last allowed attempt, dead-lettered by the sweeper's reap,
    frees a claim as a complete does: the long-poll held back by max_claimed wakes (its
    periodic look put off past the poll's wait)."""
    monkeypatch.setattr(doorbell, "RECHECK_SECONDS", 3600.0)
    endpoint, token = vend("capped-reaped")
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed=1)
    live_server.forgets(endpoint)
    base = live_server.url
    ok(base, token, "create_todo", {"title": "t0", "max_attempts": 1})
    ok(base, token, "create_todo", {"title": "t1"})
    held = ok(base, token, "claim_next", {"claimant": "a"})
    assert held["todo"]["title"] == "t0"

    def lapse_and_reap() -> None:
        Todo.objects.filter(pk=held["todo"]["id"]).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        assert [c.todo.state for c in transitions.reap_lapsed()] == ["dead"]

    claim, seconds = _woken_by_its_complete(base, token, endpoint, held, free=lapse_and_reap)
    assert claim["todo"]["title"] == "t1"
    assert seconds < 10  # the ring, not the poll's 20 s running out


@pytest.mark.parametrize(
    "body",
    [
        {"title": "t", "after": []},
        {"title": "t", "after": "7"},
        {"title": "t", "after": [1.5]},
        {"title": "t", "after_policy": "any_end"},
        {"title": "t", "after": [1], "after_policy": "whenever"},
        {"title": "t", "key": "k" * 201},
        {"title": "t", "unique_while_active": True},
        {"title": "t", "parent": "one"},
    ],
)
def test_bad_wait_arguments_are_invalid_and_write_nothing(live_server, vend, body):
    _, token = vend("strict")
    error = refused(live_server.url, token, "create_todo", body, 400)
    assert error["code"] == "invalid"
    assert Todo.objects.count() == 0


def test_another_teams_todo_answers_as_an_unknown_one(live_server, vend):
    _, token = vend("ours")
    strangers = teams.get_or_create_team("strangers")
    theirs, their_token = endpoints.vend(strangers, "theirs", verbs="all")
    foreign = ok(live_server.url, their_token, "create_todo", {"title": "theirs"})["todo"]
    ok(live_server.url, their_token, "claim", {"todo_id": foreign["id"]})
    said = []
    for todo_id in (foreign["id"], 2**62):
        for field in ("after", "parent"):
            value = [todo_id] if field == "after" else todo_id
            error = refused(
                live_server.url, token, "create_todo", {"title": "t", field: value}, 404
            )
            said.append((field, error["code"], error["message"].replace(str(todo_id), "N")))
    assert said[:2] == said[2:]
    assert Todo.objects.exclude(pk=foreign["id"]).count() == 0


def test_release_wait_for_children_by_a_non_holder_is_refused(live_server, vend):
    _, token = vend("holder")
    base = live_server.url
    todo = ok(base, token, "create_todo", {"title": "plan"})["todo"]
    refused(base, token, "release", {"todo_id": todo["id"], "wait_for_children": True}, 409)
    claim = ok(base, token, "claim", {"todo_id": todo["id"]})
    refused(
        base,
        token,
        "release",
        {"todo_id": todo["id"], "wait_for_children": "yes", "attempt_seq": claim["attempt_seq"]},
        400,
    )
    assert Todo.objects.get(pk=todo["id"]).state == "claimed"
