"""Todos that wait for todos (issue 44): ``after`` (a todo waits until the todos it was made
after are done, or have ended under ``any_end``), children (a holder splits its todo and
waits for the pieces), keys (``max_claimed_per_key``, ``unique_while_active``) and
``max_claimed``. The counts are kept by triggers in the transaction of each ending
(queues/schema/functions.sql), so these tests end prerequisites by every path there is."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from switchboard.queues import sql, sweeper, teams, transitions
from switchboard.queues.db.executor import run
from switchboard.queues.db.plans import Fetch
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import Endpoint, Todo, TodoEvent
from switchboard.queues.transitions import Actor
from tests.queues.helpers import (
    events_of,
    get_todo_for_endpoint,
    get_todo_for_user,
    held_open,
    lock_waiters,
    outcome_in_thread,
    tables_as_json,
    wait_for,
)


def _ledger() -> tuple:
    return tables_as_json("todos", "todo_attempts", "todo_events")


def _done(agent, todo_id: int, **fields) -> None:
    transitions.claim(agent, todo_id)
    transitions.complete(agent, todo_id, **fields)


def _state(todo_id: int) -> tuple[str, str]:
    todo = Todo.objects.get(pk=todo_id)
    return todo.state, todo.waiting_for


def _limit(endpoint: Endpoint, **limits) -> Actor:
    Endpoint.objects.filter(pk=endpoint.pk).update(**limits)
    endpoint.refresh_from_db()
    return Actor.agent(endpoint)


# -- after ----------------------------------------------------------------------------------


def test_a_todo_made_after_others_waits_until_each_is_done(agent, make_todo):
    a, b = make_todo("a"), make_todo("b")
    c = make_todo("c", after=[a.id, b.id])

    assert (c.state, c.waiting_for, c.after_total, c.after_left) == ("waiting", "todos", 2, 2)
    assert transitions.claim_next(agent).todo.id == a.id  # c is passed over: it waits
    with pytest.raises(Conflict):
        transitions.claim(agent, c.id)
    transitions.complete(agent, a.id)
    assert _state(c.id) == ("waiting", "todos")
    assert Todo.objects.get(pk=c.id).after_left == 1

    _done(agent, b.id)  # the last one: pending in the same transaction

    assert _state(c.id) == ("pending", "")
    claim = transitions.claim_next(agent)
    assert claim.todo.id == c.id


def test_a_todo_made_after_done_todos_is_pending_at_once(agent, make_todo):
    a = make_todo("a")
    _done(agent, a.id)
    b = make_todo("b", after=[a.id])
    assert (b.state, b.after_left) == ("pending", 0)


def test_a_prerequisite_that_dies_or_is_canceled_kills_what_waits_for_it(agent, human, make_todo):
    a = make_todo("a", max_attempts=1)
    b = make_todo("b")
    dies, canceled = make_todo("after a", after=[a.id]), make_todo("after b", after=[b.id])

    transitions.claim(agent, a.id)
    transitions.fail(agent, a.id, summary="broke")
    transitions.cancel(human, b.id)

    for todo_id in (dies.id, canceled.id):
        todo = Todo.objects.get(pk=todo_id)
        assert (todo.state, todo.dead_letter_reason) == ("dead", "after_ended")
    shown = get_todo_for_user(human.user, dies.id)
    [edge] = shown.as_api()["todo"]["after"]
    assert (edge["id"], edge["state"]) == (a.id, "dead")


def test_with_any_end_it_starts_when_all_have_ended_whatever_the_outcome(agent, human, make_todo):
    a, b = make_todo("a", max_attempts=1), make_todo("b")
    c = make_todo("c", after=[a.id, b.id], after_policy="any_end")
    transitions.claim(agent, a.id)
    transitions.fail(agent, a.id)
    assert _state(c.id) == ("waiting", "todos")
    transitions.cancel(human, b.id)
    assert _state(c.id) == ("pending", "")


def test_made_after_a_todo_that_can_never_be_done_is_refused_and_nothing_is_written(
    agent, human, make_todo
):
    a = make_todo("a")
    transitions.cancel(human, a.id)
    before = _ledger()
    with pytest.raises(Conflict, match="any_end"):
        make_todo("never", after=[a.id])
    assert _ledger() == before
    assert make_todo("fine", after=[a.id], after_policy="any_end").state == "pending"


def test_unknown_and_foreign_prerequisites_are_not_found_alike(make_todo, vend):

    stranger = teams.get_or_create_team("strangers")
    foreign_endpoint, _ = vend("theirs", team=stranger)
    foreign, _ = transitions.create_todo(Actor.agent(foreign_endpoint), title="theirs")
    said = []
    for missing in (foreign.id, 2**62):
        before = _ledger()
        with pytest.raises(NotFound) as caught:
            make_todo("x", after=[missing])
        said.append(str(caught.value).replace(str(missing), "N"))
        assert _ledger() == before
    assert said[0] == said[1]


@pytest.mark.parametrize(
    "arguments",
    [
        {"after": []},
        {"after": "1"},
        {"after": list(range(1, 102))},
        {"after": ["one"]},
        {"after": [True]},
        {"after_policy": "any_end"},  # without after
        {"after": [1], "after_policy": "some"},
        {"key": "k" * 201},
        {"key": 7},
        {"key": "   "},
        {"unique_while_active": True},  # without a key
        {"key": "k", "unique_while_active": "yes"},
    ],
)
def test_bad_arguments_are_invalid_and_write_nothing(make_todo, arguments):
    before = _ledger()
    with pytest.raises(Invalid):
        make_todo("bad", **arguments)
    assert _ledger() == before


def test_edges_count_once_whatever_happens_to_the_prerequisite_later(agent, human, make_todo):
    """A rerun of a done prerequisite (a new round) is not a second ending of its edge."""
    a, b = make_todo("a"), make_todo("b")
    c = make_todo("c", after=[a.id, b.id])
    _done(agent, a.id)
    transitions.rerun(human, a.id)
    _done(agent, a.id)
    assert Todo.objects.get(pk=c.id).after_left == 1
    _done(agent, b.id)
    assert _state(c.id) == ("pending", "")


def test_a_person_starts_a_waiting_todo_now_and_it_is_audited(agent, human, make_todo):
    a = make_todo("a")
    c = make_todo("c", after=[a.id])
    with pytest.raises(Invalid):
        transitions.start_now(agent, c.id)
    started = transitions.start_now(human, c.id)
    assert (started.state, started.waiting_for) == ("pending", "")
    assert events_of(c.id)[-1] == "start_now"
    with pytest.raises(Conflict):  # it waits for nothing now
        transitions.start_now(human, c.id)
    _done(agent, a.id)  # its prerequisite ending later moves nothing
    assert _state(c.id) == ("pending", "")


def test_readers_see_prerequisites_and_dependents(agent, human, make_todo):
    a = make_todo("a")
    c = make_todo("c", after=[a.id])
    shown = get_todo_for_endpoint(agent.endpoint, a.id).as_api()["todo"]
    assert [(d["id"], d["state"]) for d in shown["dependents"]] == [(c.id, "waiting")]
    shown = get_todo_for_user(human.user, c.id).as_api()["todo"]
    assert [(d["id"], d["state"]) for d in shown["after"]] == [(a.id, "pending")]
    assert (shown["after_total"], shown["after_left"]) == (1, 1)


def test_dependents_past_the_triggers_batch_are_released_by_the_sweeper(agent, make_todo):
    a = make_todo("a")
    waiting = [make_todo(f"w{n}", after=[a.id]).id for n in range(1005)]
    _done(agent, a.id)
    assert _count_states(waiting) == {"pending": 1000, "waiting": 5}
    report = sweeper.sweep_once()
    assert report.released_dependents == 5
    assert _count_states(waiting) == {"pending": 1005}


def _count_states(ids: list[int]) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT state, count(*) FROM todos WHERE id = ANY(%s) GROUP BY state", [ids])
        return dict(cursor.fetchall())


# -- children -------------------------------------------------------------------------------


def test_a_holder_splits_its_todo_waits_for_the_children_and_reads_their_outcomes(
    agent, make_todo, make_endpoint
):
    helper = Actor.agent(make_endpoint("helper"))
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    one = make_todo("piece 1", parent=parent.id)
    two, _ = transitions.create_todo(
        agent, endpoint=helper.endpoint, title="piece 2", parent=parent.id
    )
    assert Todo.objects.get(pk=parent.id).children_open == 2

    closed = transitions.release(agent, parent.id, summary="split", wait_for_children=True)

    assert (closed.todo.state, closed.todo.waiting_for) == ("waiting", "children")
    assert closed.attempt.outcome == "released" and closed.todo.failures == 0
    _done(agent, one.id, result={"n": 1}, summary="one done")
    assert _state(parent.id) == ("waiting", "children")
    transitions.claim(helper, two.id)
    transitions.fail(helper, two.id, summary="no luck", retryable=False)
    assert _state(parent.id) == ("pending", "")

    claim = transitions.claim_next(agent)
    assert claim.todo.id == parent.id
    children = {c["title"]: c for c in claim.as_api()["children"]}
    assert children["piece 1"]["state"] == "done" and children["piece 1"]["result"] == {"n": 1}
    assert children["piece 1"]["summary"] == "one done"
    assert children["piece 2"]["state"] == "dead" and children["piece 2"]["summary"] == "no luck"


@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
def test_a_complete_with_then_claims_what_it_released_before_what_came_later(
    agent, make_todo, keyed
):
    """A complete with ``then`` claims as claim_next would once the close is made. The
    close of a parent's last child releases the parent (and of a prerequisite, what waits
    for it) at the end of its statement, after a one-statement pick would have looked: so
    such a close claims in a statement of its own, and the released todo, older than the
    other one waiting, comes first. (The model checker found the one-statement pick handing
    back the later todo, or nothing.)"""
    if keyed:
        agent = _limit(agent.endpoint, max_claimed_per_key=1)
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    child = make_todo("piece", parent=parent.id, key="repo" if keyed else "")
    transitions.release(agent, parent.id, wait_for_children=True)
    first = make_todo("first")
    after = make_todo("after the first", after=[first.id])
    later = make_todo("later")

    transitions.claim(agent, child.id)
    then = transitions.close_then_claim_next(
        agent, transitions.Close.complete(), child.id, claim=transitions.ClaimArgs()
    )
    assert then.closed.todo.state == "done"
    assert (then.next, then.claim.todo.id) == (transitions.Next.CLAIMED, parent.id)

    transitions.claim(agent, first.id)
    then = transitions.close_then_claim_next(
        agent, transitions.Close.complete(), first.id, claim=transitions.ClaimArgs()
    )
    assert then.claim.todo.id == after.id  # made before `later`, claimable since this close
    assert _state(later.id) == ("pending", "")


def test_waiting_for_no_open_children_is_a_plain_release(agent, make_todo):
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    child = make_todo("piece", parent=parent.id)
    # The child is claimed and finished while the parent still holds its lease.
    transitions.claim(agent, child.id)
    transitions.complete(agent, child.id)
    closed = transitions.release(agent, parent.id, wait_for_children=True)
    assert (closed.todo.state, closed.todo.children_total, closed.todo.children_open) == (
        "pending",
        1,
        0,
    )


def test_only_the_holder_makes_children_and_a_foreign_parent_is_unknown(
    agent, make_todo, make_endpoint, vend
):

    parent = make_todo("plan")
    with pytest.raises(Conflict):  # nobody holds it
        make_todo("piece", parent=parent.id)
    transitions.claim(agent, parent.id)
    other = Actor.agent(make_endpoint("other"))
    with pytest.raises(Conflict):  # another endpoint of the team does not hold it
        transitions.create_todo(other, title="piece", parent=parent.id)
    stranger = teams.get_or_create_team("strangers")
    theirs = Actor.agent(vend("theirs", team=stranger)[0])
    said = []
    for parent_id in (parent.id, 2**62):
        before = _ledger()
        with pytest.raises(NotFound) as caught:
            transitions.create_todo(theirs, title="piece", parent=parent_id)
        said.append(str(caught.value))
        assert _ledger() == before
    assert said[0] == said[1]


def test_canceling_a_parent_cancels_its_unfinished_children_and_theirs(agent, human, make_todo):
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    done = make_todo("finished piece", parent=parent.id)
    _done(agent, done.id)
    held = make_todo("held piece", parent=parent.id)
    held_claim = transitions.claim(agent, held.id)
    grandchild = make_todo("a piece of the held piece", parent=held.id)
    waiting = make_todo("still pending", parent=parent.id)
    transitions.release(agent, parent.id, wait_for_children=True)

    transitions.cancel(human, parent.id)

    assert Todo.objects.get(pk=parent.id).state == "canceled"
    assert {t: _state(t)[0] for t in (done.id, held.id, grandchild.id, waiting.id)} == {
        done.id: "done",
        held.id: "canceled",
        grandchild.id: "canceled",
        waiting.id: "canceled",
    }
    assert "cancel_child" in events_of(grandchild.id)
    with pytest.raises(Conflict):  # the held piece's holder is fenced out
        transitions.heartbeat(agent, held.id, attempt_seq=held_claim.attempt_seq)


def test_a_person_starts_a_parent_without_waiting_for_its_children(agent, human, make_todo):
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    make_todo("piece", parent=parent.id)
    transitions.release(agent, parent.id, wait_for_children=True)
    assert transitions.start_now(human, parent.id).state == "pending"
    assert transitions.claim_next(agent).todo.id == parent.id


# -- keys -----------------------------------------------------------------------------------


def test_a_key_at_its_limit_is_passed_over_without_blocking_the_others(endpoint, make_todo):
    agent = _limit(endpoint, max_claimed_per_key=1)
    first = make_todo("repo x 1", key="repo-x", priority=5)
    second = make_todo("repo x 2", key="repo-x", priority=5)
    other = make_todo("repo y", key="repo-y")
    plain = make_todo("no key")

    claimed = [transitions.claim_next(agent).todo.id for _ in range(3)]
    assert claimed == [first.id, other.id, plain.id]
    assert transitions.claim_next(agent) is None
    with pytest.raises(Conflict, match="max_claimed_per_key"):
        transitions.claim(agent, second.id)

    transitions.complete(agent, first.id)
    assert transitions.claim_next(agent).todo.id == second.id


def test_a_limit_set_later_counts_the_keys_already_claimed(endpoint, make_todo):
    """Nothing is counted while an endpoint has no limit: a limit set later counts its keys'
    claimed todos themselves, so what was claimed before it already counts."""
    agent = _limit(endpoint)
    held, waiting = make_todo("x 1", key="repo-x"), make_todo("x 2", key="repo-x")
    other = make_todo("y", key="repo-y")
    transitions.claim(agent, held.id)
    agent = _limit(endpoint, max_claimed_per_key=1)
    with pytest.raises(Conflict, match="max_claimed_per_key"):
        transitions.claim(agent, waiting.id)
    assert transitions.claim_next(agent).todo.id == other.id
    assert transitions.claim_next(agent) is None
    transitions.release(agent, held.id)
    assert transitions.claim(agent, waiting.id).todo.id == waiting.id


def test_max_claimed_caps_what_an_endpoint_holds(endpoint, make_todo):
    agent = _limit(endpoint, max_claimed=2)
    todos = [make_todo(f"t{n}") for n in range(3)]
    assert transitions.claim_next(agent) and transitions.claim_next(agent)
    assert transitions.claim_next(agent) is None
    with pytest.raises(Conflict, match="max_claimed"):
        transitions.claim(agent, todos[2].id)
    transitions.complete(agent, todos[0].id)
    assert transitions.claim_next(agent).todo.id == todos[2].id


def test_unique_while_active_returns_the_open_todo_of_the_key(agent, make_todo):
    first, created = transitions.create_todo(
        agent, title="sync", key="repo-x", unique_while_active=True
    )
    again, again_created = transitions.create_todo(
        agent, title="sync again", key="repo-x", unique_while_active=True
    )
    assert created and not again_created and again.id == first.id
    _done(agent, first.id)
    fresh, fresh_created = transitions.create_todo(
        agent, title="sync", key="repo-x", unique_while_active=True
    )
    assert fresh_created and fresh.id != first.id
    assert get_todo_for_endpoint(agent.endpoint, fresh.id).as_api()["todo"]["key"] == "repo-x"


def test_a_claim_of_a_keyed_todo_counts_and_every_ending_gives_it_back(endpoint, human, make_todo):
    agent = _limit(endpoint, max_claimed_per_key=1)
    todo = make_todo("k", key="k", max_attempts=3)
    for end in (
        lambda: transitions.release(agent, todo.id),
        lambda: transitions.fail(agent, todo.id),
        lambda: transitions.cancel(human, todo.id),
    ):
        if Todo.objects.get(pk=todo.id).state == "retry_wait":
            transitions.retry_now(human, todo.id)
        transitions.claim(agent, todo.id)
        assert _key_claims(endpoint) == {"k": 1}
        end()
        assert _key_claims(endpoint) == {}


def test_a_limit_lowered_after_the_claimer_read_it_still_holds(endpoint, make_todo):
    """The limit a claim is held to is the endpoint's as the database has it: a claimer that
    read it before it came down to 1 (its process's copy, as a token cache holds it for the
    milliseconds until it hears the change) picks by the old one, and the trigger's count
    refuses the key's second claim; claim_next then reads the limit again and picks past the
    key."""
    stale = _limit(endpoint, max_claimed_per_key=2)
    first, second = make_todo("x1", key="repo-x"), make_todo("x2", key="repo-x")
    other = make_todo("y", key="repo-y")
    assert transitions.claim_next(stale).todo.id == first.id
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed_per_key=1)
    assert stale.endpoint.max_claimed_per_key == 2
    with pytest.raises(Conflict, match="max_claimed_per_key"):
        transitions.claim(stale, second.id)
    assert transitions.claim_next(stale).todo.id == other.id
    assert _key_claims(endpoint) == {"repo-x": 1, "repo-y": 1}
    transitions.complete(stale, first.id)
    assert transitions.claim_next(stale).todo.id == second.id  # the key is free again


def test_a_limit_lifted_after_the_claimer_read_it_lets_the_key_be_claimed(endpoint, make_todo):
    """The other way: a claimer that read a limit of 1 before it was lifted. Its claim_next
    still passes the key over by the old limit (nothing refuses it, so it reads nothing
    again) until its process hears the change; a claim of the todo itself is refused by
    nothing: the trigger counts by the database's limit, which is none."""
    stale = _limit(endpoint, max_claimed_per_key=1)
    first, second = make_todo("x1", key="repo-x"), make_todo("x2", key="repo-x")
    assert transitions.claim_next(stale).todo.id == first.id
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed_per_key=None)
    assert transitions.claim_next(stale) is None
    assert transitions.claim(stale, second.id).todo.id == second.id
    assert _key_claims(endpoint) == {"repo-x": 2}


