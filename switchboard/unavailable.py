"""While PostgreSQL is unreachable, the site answers a plain 503 page at once (and recovers by
itself): a middleware asks the breaker (``queues.db.availability``) before each request and turns
a view's connection failure into that page; ``handler500`` does the same for a failure
outside a view (a session saved by a middleware). The page is rendered without the request's
context processors, so drawing it needs no database.

The same middleware bounds every page's reads: a GET or HEAD of the Board or admin runs with
``statement_timeout`` set to ``SWITCHBOARD_PAGE_TIMEOUT_SECONDS`` on its connection (and
reset before the connection goes back to the pool), so no page can hold a connection and a
core for longer whatever its filters; a page stopped by it is a 503 page that says so. The
agents' paths never come here under ASGI (agents.asgi) and are left out under WSGI: a verb's
statements are bounded by their own design, and a long-poll waits in Python, not in SQL.
Searches have a shorter bound of their own (queues.selectors.search_time_bound)."""

from __future__ import annotations

import logging
import sys

import psycopg
from django.conf import settings
from django.db import OperationalError, connection
from django.db.backends.signals import connection_created
from django.dispatch import receiver
from django.http import HttpResponse, HttpResponseServerError
from django.template import loader
from django.views.defaults import server_error as django_server_error

from switchboard.queues import sql
from switchboard.queues.db.availability import breaker, is_connection_failure

log = logging.getLogger("switchboard.database")

RETRY_AFTER_SECONDS = 5
# Paths whose statements are not a page's: the health check, which probes with its own short
# bound and says itself, in text, that the database is away.
UNBOUNDED_PREFIXES = ("/healthz",)


def unavailable_page() -> HttpResponse:
    response = HttpResponse(loader.render_to_string("503.html"), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


def too_slow_page(seconds: int) -> HttpResponse:
    response = HttpResponse(
        loader.render_to_string("page_timeout.html", {"seconds": seconds}), status=503
    )
    response["Cache-Control"] = "no-store"
    return response


def _is_cancelled(exc: BaseException) -> bool:
    return isinstance(exc, OperationalError) and isinstance(
        exc.__cause__, psycopg.errors.QueryCanceled
    )


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(UNBOUNDED_PREFIXES) and not breaker.admit():
            return unavailable_page()
        seconds = settings.SWITCHBOARD_PAGE_TIMEOUT_SECONDS
        if (
            not seconds
            or request.method not in ("GET", "HEAD")
            or request.path.startswith(UNBOUNDED_PREFIXES)
        ):
            return self.get_response(request)
        try:
            _bound_page(seconds)
        except Exception as exc:
            if is_connection_failure(exc):
                breaker.trip(exc)
                return unavailable_page()
            raise
        try:
            return self.get_response(request)
        finally:
            _unbind_page()

    def process_exception(self, request, exception):
        if is_connection_failure(exception):
            breaker.trip(exception)
            return unavailable_page()
        if _is_cancelled(exception):
            seconds = settings.SWITCHBOARD_PAGE_TIMEOUT_SECONDS
            log.warning(
                "a page's statement ran past %s s and was stopped: %s", seconds, request.path
            )
            return too_slow_page(seconds)
        return None


# The page's bound is a setting of the connection's session, made on the driver's own
# connection (as Django sets a connection's time zone), so it is not one of the page's
# queries (the tests pin those); and made only once the page opens a connection (a page that
# needs none, a signed-out redirect, opens none for it): at once when this thread's
# connection is open, else by the connection_created hook when the page first opens one.
def _bound_page(seconds: int) -> None:
    connection.switchboard_page_timeout_ms = seconds * 1000
    if connection.connection is not None and not connection.connection.closed:
        _set_bound(connection)


def _set_bound(wrapper) -> None:
    wrapper.connection.execute(
        sql.PAGE_STATEMENT_TIMEOUT.text,
        {"milliseconds": str(wrapper.switchboard_page_timeout_ms)},
        prepare=False,
    )
    wrapper.switchboard_page_bound = True


@receiver(connection_created)
def _bound_new_connection(sender, connection, **kwargs) -> None:
    if getattr(connection, "switchboard_page_timeout_ms", 0):
        _set_bound(connection)


def _unbind_page() -> None:
    """Back to the server's default before the connection goes back to the pool. A connection
    a view closed (or lost) has nothing to reset; one that cannot take the reset is closed, so
    no later user of the pool inherits the page's bound."""
    connection.switchboard_page_timeout_ms = 0
    if not getattr(connection, "switchboard_page_bound", False):
        return
    connection.switchboard_page_bound = False
    raw = connection.connection
    if raw is None or raw.closed:
        return
    try:
        raw.execute(sql.RESET_STATEMENT_TIMEOUT.text, prepare=False)
    except Exception:
        if connection.in_atomic_block:
            return  # a test's transaction, aborted: the setting ends with its rollback
        log.warning("could not reset a page's statement timeout; closing its connection")
        connection.close()


def server_error(request) -> HttpResponse:
    """``handler500``: a connection failure anywhere is the 503 page, anything else Django's
    own 500 page."""
    exc = sys.exc_info()[1]
    if is_connection_failure(exc):
        breaker.trip(exc)
        return unavailable_page()
    try:
        return django_server_error(request)
    except Exception:  # the 500 template itself failed: a bare answer, never a loop
        return HttpResponseServerError("Server error", content_type="text/plain")
