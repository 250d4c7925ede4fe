"""The authentication backend behind every sign-in (the Board's /login/ and Django admin's):
Django's ``ModelBackend``, throttled and without a pooled connection across the hash. It
also loads each request's user, with the team invitations waiting for them in the same query
(``user.pending_invitations``, for the Team page and the queue's banner).

- **Throttled** per user name and per client address (queues/signin_throttle.py): each
  sign-in is charged first; one over a limit is refused before its password is looked at,
  and the refusal is left on the request for the sign-in page to explain (429, Retry-After).
  An unknown name is charged, read and hashed exactly like a known one, so neither the
  answers nor their timing say whether a name exists.
- **The hash holds no connection.** PBKDF2 takes most of a second of CPU; a sign-in used to
  keep its pooled connection through it, so a few dozen at once starved every other request
  of the pool (and themselves timed out: a 500). The user row is read, the connection goes
  back to the pool, and only then is the password checked.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import check_password_with_timing_attack_mitigation, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.views.decorators.debug import sensitive_variables

from queues import signin_throttle, teams

USERNAME_KEY_CHARS = 150  # Django's longest user name: longer names share their prefix's key


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a sign-in was refused, for the page that says so: ``by`` is "name" or "address"."""

    by: str
    retry_after: int  # whole seconds

    @property
    def minutes(self) -> int:
        return max(1, math.ceil(self.retry_after / 60))


def refusal_of(request) -> Refusal | None:
    """The throttle's refusal of this request's sign-in, if it refused one."""
    return getattr(request, "_sign_in_refusal", None)


def client_address(request) -> str | None:
    """The address a sign-in is counted against: the connection's, or the last entry of the
    proxy's header when SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER names one (the entry the proxy
    itself added; earlier ones are whatever the client sent). An IPv6 client counts as its
    /64, which one machine usually has whole."""
    raw = request.META.get("REMOTE_ADDR", "") or ""
    if header := settings.SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER:
        raw = request.headers.get(header, "").split(",")[-1].strip() or raw
    try:
        ip = ipaddress.ip_address(raw.strip("[]"))
    except ValueError:
        return raw[:64] or None  # not an IP (a Unix socket): counted as it reads
    if ip.version == 6 and ip.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(getattr(ip, "ipv4_mapped", None) or ip)


def throttle_keys(request, username: str) -> dict[str, int]:
    """``{key: limit}`` for a sign-in as ``username`` from this request's client."""
    keys = {
        f"user:{username[:USERNAME_KEY_CHARS].lower()}": (
            settings.SWITCHBOARD_SIGNIN_FAILURES_PER_USER
        )
    }
    address = client_address(request) if request is not None else None
    if address:
        keys[f"addr:{address}"] = settings.SWITCHBOARD_SIGNIN_FAILURES_PER_ADDRESS
    return keys


def _refusal(counts: list[signin_throttle.Count], *, spent: bool) -> Refusal | None:
    """The name's refusal before the address's (the name is what the person can change)."""
    over = [c for c in counts if (c.spent if spent else c.refused)]
    if not over:
        return None
    over.sort(key=lambda c: (not c.key.startswith("user:"), -c.seconds_left))
    return Refusal(
        by="name" if over[0].key.startswith("user:") else "address",
        retry_after=max(1, math.ceil(over[0].seconds_left)),
    )


def give_back_connection() -> None:
    """Return this thread's pooled connection to the pool now (the next query borrows one
    again). Not inside a transaction, which a connection cannot leave, and not without a
    pool, where the connection is this thread's own anyway."""
    if connection.connection is not None and connection.pool is not None:
        if not connection.in_atomic_block:
            connection.close()


class SignInBackend(ModelBackend):
    @sensitive_variables("password")
    def authenticate(self, request, username=None, password=None, **kwargs):
        user_model = get_user_model()
        if username is None:
            username = kwargs.get(user_model.USERNAME_FIELD)
        if username is None or password is None:
            return None
        counts = signin_throttle.charge(throttle_keys(request, username))
        if refusal := _refusal(counts, spent=False):
            if request is not None:
                request._sign_in_refusal = refusal
            raise PermissionDenied  # authenticate() stops here: no other backend, no hash
        try:
            user = user_model._default_manager.get_by_natural_key(username)
        except user_model.DoesNotExist:
            user = None
        give_back_connection()
        if check_password_with_timing_attack_mitigation(
            user, password
        ) and self.user_can_authenticate(user):
            signin_throttle.succeeded(
                clear=[c.key for c in counts if c.key.startswith("user:")],
                refund=[c.key for c in counts if not c.key.startswith("user:")],
            )
            return user
        if request is not None and (refusal := _refusal(counts, spent=True)):
            request._sign_in_refusal = refusal  # that was the last try the window allows
        return None

    async def aauthenticate(self, request, username=None, password=None, **kwargs):
        return await sync_to_async(self.authenticate)(
            request, username=username, password=password, **kwargs
        )

    def get_user(self, user_id):
        user_model = get_user_model()
        try:
            user = _users_with_invitations().get(pk=user_id)
        except user_model.DoesNotExist:
            return None
        user.pending_invitations = [
            teams.PendingInvitation.from_json(row) for row in user.pending_invitations_json or ()
        ]
        user.board_teams = [teams.team_from_json(row) for row in user.teams_json or ()]
        return user if self.user_can_authenticate(user) else None


@functools.cache
def _users_with_invitations():
    """Users, each with the invitations waiting for them and their teams (one query with
    the user's row): built once per process and only ever filtered (building the subquery
    was 1.7 ms of every Board request's 4)."""
    return get_user_model()._default_manager.annotate(
        pending_invitations_json=teams.pending_invitations_of_users(),
        teams_json=teams.teams_of_users(),
    )
