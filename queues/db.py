"""How the ledger runs its SQL: named statements, plans, and the two executors that run them.

A transition *decides* in plain Python and *executes* through an executor (River's
``riverdriver`` runs the same queries through its pgx and database/sql drivers; so here):

- A **Statement** is one named, parameterised SQL statement of ``queues/sql/``.
- A **plan** is a generator: it yields ``Fetch(statement, params)`` for each statement it
  needs (receiving the rows) and ``Atomic(plan)`` for a part that must be one transaction
  (receiving its result), and returns its result. It never touches a connection itself, so the
  same plan, with all its rules, runs from sync and async code.
- ``run(plan)`` executes it on Django's connection (the Board, admin, the sweeper, the
  management commands, WSGI); ``await arun(plan)`` on a psycopg ``AsyncConnection`` from the
  async pool (the agents' surface under ASGI). An error a statement raises is thrown into the
  plan at its ``yield`` (so a plan may catch a unique violation), as Django's own exception
  class either way.

A plan's statements outside any ``Atomic`` run in autocommit, each its own transaction (a
transition that is one statement needs no BEGIN and COMMIT round trips); inside a caller's
transaction (tests) each that may write gets a savepoint, so a failing one does not abort the
caller's.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import django.db
import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
from psycopg import pq

from queues import pool_checks


@dataclass(frozen=True, slots=True)
class Statement:
    """One named SQL statement. ``why`` says what the ORM could not say (or cost) here.

    ``text`` is written with psycopg's named placeholders (``%(name)s``). Derived from it once,
    when the statement is made: ``native``, the same text with PostgreSQL's own placeholders
    (``$1``, ``$2`` ...; a name used twice is one placeholder), ``names``, the parameter each
    stands for, and ``writes``. The executors run ``native`` on psycopg's ``RawCursor`` with
    the parameters as a tuple (``bind``), so psycopg never parses the text again: it caches
    that parse only for statements under 4 KB, and the claim statements are over 6 KB (the
    parse cost about 0.35 ms of Python per claim; docs/benchmarks.md)."""

    name: str
    text: str = field(repr=False)
    why: str = field(repr=False)
    # Server-side prepared (planned once per connection): the hot statements. Rare ones are
    # not, so a connection does not keep a plan for every statement it ever ran.
    prepare: bool = False
    native: str = field(init=False, repr=False, compare=False)
    names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    # Does it insert, update or delete (in a CTE, say)? ``SELECT … FOR UPDATE`` does not.
    writes: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names: list[str] = []

        def placeholder(match: re.Match) -> str:
            name = match.group(1)
            if name is None:  # %% is a literal %
                return "%"
            if name not in names:
                names.append(name)
            return f"${names.index(name) + 1}"

        native = _PLACEHOLDER.sub(placeholder, self.text)
        if _STRAY.search(_PLACEHOLDER.sub("", self.text)):
            raise ValueError(f"{self.name}: a % that is not %(name)s or %%")
        object.__setattr__(self, "native", native)
        object.__setattr__(self, "names", tuple(names))
        object.__setattr__(self, "writes", _WRITES.search(self.text) is not None)

    def bind(self, params: Mapping[str, Any]) -> tuple:
        """The parameters in ``native``'s order."""
        return tuple([params[name] for name in self.names])


