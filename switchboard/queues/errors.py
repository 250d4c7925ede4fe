"""Domain errors. One mapping to HTTP codes, shared by the API and MCP surfaces, and one
answer to a database error (``from_database_error``), shared by both as well."""

from __future__ import annotations

import logging

from django.db import DatabaseError, DataError, InterfaceError, OperationalError

log = logging.getLogger(__name__)


class DomainError(Exception):
    code = "error"
    status = 400

    def __init__(self, message: str, **extra) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def as_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


class Invalid(DomainError):
    code, status = "invalid", 400


class Unauthorized(DomainError):
    code, status = "unauthorized", 401


class Forbidden(DomainError):
    code, status = "forbidden", 403


class NotFound(DomainError):
    code, status = "not_found", 404

    def __init__(self, message: str = "No such todo.", **extra) -> None:
        super().__init__(message, **extra)


class Conflict(DomainError):
    code, status = "conflict", 409


class RateLimited(DomainError):
    code, status = "rate_limited", 429


class Unavailable(DomainError):
    """Retry shortly: every one says when (``retry_after``, seconds: the body's field and the
    ``Retry-After`` header), so a client's backoff has the server's word to start from."""

    code, status = "unavailable", 503

    def __init__(self, message: str, **extra) -> None:
        extra.setdefault("retry_after", RETRY_AFTER_SECONDS)
        super().__init__(message, **extra)


# What an ``unavailable`` asks a client to wait before it tries again: an outage's first
# seconds are a restart or a failover's promotion, and clients add their own jitter.
RETRY_AFTER_SECONDS = 2


# What an adapter catches around a verb: InterfaceError is not a DatabaseError in DB-API 2.
DATABASE_ERRORS = (DatabaseError, InterfaceError)

DATA_ERROR_MESSAGE = (
    "A value cannot be stored in PostgreSQL: a number out of range, or a NUL character "
    "(\\u0000) in text it must compare as given."
)


def from_database_error(exc: DatabaseError | InterfaceError, *, verb: str) -> DomainError:
    """The one answer to a database error for the HTTP API and the MCP tools alike, so the
    two cannot tell an agent different things: the database down or restarting is
    ``unavailable`` (retry), a value PostgreSQL refuses is ``invalid`` (retrying cannot help),
    anything else ``unavailable``, logged."""
    from switchboard.queues.db import pooler
    from switchboard.queues.db.availability import breaker, is_connection_failure

    breaker.note(exc)  # a connection-level failure answers at once from now on
    if pooler.lost.note(exc):  # said in the log, with the setting to change
        return Unavailable(
            "The server cannot run its statements: its connection pooler loses prepared "
            "statements. The operator must change a setting (see the server's log)."
        )
    if isinstance(exc, OperationalError | InterfaceError):
        # Keep the process alive and the log short: the cause is the database, not the call.
        # An outage is said once, by the breaker as it trips (and when it ends), not once
        # per request that met it (a failover's thousands of lines).
        if not is_connection_failure(exc):
            log.warning("database unavailable during %s: %s", verb, type(exc).__name__)
        return Unavailable("The database is unavailable; retry shortly.")
    if isinstance(exc, DataError):
        # The schemas checked types and ranges; this is what gets past them, e.g. a NUL in
        # an idempotency_key or a ``to`` (looked up as given, so never replaced).
        return Invalid(DATA_ERROR_MESSAGE)
    log.error("database error during %s", verb, exc_info=exc)
    return Unavailable("The request could not be completed; retry.")
