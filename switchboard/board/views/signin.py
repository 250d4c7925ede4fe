"""Signing in (``/login/``, the route named "login"), in place of Django's ``LoginView``.

The password is checked by board/auth.py's backend, throttled per user name and per client
address. A refused sign-in answers 429 with ``Retry-After`` and says when to try again; an
unknown name and a wrong password get the same page. The database being unavailable (down,
restarting, or the pool out of connections) is a plain 503 page, never a 500: that page is
drawn without the request's context (no session, no user), so it needs no database; a
connection failure also trips the site's breaker (queues/db/availability.py).
"""

from __future__ import annotations

import logging
import unicodedata

from django.conf import settings
from django.contrib.auth import authenticate, login
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render, resolve_url
from django.template import loader
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods
from psycopg_pool import PoolTimeout

from switchboard.board import redirects
from switchboard.board.auth import Refusal, refusal_of
from switchboard.queues.db.availability import breaker

log = logging.getLogger(__name__)

MISMATCH = "That username and password did not match."
UNAVAILABLE_RETRY_AFTER_SECONDS = 5


@sensitive_post_parameters("password")
@csrf_protect
@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def sign_in(request: HttpRequest) -> HttpResponse:
    try:
        return _sign_in(request)
    except (OperationalError, InterfaceError, PoolTimeout) as exc:
        log.warning("database unavailable during sign-in: %s", type(exc).__name__)
        breaker.note(exc)  # the site's other pages answer 503 at once too, if it is down
        return _unavailable()
    except DatabaseError:
        log.exception("database error during sign-in")
        return _unavailable()


def _sign_in(request: HttpRequest) -> HttpResponse:
    next_url = redirects.next_url(request)
    if request.method != "POST":
        return _page(request, next_url)
    # As Django's own sign-in form reads a user name: trimmed, NFKC-normalised.
    username = unicodedata.normalize("NFKC", request.POST.get("username", "").strip())
    password = request.POST.get("password", "")
    if not username or not password:
        return _page(
            request, next_url, error="Enter your username and password.", username=username
        )
    user = authenticate(request, username=username, password=password)
    if (refusal := refusal_of(request)) is not None:
        return _refused(request, next_url, refusal, username)
    if user is None:
        return _page(request, next_url, error=MISMATCH, username=username)
    login(request, user)
    return redirect(next_url or resolve_url(settings.LOGIN_REDIRECT_URL))


def _page(
    request, next_url: str, *, error: str = "", username: str = "", status: int = 200
) -> HttpResponse:
    context = {"next": next_url, "error": error, "username": username}
    return render(request, "registration/login.html", context, status=status)


def _refused(request, next_url: str, refusal: Refusal, username: str) -> HttpResponse:
    minutes = f"{refusal.minutes} minute{'s' if refusal.minutes != 1 else ''}"
    whose = (
        "this name from your network address" if refusal.by == "name" else "your network address"
    )
    error = f"Too many failed sign-ins for {whose}; try again in {minutes}."
    response = _page(request, next_url, error=error, username=username, status=429)
    response["Retry-After"] = str(refusal.retry_after)
    return response


def _unavailable() -> HttpResponse:
    response = HttpResponse(
        loader.render_to_string("registration/signin_unavailable.html"), status=503
    )
    response["Retry-After"] = str(UNAVAILABLE_RETRY_AFTER_SECONDS)
    return response