_PLACEHOLDER = re.compile(r"%(?:\((\w+)\)s|%)")
_STRAY = re.compile(r"%")
_WRITES = re.compile(
    r"\b(INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+(\s+AS)?(\s+\w+)?\s+SET)\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Fetch:
    statement: Statement
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Atomic:
    """Run ``plan`` as one transaction (a savepoint inside another)."""

    plan: Plan[Any]


type Plan[T] = Generator[Fetch | Atomic, Any, T]


def just[T](value: T) -> Plan[T]:
    """A plan that runs nothing and returns ``value`` (for a branch that needs no SQL)."""
    return value
    yield  # a generator all the same  # noqa: B901


def one(statement: Statement, params: Mapping[str, Any] | None = None) -> Plan[list]:
    """The rows of one statement, as a plan (``rows = yield from one(...)``)."""
    return (yield Fetch(statement, params or {}))


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
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            if isinstance(step, Atomic):
                with transaction.atomic(durable=depth == 0 and not db.in_atomic_block):
                    value = _drive(step.plan, db, depth=depth + 1)
            elif depth == 0 and step.statement.writes and db.in_atomic_block:
                with transaction.atomic():  # a savepoint: see the module docstring
                    value = _sync_fetch(db, step)
            else:
                value = _sync_fetch(db, step)
        except Exception as exc:  # thrown into the plan, which may handle it
            error = exc


def _sync_fetch(db: BaseDatabaseWrapper, step: Fetch) -> list:
    statement = step.statement
    if not (statement.prepare and settings.SWITCHBOARD_PREPARED_STATEMENTS):
        with db.cursor() as cursor:
            cursor.execute(statement.text, step.params)
            return cursor.fetchall() if cursor.description else []
    # A server-binding psycopg cursor of our own (Django's bind client-side and never
    # prepare), wrapped as Django wraps its own: errors, thread checks and query logging.
    with db.wrap_database_errors:
        db.ensure_connection()
        db.validate_thread_sharing()
        raw = _PreparingCursor(db.connection)
    # (django-stubs type the argument as a CursorWrapper; Django wraps the DB-API cursor.)
    wrapped: CursorWrapper
    if db.queries_logged:
        wrapped = db.make_debug_cursor(raw)  # type: ignore[arg-type]
    else:
        wrapped = db.make_cursor(raw)  # type: ignore[arg-type]
    with wrapped:
        wrapped.execute(statement.native, statement.bind(step.params))
        # The rows straight from psycopg (Django's wrapper adds nothing to a fetch but its
        # error wrapping), and not by ``description``: that builds a Column object per
        # column, 55 for a claim.
        with db.wrap_database_errors:
            return raw.fetchall() if _has_rows(raw) else []


def _has_rows(cursor: psycopg.Cursor | psycopg.AsyncCursor) -> bool:
    result = cursor.pgresult
    return result is not None and result.status == pq.ExecStatus.TUPLES_OK


class _PreparingCursor(psycopg.RawCursor):
    """Server-side binding of PostgreSQL's own placeholders (``Statement.native``), prepared
    on first use: each connection plans a statement once.

    Planning the claim and close statements costs more than running them (bench/: about
    2.7 ms of a 4 ms claim). A generic plan made while the tables are small is dropped when
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
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = plan.throw(error) if error is not None else plan.send(value)
        except StopIteration as stop:
            return stop.value
        value, error = None, None
        try:
            if isinstance(step, Atomic):
                async with conn.transaction():
                    value = await _adrive(step.plan, conn, depth=depth + 1)
            else:
                value = await _async_fetch(conn, step)
        except psycopg.Error as exc:
            error = as_django_error(exc)
        except Exception as exc:
            error = exc


async def _async_fetch(conn: psycopg.AsyncConnection, step: Fetch) -> list:
    statement = step.statement
    prepare = statement.prepare and settings.SWITCHBOARD_PREPARED_STATEMENTS
    async with psycopg.AsyncRawCursor(conn) as cursor:
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


_pools: dict[int, Any] = {}  # AsyncConnectionPool by event loop


async def async_pool():
    """This event loop's async connection pool (psycopg_pool), opened on first use with the
    same connection parameters and size as Django's. One per loop: an ASGI worker process has
    one loop, a test may run several. In autocommit: a plan's statements outside ``Atomic``
    are each their own transaction, as on the sync path."""

    key = id(asyncio.get_running_loop())
    pool = _pools.get(key)
    if pool is None:
        # Django's own parameters, its adapters ("context": jsonb as text, time zones)
        # included, so a row reads the same on both executors; not its sync cursor.
        params = connection.get_connection_params()
        for name in ("cursor_factory", "pool"):
            params.pop(name, None)
        pool = _pools[key] = pool_checks.AsyncOutageAwarePool(
            kwargs={**params, "autocommit": True},
            min_size=1,
            max_size=max(1, settings.SWITCHBOARD_DB_POOL_SIZE or 8),
            timeout=10,
            reconnect_timeout=5,
            check=pool_checks.acheck_if_idle,
            open=False,
        )
    if pool.closed:
        await pool.open(wait=False)
    return pool


async def close_async_pool() -> None:
    """Close this event loop's pool (the ASGI lifespan's shutdown; tests)."""
    pool = _pools.pop(id(asyncio.get_running_loop()), None)
    if pool is not None:
        await pool.close()


def in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
