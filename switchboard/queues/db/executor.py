"""The two executors that run plans (``queues.db.plans``), River's ``riverdriver`` being the
model (the same queries through its pgx and database/sql drivers):

- ``run(plan)`` on Django's connection: the Board, admin, the sweeper and the management
  commands (Django's sync views and threads);
- ``await arun(plan)`` on a psycopg ``AsyncConnection`` of this event loop's pool: the agents'
  surface, which the ASGI front answers on the loop.

An error a statement raises is thrown into the plan at its ``yield`` (so a plan may catch a
unique violation), as Django's own exception class either way. A plan's statements outside
any ``Atomic`` run in autocommit, each its own transaction (a transition that is one statement
needs no BEGIN and COMMIT round trips); inside a caller's transaction (tests) each that may
write gets a savepoint, so a failing one does not abort the caller's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

import django.db
import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from psycopg import pq
from psycopg.types.datetime import TimestamptzLoader

from switchboard.queues.db import pool_checks
from switchboard.queues.db.availability import connection_params
from switchboard.queues.db.plans import Atomic, Fetch, Plan, Statement, one
from switchboard.queues.loops import LoopLocal


class _Steps:
    """A plan being run: the next step to execute, fed the last one's rows or error. Both
    executors walk a plan with it; only how a step is executed differs."""

    __slots__ = ("plan", "result", "_value", "_error")

    def __init__(self, plan: Plan[Any]) -> None:
        self.plan = plan
        self.result: Any = None
        self._value: Any = None
        self._error: BaseException | None = None

    def next(self) -> Fetch | Atomic | None:
        """The next step, or None once the plan returned (its value in ``result``)."""
        value, error = self._value, self._error
        self._value, self._error = None, None
        try:
            return self.plan.throw(error) if error is not None else self.plan.send(value)
        except StopIteration as stop:
            self.result = stop.value
            return None

    def answer(self, value: Any) -> None:
        self._value = value

    def fail(self, error: BaseException) -> None:
        """Thrown into the plan at its ``yield``: it may handle it."""
        self._error = error


# ---------------------------------------------------------------------------------------
# The sync executor: Django's connection (its transactions, error wrapping, query logging)


def run[T](plan: Plan[T]) -> T:
    """Execute ``plan`` on Django's connection and return its result."""
    # The connection object itself, looked up once: ``django.db.connection`` is a proxy that
    # finds it again (an asgiref Local) on every attribute read.
    return _drive(plan, connections[DEFAULT_DB_ALIAS], depth=0)


def fetch(statement: Statement, params: Mapping[str, Any]) -> list:
    """One statement's rows on Django's connection."""
    return run(one(statement, params))


def _drive[T](plan: Plan[T], db: BaseDatabaseWrapper, *, depth: int) -> T:
    steps = _Steps(plan)
    while (step := steps.next()) is not None:
        try:
            if isinstance(step, Atomic):
                with transaction.atomic(durable=depth == 0 and not db.in_atomic_block):
                    steps.answer(_drive(step.plan, db, depth=depth + 1))
            elif (depth == 0 and step.statement.writes and db.in_atomic_block) or (
                step.may_fail and db.in_atomic_block
            ):
                with transaction.atomic():  # a savepoint: see the module docstring
                    steps.answer(_sync_fetch(db, step))
            else:
                steps.answer(_sync_fetch(db, step))
        except Exception as exc:
            steps.fail(exc)
    return steps.result


