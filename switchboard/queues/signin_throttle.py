"""The sign-in throttle: sign-ins counted per key (``user:<lowercased name>``,
``addr:<client address>``) in a fixed window, in PostgreSQL, so that every web process counts
the same guesses (board/auth.py builds the keys and applies the limits).

A sign-in is **charged before its password is checked** and refunded when it succeeds. So
concurrent guesses cannot slip past the limit between a check and a count (each one's charge
is one atomic upsert), and a refused sign-in never reaches the password hash. The window is
the database's clock, like every lease.

Why raw SQL: the charge is an upsert whose update depends on the row's old window (start a new
window when the old one is over, else add one), returning the count and the time left, for
both keys in one statement. The ORM's ``bulk_create(update_conflicts=True)`` can only copy the
new values over. The statements are queues/sql/accounts.py's SIGNIN_*; each has tests in
tests/board/test_signin.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.db.models import F

from switchboard.queues import db, sql
from switchboard.queues.models import SignInThrottle

PRUNE_BATCH = 50


@dataclass(frozen=True, slots=True)
class Count:
    """A key after a charge: the sign-ins counted in its window, this one included."""

    key: str
    limit: int
    failures: int
    seconds_left: float

    @property
    def refused(self) -> bool:
        """Over the limit: this sign-in is not checked at all."""
        return self.failures > self.limit

    @property
    def spent(self) -> bool:
        """This sign-in was the last one the window allows."""
        return self.failures >= self.limit


def window_seconds() -> int:
    return settings.SWITCHBOARD_SIGNIN_WINDOW_SECONDS


def charge(limits: dict[str, int]) -> list[Count]:
    """Count one sign-in against each key (``{key: limit}``; a limit of 0 is no limit and
    charges nothing); one statement. Returns the counts, by key."""
    keys = sorted(key for key, limit in limits.items() if limit > 0)
    if not keys:
        return []
    window = window_seconds()
    rows = db.fetch(sql.SIGNIN_CHARGE, {"keys": keys, "window": window})
    counts = [
        Count(key=key, limit=limits[key], failures=failures, seconds_left=max(left, 0.0))
        for key, failures, left in sorted(rows)
    ]
    if any(count.failures == 1 for count in counts):  # a window opened: forget old ones
        db.fetch(sql.SIGNIN_PRUNE, {"window": window, "batch": PRUNE_BATCH})
    return counts


def succeeded(*, clear: list[str], refund: list[str]) -> None:
    """A sign-in succeeded: forget the keys in ``clear`` (its user name) and take its charge
    back from those in ``refund`` (its address, which keeps the other guesses it made)."""
    if clear:
        SignInThrottle.objects.filter(key__in=clear).delete()
    if refund:
        SignInThrottle.objects.filter(key__in=refund, failures__gt=0).update(
            failures=F("failures") - 1
        )
