"""Where a form may send the reader after it: a ``next`` of this site only (a path, never an
address elsewhere, a scheme or a NUL), else the page's own default."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def local(request: HttpRequest, target: str) -> str:
    """``target`` if it is a URL of this site, else empty."""
    if (
        target.startswith("/")
        and "\x00" not in target
        and url_has_allowed_host_and_scheme(
            target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        )
    ):
        return target
    return ""


def next_url(request: HttpRequest) -> str:
    """The request's ``next`` (the form's, else the query's), if it is of this site."""
    return local(request, request.POST.get("next", request.GET.get("next", "")))
