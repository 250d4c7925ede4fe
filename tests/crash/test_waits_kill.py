"""Processes SIGKILLed while todos wait for todos or for children (issue 44): nothing stays
waiting for ever, nothing is released twice.

- A prerequisite with 1,500 dependents is completed over HTTP and the server is killed as
  soon as the complete has answered: the trigger released its batch of 1,000 in that commit.
  The sweeper that takes the other 500 is killed inside its batch (it blocks on a dependent's
  row lock the test holds), so its batch rolls back; a sweeper started afterwards, woken by
  nothing but its own pass, releases the 500, each once.
- A parent waits for two children; the server is killed right after the last child's
  complete (and once with that complete in flight): the parent is pending once, and the
  next claim after a restart is the parent, with its children's outcomes in it.

Real processes: ``switchboard serve`` and ``switchboard sweep``, each killed as a process
group; agents speaking HTTP through ``switchboard.client``.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from django.db import connection

from switchboard.client import Client
from switchboard.queues import transitions
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from switchboard.queues.transitions.waits import RELEASE_BATCH
from tests.crash.harness import ignore_transport, kill_blocked, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DEPENDENTS = 1500


def _rows(sql: str, params=None) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _states(ids: list[int]) -> dict[str, int]:
    return dict(_rows("SELECT state, count(*) FROM todos WHERE id = ANY(%s) GROUP BY state", [ids]))


def _history(ids: list[int]) -> tuple[int, int]:
    """The dependents' attempts and audit rows (a release writes neither)."""
    [(attempts,)] = _rows("SELECT count(*) FROM todo_attempts WHERE todo_id = ANY(%s)", [ids])
    [(events,)] = _rows("SELECT count(*) FROM todo_events WHERE todo_id = ANY(%s)", [ids])
    return attempts, events


def _edges(prerequisite: int) -> dict[str, int]:
    return dict(
        _rows(
            "SELECT ended, count(*) FROM todo_after WHERE after_id = %s GROUP BY ended",
            [prerequisite],
        )
    )