def _sync_fetch(db: BaseDatabaseWrapper, step: Fetch) -> list:
    statement = step.statement
    if not (statement.prepare and settings.SWITCHBOARD_PREPARED_STATEMENTS):
        with db.cursor() as cursor:
            cursor.execute(statement.text, step.params)
            return cursor.fetchall() if cursor.description else []
    # A server-binding psycopg cursor of our own (Django's bind client-side and never
    # prepare), one per connection, kept: a new cursor is a new psycopg Transformer, which
    # looks up each parameter's dumper again (eight types for a close).
    with db.wrap_database_errors:
        db.ensure_connection()
        db.validate_thread_sharing()
        raw = _preparing_cursor(db)
        if not (db.queries_logged or db.execute_wrappers):
            raw.execute(statement.native, statement.bind(step.params))
            return _rows(raw)
    # Wrapped as Django wraps its own cursors, for whoever listens: query logging (tests'
    # query counts, DEBUG) and execute wrappers. Not closed on leaving: the cursor is kept.
    # (django-stubs type the argument as a CursorWrapper; Django wraps the DB-API cursor.)
    wrapped: CursorWrapper
    if db.queries_logged:
        wrapped = db.make_debug_cursor(raw)  # type: ignore[arg-type]
    else:
        wrapped = db.make_cursor(raw)  # type: ignore[arg-type]
    wrapped.execute(statement.native, statement.bind(step.params))
    with db.wrap_database_errors:
        return _rows(raw)


def _rows(cursor: psycopg.Cursor) -> list:
    # The rows straight from psycopg (Django's wrapper adds nothing to a fetch but its error
    # wrapping), and not by ``description``: that builds a Column object per column, 55 for a
    # claim.
    return cursor.fetchall() if _has_rows(cursor) else []


def _preparing_cursor(db: BaseDatabaseWrapper) -> _PreparingCursor:
    """This connection's kept cursor (made again when Django opened a new connection)."""
    kept = getattr(db, "_switchboard_cursor", None)
    if kept is None or kept.connection is not db.connection or kept.closed:
        kept = db._switchboard_cursor = _PreparingCursor(db.connection)  # type: ignore[attr-defined]
        _native_timestamps(kept, db.timezone)
    return kept


def _native_timestamps(cursor: psycopg.Cursor | psycopg.AsyncCursor, timezone) -> None:
    """psycopg's own timestamptz loader (C) on ``cursor`` when the session's time zone is
    Django's: it then gives the very datetimes Django's loader does (which loads with it and
    sets the same tzinfo again, in Python: ten timestamps a claim's row)."""
    if cursor.connection.info.timezone is timezone:
        cursor.adapters.register_loader("timestamptz", TimestamptzLoader)


def _has_rows(cursor: psycopg.Cursor | psycopg.AsyncCursor) -> bool:
    result = cursor.pgresult
    return result is not None and result.status == pq.ExecStatus.TUPLES_OK


class _PreparingCursor(psycopg.RawCursor):
    """Server-side binding of PostgreSQL's own placeholders (``Statement.native``), prepared
    on first use: each connection plans a statement once.

    Planning the claim and close statements costs more than running them (docs/benchmarks.md,
    "Prepared hot statements"). A generic plan made while the tables are small is dropped when
    ANALYZE updates their statistics, which invalidates cached plans;
    tests/queues/test_sql.py checks that the plans use the indexes."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)


# ---------------------------------------------------------------------------------------
# The async executor: psycopg's async pool, one connection for a plan's whole run


async def arun[T](plan: Plan[T]) -> T:
    """Execute ``plan`` on a connection of this event loop's async pool."""
    pool = await async_pool()
    try:
        async with pool.connection() as conn:
            try:
                return await _adrive(plan, conn, depth=0)
            finally:
                pool_checks.last_used[conn] = time.monotonic()
    except psycopg.Error as exc:  # no connection to be had (the pool's wait, a refusal)
        raise as_django_error(exc) from exc


async def _adrive[T](plan: Plan[T], conn: psycopg.AsyncConnection, *, depth: int) -> T:
    steps = _Steps(plan)
    while (step := steps.next()) is not None:
        try:
            if isinstance(step, Atomic):
                async with conn.transaction():
                    steps.answer(await _adrive(step.plan, conn, depth=depth + 1))
            elif step.may_fail and depth > 0:
                async with conn.transaction():  # a savepoint: its failure is the plan's
                    steps.answer(await _async_fetch(conn, step))
            else:
                steps.answer(await _async_fetch(conn, step))
        except psycopg.Error as exc:
            steps.fail(as_django_error(exc))
        except Exception as exc:
            steps.fail(exc)
    return steps.result