def test_a_limit_lifted_between_a_refusal_and_the_read_again_claims_by_the_plain_pick(
    endpoint, make_todo
):
    """The race between the two: the trigger refuses a stale claimer's pick by the limit the
    database had, and by the time claim_next reads the limit again it was lifted. The
    claim then picks as an endpoint without a limit does (the keyed pick, with no limit to
    compare with, would pick nothing). The lift is made at that step of the claim's plan, as
    the other session's commit would land there."""
    stale = _limit(endpoint, max_claimed_per_key=2)
    first, second = make_todo("x1", key="repo-x"), make_todo("x2", key="repo-x")
    assert transitions.claim_next(stale).todo.id == first.id
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed_per_key=1)

    def lifted_at_the_read_again(plan):
        value, error = None, None
        while True:
            try:
                step = plan.throw(error) if error is not None else plan.send(value)
            except StopIteration as stop:
                return stop.value
            if isinstance(step, Fetch) and step.statement is sql.KEY_LIMIT_OF_ENDPOINT:
                Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed_per_key=None)
                lifted.append(step)
            try:
                value, error = (yield step), None
            except DatabaseError as exc:
                value, error = None, exc

    lifted: list[Fetch] = []
    claimed = run(lifted_at_the_read_again(transitions.claim_next.plan(stale)))
    assert len(lifted) == 1  # the trigger refused the first pick, and the limit was read again
    assert claimed is not None, "the plain pick claimed nothing"
    assert claimed.todo.id == second.id
    assert _key_claims(endpoint) == {"repo-x": 2}