def test_a_prerequisite_with_more_dependents_than_a_batch_releases_each_once_across_kills(
    vend, procs, crash_env, raw_db
):
    endpoint, token = vend("crash-waits")
    agent = Actor.agent(endpoint)
    prerequisite, _ = transitions.create_todo(agent, title="migrate the schema")
    dependents = [
        transitions.create_todo(agent, title=f"backfill {n}", after=[prerequisite.id])[0].id
        for n in range(DEPENDENTS)
    ]
    dependents.sort()
    assert _states(dependents) == {"waiting": DEPENDENTS}
    history = _history(dependents)

    # A dependent past the trigger's batch (it takes the lowest ids) is locked, so that the
    # sweeper's batch blocks on it, with its edges marked but not committed.
    blocker = dependents[RELEASE_BATCH + DEPENDENTS // 6]
    holder, observer = raw_db(autocommit=False), raw_db()
    holder.execute("SELECT 1 FROM todos WHERE id = %s FOR UPDATE", [blocker])
    env = {**crash_env, "SWITCHBOARD_SWEEP_INTERVAL_SECONDS": "1"}
    sweeper = procs.switchboard("sweep-1", "sweep", env=env)
    server, base = procs.serve(crash_env)
    worker = Client(base, token)

    claimed = worker.claim_next()
    assert claimed["todo"]["id"] == prerequisite.id  # the dependents wait: not claimable
    done = worker.complete(todo_id=prerequisite.id, attempt_seq=claimed["attempt_seq"])
    assert done["todo"]["state"] == "done"
    server.kill()  # right after the commit

    # The trigger's batch was released in the complete's transaction, the lowest ids first.
    assert _states(dependents) == {"pending": RELEASE_BATCH, "waiting": DEPENDENTS - 1000}
    assert _states(dependents[:RELEASE_BATCH]) == {"pending": RELEASE_BATCH}

    # The sweeper takes the rest and blocks on the held row; it is killed there.
    kill_blocked(
        sweeper,
        holder,
        observer,
        what="the sweeper to block on the held dependent",
        logs=procs.logs,
    )
    # Its batch rolled back: the 500 still wait, their edges unmarked.
    assert _states(dependents) == {"pending": RELEASE_BATCH, "waiting": DEPENDENTS - 1000}
    assert _edges(prerequisite.id) == {"done": RELEASE_BATCH, "": DEPENDENTS - RELEASE_BATCH}

    # No notification is pending now: a new sweeper finds the leftovers by its own pass.
    procs.switchboard("sweep-2", "sweep", env=env)
    wait_until(
        lambda: _states(dependents) == {"pending": DEPENDENTS},
        seconds=60,
        what="the second sweeper to release the rest",
        logs=procs.logs,
    )

    # Each released once: every edge marked once, each count down to 0 (a second count
    # would be -1), no attempt and no audit row written, each claimable.
    assert _edges(prerequisite.id) == {"done": DEPENDENTS}
    assert dict(
        _rows("SELECT after_left, count(*) FROM todos WHERE id = ANY(%s) GROUP BY 1", [dependents])
    ) == {0: DEPENDENTS}
    assert _history(dependents) == history
    [(waiting_for,)] = _rows(
        "SELECT array_agg(DISTINCT waiting_for) FROM todos WHERE id = ANY(%s)", [dependents]
    )
    assert waiting_for == [""]
    server, base = procs.serve(crash_env)
    worker = Client(base, token)
    first = worker.claim_next()
    assert first["todo"]["id"] == dependents[0]
    assert Todo.objects.get(pk=dependents[-1]).state == "pending"


def test_a_server_killed_as_the_last_child_ends_leaves_the_parent_pending_once(
    vend, procs, crash_env
):
    _, token = vend("crash-planner")
    server, base = procs.serve(crash_env)
    planner = Client(base, token)
    parent_id = planner.create_todo(title="plan the release")["todo"]["id"]
    claimed = planner.claim_next()
    assert claimed["todo"]["id"] == parent_id
    children = [
        planner.create_todo(title=f"piece {n}", parent=parent_id)["todo"]["id"] for n in (1, 2, 3)
    ]
    waited = planner.release(
        todo_id=parent_id, attempt_seq=claimed["attempt_seq"], wait_for_children=True
    )
    assert (waited["todo"]["state"], waited["todo"]["waiting_for"]) == ("waiting", "children")

    # The first two children are worked; the parent still waits.
    for child in children[:2]:
        piece = planner.claim_next()
        assert piece["todo"]["id"] == child  # the parent is not claimable while it waits
        planner.complete(todo_id=child, attempt_seq=piece["attempt_seq"], result={"piece": child})
    assert Todo.objects.get(pk=parent_id).state == "waiting"

    # The last child's complete is in flight when the server dies: it committed or it did
    # not; sent again to the next server it is taken or replayed, never counted twice.
    last = planner.claim_next()
    assert last["todo"]["id"] == children[2]
    ids = {"todo_id": children[2], "attempt_seq": last["attempt_seq"]}
    in_flight = threading.Thread(
        target=lambda: ignore_transport(lambda: planner.complete(**ids, result={"piece": 3})),
        daemon=True,
    )
    in_flight.start()
    time.sleep(random.choice([0, 0.005, 0.02, 0.1]))
    server.kill()
    in_flight.join(timeout=10)
    parent = Todo.objects.get(pk=parent_id)
    committed = Todo.objects.get(pk=children[2]).state == "done"
    assert (parent.state, parent.children_open) == (("pending", 0) if committed else ("waiting", 1))

    server, base = procs.serve(crash_env)
    planner = Client(base, token)
    again = planner.complete(**ids, result={"piece": 3})
    assert again["replayed"] == committed
    server.kill()  # right after the last child's commit, before anyone claims the parent

    parent = Todo.objects.get(pk=parent_id)
    assert (parent.state, parent.waiting_for, parent.children_open) == ("pending", "", 0)
    [(attempts, released)] = _rows(
        "SELECT count(*), count(*) FILTER (WHERE outcome = 'released') FROM todo_attempts"
        " WHERE todo_id = %s",
        [parent_id],
    )
    assert (attempts, released) == (1, 1)

    server, base = procs.serve(crash_env)
    planner = Client(base, token)
    back = planner.claim_next()
    assert back["todo"]["id"] == parent_id and back["attempt_seq"] == 2
    shown = {c["id"]: c for c in back["children"]}
    assert sorted(shown) == sorted(children)
    assert all(c["state"] == "done" for c in shown.values())
    assert [shown[c]["result"] for c in children] == [
        {"piece": children[0]},
        {"piece": children[1]},
        {"piece": 3},
    ]
    assert planner.claim_next()["todo"] is None  # pending once: nothing else to claim
    assert server.alive()
