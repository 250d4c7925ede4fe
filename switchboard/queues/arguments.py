"""Argument checks shared by the transitions and the scoped reads: the same wrong type or
range gets the same precise error everywhere (the agent schemas check types first; these
also guard the Board and any other caller)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from switchboard.queues.errors import Invalid, NotFound


def whole_number(value: Any, name: str, low: int, high: int) -> int:
    """An int (not a bool) in [low, high], else Invalid."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid(f"{name} must be a whole number.")
    if not low <= value <= high:
        raise Invalid(f"{name} must be between {low} and {high}.")
    return value


def todo_id(value: Any) -> int:
    """A todo id. One that cannot exist is NotFound, exactly like an unknown one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid("todo_id must be a whole number.")
    if not 1 <= value <= 2**63 - 1:
        raise NotFound()
    return value


def instant(value: Any, name: str) -> datetime:
    """A timestamp with a time zone, as the instant in UTC: PostgreSQL stores any instant but
    not every offset (beyond +-15:59 it refuses one RFC 3339 allows)."""
    if not isinstance(value, datetime) or timezone.is_naive(value):
        raise Invalid(f"{name} must be a timestamp with a time zone.")
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise Invalid(f"{name} is out of range.") from None


def id_from_text(text: object) -> int | None:
    """An id written in a query string or a form: ASCII digits only, few enough for a bigint;
    anything else is None. Not ``str.isdigit``, which also says yes to "²" (int() then
    raises) and to other scripts' digits, nor ``int`` alone, which reads " 3", "+3" and "1_0"
    and refuses more than 4300 digits with an exception."""
    if isinstance(text, str) and _ID.fullmatch(text):
        return int(text)
    return None


_ID = re.compile(r"[0-9]{1,18}")