async def _async_fetch(conn: psycopg.AsyncConnection, step: Fetch) -> list:
    statement = step.statement
    prepare = statement.prepare and settings.SWITCHBOARD_PREPARED_STATEMENTS
    # One cursor kept on each pooled connection, as on the sync path (an attribute: the cursor
    # holds its connection, so a weak map keyed by the connection would keep it alive).
    cursor = getattr(conn, "_switchboard_cursor", None)
    if cursor is None or cursor.closed:
        cursor = conn._switchboard_cursor = psycopg.AsyncRawCursor(conn)  # type: ignore[attr-defined]
        _native_timestamps(cursor, connections[DEFAULT_DB_ALIAS].timezone)
    await cursor.execute(statement.native, statement.bind(step.params), prepare=bool(prepare))
    return await cursor.fetchall() if _has_rows(cursor) else []


# Django's DatabaseErrorWrapper order: the first class the psycopg error is an instance of.
_DJANGO_ERRORS = (
    "DataError",
    "OperationalError",
    "IntegrityError",
    "InternalError",
    "ProgrammingError",
    "NotSupportedError",
    "DatabaseError",
    "InterfaceError",
    "Error",
)


def as_django_error(exc: psycopg.Error) -> django.db.Error:
    """The Django exception Django's own wrapper would raise for ``exc`` (its cause set), so
    plans and adapters handle one family of exceptions whichever executor ran them."""
    for name in _DJANGO_ERRORS:
        if isinstance(exc, getattr(psycopg, name)):
            wrapped = getattr(django.db, name)(*exc.args)
            wrapped.__cause__ = exc
            return wrapped
    return django.db.Error(*exc.args)


def _new_pool(loop) -> pool_checks.AsyncOutageAwarePool:
    # Django's own parameters, its adapters ("context": jsonb as text, time zones) included,
    # so a row reads the same on both executors; not its sync cursor.
    params = connection_params(adapters=True)
    return pool_checks.AsyncOutageAwarePool(
        kwargs={**params, "autocommit": True},
        min_size=1,
        max_size=max(1, settings.SWITCHBOARD_DB_POOL_SIZE or 8),
        timeout=settings.SWITCHBOARD_DB_POOL_TIMEOUT_SECONDS,
        reconnect_timeout=5,
        check=pool_checks.acheck_if_idle,
        configure=_django_time_zone,
        open=False,
    )


_pools: LoopLocal[pool_checks.AsyncOutageAwarePool] = LoopLocal(_new_pool)


async def async_pool():
    """This event loop's async connection pool (psycopg_pool), opened on first use with the
    same connection parameters and size as Django's. One per loop: an ASGI worker process has
    one loop, a test may run several. In autocommit: a plan's statements outside ``Atomic``
    are each their own transaction, as on the sync path."""
    pool = _pools.get()
    if pool.closed:
        await pool.open(wait=False)
    return pool


async def _django_time_zone(conn: psycopg.AsyncConnection) -> None:
    """Each new pooled connection in Django's session time zone, as Django sets its own
    (``ensure_timezone``; a SET that PgBouncer carries over, TimeZone being one of the
    parameters it tracks): the same session on both executors, and timestamps loaded by
    psycopg's own loader (``_native_timestamps``)."""
    name = connections[DEFAULT_DB_ALIAS].timezone_name
    if conn.info.parameter_status("TimeZone") != name:
        await conn.execute(SET_TIME_ZONE.text, {"name": name})


SET_TIME_ZONE = Statement(
    "set_time_zone",
    "SELECT set_config('TimeZone', %(name)s, false)",
    why="Django's own statement for its sessions' time zone (ensure_timezone)",
)


async def close_async_pool() -> None:
    """Close this event loop's pool (the ASGI lifespan's shutdown; tests)."""
    pool = _pools.pop()
    if pool is not None:
        await pool.close()


def in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
