"""The two executors run the same plans: every rule of a transition written once
(queues/db/executor.py). The async one on psycopg's async pool, against the same database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError

from switchboard.queues import db, sql, transitions
from switchboard.queues.db import Atomic, Fetch, Statement
from switchboard.queues.db.availability import PING
from switchboard.queues.errors import Conflict
from switchboard.queues.models import Todo, TodoAttempt
from switchboard.queues.transitions import Actor

pytestmark = pytest.mark.django_db(transaction=True)


def arun(plan):
    async def go():
        try:
            return await db.arun(plan)
        finally:
            await db.close_async_pool()

    return asyncio.run(go())


def test_a_claim_and_a_fenced_complete_run_the_same_on_the_async_pool(endpoint):
    todo, created = arun(transitions.create_todo.plan(Actor.agent(endpoint), title="async"))
    assert created
    claim = arun(transitions.claim_next.plan(Actor.agent(endpoint), require_fence=True))
    assert claim.todo.id == todo.id and claim.lease_token
    agent = Actor.agent(endpoint)
    with pytest.raises(Conflict):  # the fence, decided by the same plan code
        arun(transitions.complete.plan(agent, todo.id, attempt_seq=claim.attempt_seq))
    closed = arun(
        transitions.complete.plan(
            agent, todo.id, attempt_seq=claim.attempt_seq, lease_token=claim.lease_token
        )
    )
    assert closed.todo.state == "done" and closed.attempt.outcome == "completed"
    # and the sync executor sees it exactly so
    assert Todo.objects.get(pk=todo.id).state == "done"
    assert TodoAttempt.objects.get(todo_id=todo.id).outcome == "completed"


def test_an_error_in_an_atomic_part_rolls_it_back_on_both_executors(endpoint):
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="x")

    def plan():
        # A harmless write (no row moves: the todo is not waiting to retry).
        yield Fetch(sql.RETRY_NOW, {"todo_ids": [todo.id], "from_states": ["retry_wait"]})
        yield Atomic(failing())

    def failing():
        yield Fetch(
            sql.RECORD_EVENT,
            {
                "kind": "not-a-kind",  # the check constraint refuses it
                "todo_id": todo.id,
                "team_id": None,
                "user_id": None,
                "endpoint_id": None,
                "detail": "{}",
            },
        )

    for execute in (db.run, arun):
        with pytest.raises(IntegrityError):  # Django's class, from either executor
            execute(plan())
    assert not todo_events_of(todo.id)


def test_a_plan_may_catch_a_statement_error_and_go_on(endpoint):
    def plan():
        try:
            yield Fetch(Statement("broken", "SELECT nope", why="a test"), {})
        except Exception as exc:  # noqa: BLE001
            caught = type(exc).__name__
        rows = yield Fetch(PING, {})
        return caught, rows

    assert db.run(plan())[1] == [(1,)]
    assert arun(plan()) == ("ProgrammingError", [(1,)])


def todo_events_of(todo_id: int) -> list:
    from switchboard.queues.models import TodoEvent

    return list(TodoEvent.objects.filter(todo_id=todo_id))


def test_both_executors_read_a_row_alike(endpoint):
    """Results that are JSON strings, numbers and nulls, and timestamps, decode the same
    (the async pool takes Django's adapters)."""
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="json")
    for result in ("a plain string", 7, None, ["x"], {"k": "v"}):
        claim = transitions.claim_next(Actor.agent(endpoint))
        transitions.complete(Actor.agent(endpoint), todo.id, result=result)
        read_sync = db.run(db.one(sql.SELECT_TODO, {"todo_id": todo.id}))
        read_async = arun(db.one(sql.SELECT_TODO, {"todo_id": todo.id}))
        assert read_sync == read_async, result
        assert claim is not None
        from switchboard.queues.records import TodoRecord

        assert TodoRecord.from_row(read_async[0]).result == result
        Todo.objects.filter(pk=todo.id).update(state="pending", ended_at=None)


def test_each_connection_keeps_one_cursor_that_outlives_a_failed_statement(endpoint):
    """Both executors keep one psycopg cursor a connection (a new one costs a Transformer and
    its dumper lookups on every statement): a failed statement leaves it usable, a new
    connection gets its own, and Django's query log still sees every prepared statement."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    broken = Statement("broken_kept", "SELECT nope", why="a test", prepare=True)
    ping = Statement("ping_kept", "SELECT %(n)s::int", why="a test", prepare=True)

    def plan():
        try:
            yield Fetch(broken, {})
        except Exception as exc:  # noqa: BLE001
            caught = type(exc).__name__
        first = yield Fetch(ping, {"n": 1})
        second = yield Fetch(ping, {"n": 2})
        return caught, first + second

    assert db.run(plan()) == ("ProgrammingError", [(1,), (2,)])
    kept = connection._switchboard_cursor
    assert db.run(db.one(ping, {"n": 3})) == [(3,)]
    assert connection._switchboard_cursor is kept
    with CaptureQueriesContext(connection) as logged:
        assert db.run(db.one(ping, {"n": 4})) == [(4,)]
    [query] = logged.captured_queries
    assert ping.native in query["sql"]
    wrapped: list[str] = []

    def wrapper(execute, sql, params, many, context):
        wrapped.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):  # an execute wrapper sees it too (bench/)
        assert db.run(db.one(ping, {"n": 7})) == [(7,)]
    assert wrapped == [ping.native] and connection._switchboard_cursor is kept
    assert not kept.closed  # Django's wrapper did not close the kept cursor
    connection.close()
    assert db.run(db.one(ping, {"n": 5})) == [(5,)]
    assert connection._switchboard_cursor is not kept

    async def twice():
        try:
            pool = await db.async_pool()
            async with pool.connection() as conn:  # the pool's one connection at first
                first = await db.executor._adrive(plan(), conn, depth=0)
                cursor = conn._switchboard_cursor
                again = await db.executor._adrive(db.one(ping, {"n": 6}), conn, depth=0)
                return first, again, conn._switchboard_cursor is cursor
        finally:
            await db.close_async_pool()

    assert asyncio.run(twice()) == (("ProgrammingError", [(1,), (2,)]), [(6,)], True)


def test_a_timestamp_reads_as_djangos_on_both_executors():
    """The kept cursors load timestamptz with psycopg's own loader when the session's time
    zone is Django's: the same instant, with Django's very tzinfo object."""
    from django.db import connection

    now = Statement("now_kept", "SELECT %(t)s::timestamptz", why="a test", prepare=True)
    instant = datetime(2026, 12, 5, 3, 4, 5, 678901, tzinfo=UTC)
    for execute in (db.run, arun):
        [(read,)] = execute(db.one(now, {"t": instant}))
        assert read == instant and read.tzinfo is connection.timezone, execute
    loader = connection._switchboard_cursor.adapters.get_loader(1184, 0)  # timestamptz, text
    assert loader.__module__.startswith("psycopg"), loader  # psycopg's, not Django's

    async def pooled():  # the async pool's sessions are set to Django's time zone
        try:
            pool = await db.async_pool()
            async with pool.connection() as conn:
                await db.executor._adrive(db.one(now, {"t": instant}), conn, depth=0)
                loader = conn._switchboard_cursor.adapters.get_loader(1184, 0)
                return conn.info.parameter_status("TimeZone"), loader.__module__
        finally:
            await db.close_async_pool()

    zone, module = asyncio.run(pooled())
    assert zone == connection.timezone_name and module.startswith("psycopg"), (zone, module)
