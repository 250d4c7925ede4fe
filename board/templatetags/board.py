"""Small formatting filters for the Board. All return plain strings (autoescaped later)."""

from __future__ import annotations

import json
from datetime import datetime

from django import template
from django.utils import timezone

from board.drawer import marker_for_outcome

register = template.Library()


def _span(seconds: float) -> str:
    seconds = int(abs(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s" if minutes < 10 else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    return f"{hours // 24}d"


@register.filter
def until(value: datetime | None) -> str:
    """'in 4m 12s' for a time ahead, '3m ago' for one behind."""
    if value is None:
        return ""
    delta = (value - timezone.now()).total_seconds()
    return f"in {_span(delta)}" if delta >= 0 else f"{_span(delta)} ago"


@register.filter
def ago(value: datetime | None) -> str:
    if value is None:
        return ""
    delta = (timezone.now() - value).total_seconds()
    return "just now" if delta < 5 else f"{_span(delta)} ago"


@register.filter
def is_past(value: datetime | None) -> bool:
    return value is not None and value <= timezone.now()


@register.filter
def clock(value: datetime | None) -> str:
    """14:21:07 in UTC today; with the date otherwise."""
    if value is None:
        return ""
    value = timezone.localtime(value)
    if value.date() == timezone.localtime().date():
        return value.strftime("%H:%M:%S")
    return value.strftime("%Y-%m-%d %H:%M")


@register.filter
def pretty_json(value) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (RecursionError, ValueError, TypeError):
        # Stored before results were limited in depth (queues.bounds.RESULT_MAX_DEPTH).
        return "(this result nests too deeply to show)"


@register.filter
def state_label(value: str) -> str:
    return {"retry_wait": "retry wait", "dead": "dead letter"}.get(value, value)


@register.filter
def words(value: str | None) -> str:
    """lease_expired → lease expired."""
    return (value or "").replace("_", " ")


@register.filter
def outcome_marker(outcome: str | None):
    """The marker (kind, glyph, words) of an attempt outcome, or None."""
    return marker_for_outcome(outcome)
