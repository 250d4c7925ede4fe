"""The authentication backend behind every sign-in (the Board's /login/ and Django admin's):
Django's ``ModelBackend``, throttled and without a pooled connection across the hash. It
also loads each request's user, with the team invitations waiting for them in the same query
(``user.pending_invitations``, for the Team page and the queue's banner).

- **Throttled** per user name from one client address, per address, and per name from
  everywhere (queues/signin_throttle.py): each sign-in is charged first; one over the first
  two limits is refused before its password is looked at, and the refusal is left on the
  request for the sign-in page to explain (429, Retry-After). The per-name count only ever
  delays (backoff, no connection held): a stranger guessing from elsewhere slows a name
  down but cannot lock its person out, who is told of the failures once signed in.
  docs/reliability.md ("Hardening, second round") compares this with django-axes.
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
import time
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import check_password_with_timing_attack_mitigation, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.views.decorators.debug import sensitive_variables

from switchboard.queues import signin_throttle, teams

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
    proxy's header when SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER names one and the connection
    comes from a trusted proxy (SWITCHBOARD_SIGNIN_TRUSTED_PROXIES, loopback by default:
    anyone else could write the header and be counted as whoever they like). The last entry
    is the one the proxy itself added; earlier ones are whatever the client sent. An IPv6
    client counts as its /64, which one machine usually has whole."""
    raw = request.META.get("REMOTE_ADDR", "") or ""
    header = settings.SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER
    if header and _trusted_peer(raw):
        raw = request.headers.get(header, "").split(",")[-1].strip() or raw
    try:
        ip = ipaddress.ip_address(raw.strip("[]"))
    except ValueError:
        return raw[:64] or None  # not an IP (a Unix socket): counted as it reads
    if ip.version == 6 and ip.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(getattr(ip, "ipv4_mapped", None) or ip)


def trusted_proxies() -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(
        ipaddress.ip_network(entry.strip(), strict=False)
        for entry in settings.SWITCHBOARD_SIGNIN_TRUSTED_PROXIES.split(",")
        if entry.strip()
    )


def _trusted_peer(raw: str) -> bool:
    try:
        peer = ipaddress.ip_address(raw.strip("[]"))
    except ValueError:
        return raw == ""  # a Unix socket: only a local proxy can reach it
    peer = getattr(peer, "ipv4_mapped", None) or peer
    return any(peer in network for network in trusted_proxies())


def throttle_keys(request, username: str) -> dict[str, int]:
    """``{key: limit}`` for a sign-in as ``username`` from this request's client: the name
    from this address (``pair:``, the quick limit, refuses), the address for every name
    (``addr:``, refuses) and the name from everywhere (``user:``, only ever delays: its limit
    is where the delay starts)."""
    name = username[:USERNAME_KEY_CHARS].lower()
    keys = {f"user:{name}": settings.SWITCHBOARD_SIGNIN_SLOW_AFTER_PER_USER}
    address = client_address(request) if request is not None else None
    if address:
        keys[f"pair:{address} {name}"] = settings.SWITCHBOARD_SIGNIN_FAILURES_PER_USER
        keys[f"addr:{address}"] = settings.SWITCHBOARD_SIGNIN_FAILURES_PER_ADDRESS
    return keys


def _refusal(counts: list[signin_throttle.Count], *, spent: bool) -> Refusal | None:
    """The name's refusal (from this address) before the address's (the name is what the
    person can change). The per-name count never refuses: a stranger elsewhere cannot lock
    a person out."""
    over = [
        c for c in counts if not c.key.startswith("user:") and (c.spent if spent else c.refused)
    ]
    if not over:
        return None
    over.sort(key=lambda c: (not c.key.startswith("pair:"), -c.seconds_left))
    return Refusal(
        by="name" if over[0].key.startswith("pair:") else "address",
        retry_after=max(1, math.ceil(over[0].seconds_left)),
    )


def delay_seconds(counts: list[signin_throttle.Count]) -> float:
    """How long this sign-in waits before its password is checked: nothing until the name's
    failures from every address pass SWITCHBOARD_SIGNIN_SLOW_AFTER_PER_USER, then half a
    second more for each, up to SWITCHBOARD_SIGNIN_MAX_DELAY_SECONDS. A guesser spread over
    many addresses is slowed; the right password from anywhere still signs in."""
    for count in counts:
        if count.key.startswith("user:") and count.failures > count.limit > 0:
            over = count.failures - count.limit
            return min(settings.SWITCHBOARD_SIGNIN_MAX_DELAY_SECONDS, 0.5 * over)
    return 0.0


def others_failures(counts: list[signin_throttle.Count]) -> int:
    """Failed sign-ins for this name in the window from other addresses than this one."""
    by_name = sum(c.failures - 1 for c in counts if c.key.startswith("user:"))
    here = sum(c.failures - 1 for c in counts if c.key.startswith("pair:"))
    return max(0, by_name - here)


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
        if delay := delay_seconds(counts):
            time.sleep(delay)  # holding no connection: the name is being guessed at
        if check_password_with_timing_attack_mitigation(
            user, password
        ) and self.user_can_authenticate(user):
            signin_throttle.succeeded(
                clear=[c.key for c in counts if not c.key.startswith("addr:")],
                refund=[c.key for c in counts if c.key.startswith("addr:")],
            )
            if request is not None:
                request.sign_in_failures_elsewhere = others_failures(counts)
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
    was a large share of every Board request; docs/benchmarks.md, "Issue 15 again")."""
    return get_user_model()._default_manager.annotate(
        pending_invitations_json=teams.pending_invitations_of_users(),
        teams_json=teams.teams_of_users(),
    )


def tell_of_failures_elsewhere(sender, request, user, **kwargs) -> None:
    """On signing in (the Board's page or admin's): a notice of the failed sign-ins for the
    name from other addresses, when there were any. Someone may be guessing at it; the
    person is told rather than locked out (connected in board/apps.py)."""
    elsewhere = getattr(request, "sign_in_failures_elsewhere", 0) if request else 0
    if not elsewhere:
        return
    plural = "s" if elsewhere != 1 else ""
    messages.warning(
        request,
        f"{elsewhere} failed sign-in{plural} for your name from other network addresses in"
        f" the last {settings.SWITCHBOARD_SIGNIN_WINDOW_SECONDS // 60} minutes. If that was"
        " not you, someone may be guessing your password: choose a strong one.",
        fail_silently=True,
    )