def _key_claims(endpoint) -> dict[str, int]:
    """The endpoint's claimed todos a key, of the keys that have any."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT key, count(*) FROM todos WHERE endpoint_id = %s AND state = 'claimed'"
            " AND key <> '' GROUP BY key",
            [endpoint.pk],
        )
        return dict(cursor.fetchall())


def test_the_waits_are_audited_apart_from_the_todos_own_story(agent, human, make_todo):
    parent = make_todo("plan")
    transitions.claim(agent, parent.id)
    child = make_todo("piece", parent=parent.id)
    transitions.cancel(human, parent.id)
    assert TodoEvent.objects.filter(todo_id=child.id, kind="cancel_child").count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first_commits", [True, False])
def test_two_claims_of_one_key_at_once_take_turns(endpoint, make_todo, first_commits):
    """The trigger counts a claimed key under an advisory lock of the key, held to the
    claim's commit: the second of two claims at once waits for the first's. Committed, the
    second counts 2 over the limit of 1 and is refused; rolled back, the second counts 1 and
    holds the key."""
    agent = _limit(endpoint, max_claimed_per_key=1)
    first, second = make_todo("a", key="repo-new"), make_todo("b", key="repo-new")
    with held_open(lambda: transitions.claim(agent, first.id), commit=first_commits):
        two, outcome = outcome_in_thread(lambda: transitions.claim(agent, second.id))
        assert wait_for(lambda: lock_waiters() == 1)  # the second's count waits on the first
    two.join(30)
    if first_commits:
        assert isinstance(outcome[0], Conflict) and "max_claimed_per_key" in str(outcome[0])
        assert Todo.objects.get(pk=second.id).state == "pending"
    else:
        assert outcome[0].todo.id == second.id
        assert Todo.objects.get(pk=first.id).state == "pending"
    assert _key_claims(endpoint) == {"repo-new": 1}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first_commits", [True, False])
def test_claim_next_refused_by_the_key_looks_again_past_it(endpoint, make_todo, first_commits):
    """claim_next's snapshot misses a claim of the same key not yet committed: it picks the
    key's other todo, and the trigger's count waits for the first claim's lock of the key.
    Committed, the trigger refuses the second (SWK01) and claim_next runs its statement again,
    which sees the key at its limit and takes the other key's todo; rolled back, the second
    holds the key."""
    agent = _limit(endpoint, max_claimed_per_key=1)
    first, second = make_todo("a1", key="repo-a"), make_todo("a2", key="repo-a")
    other = make_todo("b1", key="repo-b")
    with held_open(lambda: transitions.claim(agent, first.id), commit=first_commits):
        two, outcome = outcome_in_thread(lambda: transitions.claim_next(agent))
        assert wait_for(lambda: lock_waiters() == 1)  # the count waits on the first's lock
    two.join(30)
    taken = outcome[0]
    assert not isinstance(taken, BaseException), repr(taken)
    if first_commits:
        assert taken.todo.id == other.id
        assert Todo.objects.get(pk=second.id).state == "pending"
        assert _key_claims(endpoint) == {"repo-a": 1, "repo-b": 1}
    else:
        assert taken.todo.id == second.id
        assert Todo.objects.get(pk=first.id).state == "pending"
        assert _key_claims(endpoint) == {"repo-a": 1}


@pytest.mark.django_db(transaction=True)
def test_an_end_holds_nothing_a_claim_of_its_key_waits_for(endpoint, make_todo):
    """An end writes no count: while the transaction that completed a keyed todo is still
    open, a claim of another todo of that key waits for nothing. It counts the ended todo
    still claimed (the end is not committed) and is refused at once; once the end commits,
    the key is free. (A count's row that the end updated was held to its commit: two
    complete-with-then statements, each ending the key the other claimed, waited for each
    other until deadlock_timeout.)"""
    agent = _limit(endpoint, max_claimed_per_key=1)
    ending, other = make_todo("a1", key="repo-a"), make_todo("a2", key="repo-a")
    held = transitions.claim(agent, ending.id)
    end = lambda: transitions.complete(agent, ending.id, attempt_seq=held.attempt_seq)  # noqa: E731
    with held_open(end, commit=True):
        thread, outcome = outcome_in_thread(lambda: transitions.claim(agent, other.id))
        thread.join(10)
        assert not thread.is_alive()  # it waited for nothing the end holds
        assert isinstance(outcome[0], Conflict) and "max_claimed_per_key" in str(outcome[0])
    assert transitions.claim(agent, other.id).todo.id == other.id
    assert _key_claims(endpoint) == {"repo-a": 1}


@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_never_hold_two_of_one_key(endpoint, make_todo):
    """Eight threads claim at once from two keys' 40 todos with max_claimed_per_key 1: a
    claim the trigger refuses (another of its key committed after the statement's snapshot)
    looks again past that key, so exactly one of each key is claimed and nobody errs."""
    import threading

    from django.db import connections

    agent = _limit(endpoint, max_claimed_per_key=1)
    for n in range(20):
        make_todo(f"x{n}", key="repo-x")
        make_todo(f"y{n}", key="repo-y")
    claimed, errors = [], []
    start = threading.Barrier(8)

    def claimer() -> None:
        try:
            start.wait()
            while (claim := transitions.claim_next(agent)) is not None:
                claimed.append(claim.todo.key)
        except Exception as exc:  # noqa: BLE001 (the test reports it)
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert sorted(claimed) == ["repo-x", "repo-y"]
    assert _key_claims(endpoint) == {"repo-x": 1, "repo-y": 1}
