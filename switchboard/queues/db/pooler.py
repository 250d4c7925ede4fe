"""Prepared statements and connection poolers. The hot statements run as server-side
prepared statements (SWITCHBOARD_PREPARED_STATEMENTS, on by default): planned once per
connection. A pooler that hands each transaction any server connection (PgBouncer in
``pool_mode = transaction`` before 1.21, or without ``max_prepared_statements``) loses them:
a statement prepared on one server connection is then executed on another, and PostgreSQL
answers ``prepared statement "_pg3_2" does not exist``. That must be said once, plainly,
with the setting to change, not answered as an endless "retry" (docs/deploy.md, PgBouncer).

``prepared_statements_survive`` asks at start-up (``switchboard serve``): a statement
prepared on one client connection must still be there while another client holds a
transaction; behind a transaction pooler the other client is given the server connection
just used (PgBouncer reuses its most recent one), and the first gets another. ``note``
catches the same error at run time (a pooler the start-up check did not catch)."""

from __future__ import annotations

import logging
import time

import psycopg
from psycopg import errors

from switchboard.queues.db.availability import connection_params
from switchboard.queues.db.plans import Statement

log = logging.getLogger("switchboard.database")

FIX = (
    "a connection pooler in transaction mode sits between Switchboard and PostgreSQL and "
    "loses prepared statements: set SWITCHBOARD_PREPARED_STATEMENTS=0 (and "
    "SWITCHBOARD_PAGE_TIMEOUT_SECONDS=0, with a statement_timeout on the role), or give the "
    "pooler max_prepared_statements (PgBouncer 1.21 or newer), or point DATABASE_URL at "
    "PostgreSQL itself"
)
LOST = (errors.InvalidSqlStatementName, errors.DuplicatePreparedStatement)
# The run-time message is repeated at most this often.
SAY_EVERY_SECONDS = 60.0


class Lost:
    """Whether this process has seen prepared statements lost (``/healthz`` says so)."""

    def __init__(self) -> None:
        self.seen = False
        self._said = -SAY_EVERY_SECONDS

    def note(self, exc: BaseException | None) -> bool:
        """Is ``exc`` (a psycopg error, or Django's wrapping one) a lost prepared statement?
        Then it is said in the log, with the fix."""
        if exc is None:
            return False
        cause = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else exc
        if not isinstance(cause, LOST):
            return False
        self.seen = True
        now = time.monotonic()
        if now - self._said >= SAY_EVERY_SECONDS:
            self._said = now
            log.error("PostgreSQL lost a prepared statement (%s): %s", type(cause).__name__, FIX)
        return True


lost = Lost()

# The start-up check's statements (plain SQL PREPARE, so that the check needs no protocol
# support of the pooler's).
_WHY = "the pooler check: a statement prepared on one connection, used while another works"
PREPARE = Statement("pooler_prepare", "PREPARE switchboard_pooler_check AS SELECT 1", why=_WHY)
EXECUTE = Statement("pooler_execute", "EXECUTE switchboard_pooler_check", why=_WHY)
DEALLOCATE = Statement("pooler_deallocate", "DEALLOCATE switchboard_pooler_check", why=_WHY)
ANYTHING = Statement("pooler_hold", "SELECT 1", why=_WHY)


def prepared_statements_survive() -> str | None:
    """None when a prepared statement stays with the connection that prepared it; else why
    not, with the fix (see the module's docstring)."""
    params = {**connection_params(), "connect_timeout": 5}
    with (
        psycopg.connect(**params, autocommit=True) as first,
        psycopg.connect(**params, autocommit=True) as second,
    ):
        first.execute(PREPARE.text)
        try:
            with second.transaction():
                second.execute(ANYTHING.text)
                first.execute(EXECUTE.text)
        except LOST:
            return f"prepared statements are lost between connections: {FIX}"
        finally:
            try:
                first.execute(DEALLOCATE.text)
            except LOST:
                pass
    return None
