"""While PostgreSQL is unreachable, the site answers a plain 503 page at once (and recovers by
itself): a middleware asks the breaker (``queues.availability``) before each request and turns
a view's connection failure into that page; ``handler500`` does the same for a failure
outside a view (a session saved by a middleware). The page is rendered without the request's
context processors, so drawing it needs no database."""

from __future__ import annotations

import sys

from django.http import HttpResponse, HttpResponseServerError
from django.template import loader
from django.views.defaults import server_error as django_server_error

from queues.availability import breaker, is_connection_failure

RETRY_AFTER_SECONDS = 5


def unavailable_page() -> HttpResponse:
    response = HttpResponse(loader.render_to_string("503.html"), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request):
        if not breaker.admit():
            return unavailable_page()
        return self.get_response(request)

    def process_exception(self, request, exception):
        if is_connection_failure(exception):
            breaker.trip(exception)
            return unavailable_page()
        return None


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
