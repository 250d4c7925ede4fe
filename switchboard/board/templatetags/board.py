"""Small formatting tags and filters for the Board. All return plain strings (autoescaped
later) or markup built with format_html from values, never from user text unescaped.

Times: every time on the Board (and in admin, queues/admin/) is a ``<time datetime>``
whose text, without JavaScript, is the full date and time in UTC ("2026-12-01 08:14:05
UTC"); static/board/time.js rewrites it in the browser's time zone ("2026-12-01 00:14:05
PST") with UTC on hover, and keeps relative ones ("in 4m 12s", "3m ago") ticking.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from switchboard.board.drawer import marker_for_outcome, span
from switchboard.board.reasons import dead_letter_reason
from switchboard.queues.models import TodoState
from switchboard.queues.selectors.queue import DEAD_SUMMARY_CHARS
from switchboard.queues.selectors.search import START, STOP

register = template.Library()

UTC_FORMAT = "%Y-%m-%d %H:%M:%S UTC"


@register.filter
def trace_url(trace_id: str | None) -> str:
    """Where an attempt's trace opens (SWITCHBOARD_TRACE_URL with the id in it), or ""."""
    from django.conf import settings

    if not trace_id or not settings.SWITCHBOARD_TRACE_URL:
        return ""
    return settings.SWITCHBOARD_TRACE_URL.replace("{trace_id}", trace_id)


def iso(value: datetime) -> str:
    """The machine-readable instant, in UTC with milliseconds (durations add up)."""
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime(UTC_FORMAT)


def _relative(value: datetime, style: str) -> str:
    delta = (value - timezone.now()).total_seconds()
    if style == "ago":
        return "just now" if abs(delta) < 5 else f"{span(delta)} ago"
    if style == "for":  # how long since: "waiting for 3m 12s"
        return "a moment" if abs(delta) < 5 else span(delta)
    return f"in {span(delta)}" if delta >= 0 else f"{span(delta)} ago"


@register.simple_tag
def when(value: datetime | None, style: str = "full", empty: str = ""):
    """A time in the one format: ``full`` (date and time), ``date`` (the day), ``ago``,
    ``until`` or ``for`` (relative: "3m ago", "in 3m", "3m"; the full time on hover)."""
    if value is None:
        return empty
    utc = value.astimezone(UTC)
    full = utc.strftime(UTC_FORMAT)
    if style == "date":
        text = full[:10]
    elif style in ("ago", "until", "for"):
        text = _relative(value, style)
    else:
        style, text = "full", full
    # Every part is made here from the time alone (digits, "-", ":", ".", "T", "Z", spaces,
    # "UTC", "in", "ago", "just now"), never from text a person or a worker wrote, so there
    # is nothing to escape; format_html's escaping of its four arguments was a tenth of the
    # queue page's template (a row has one to three of these).
    stamp = utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return mark_safe(  # noqa: S308  (no user text, see above)
        f'<time datetime="{stamp}" data-when="{style}" title="{full}">{text}</time>'
    )


@register.filter
def until(value: datetime | None) -> str:
    """'in 4m 12s' for a time ahead, '3m ago' for one behind (plain text)."""
    return _relative(value, "until") if value is not None else ""


@register.filter
def ago(value: datetime | None) -> str:
    return _relative(value, "ago") if value is not None else ""


@register.filter
def is_past(value: datetime | None) -> bool:
    return value is not None and value <= timezone.now()


@register.filter
def pretty_json(value) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    except (RecursionError, ValueError, TypeError):
        # Stored before results were limited in depth (queues.bounds.RESULT_MAX_DEPTH).
        return "(this result nests too deeply to show)"


# The one name of each state in the Board's words (tabs, badges, counts, messages).
STATE_LABELS = {
    TodoState.PENDING: "pending",
    TodoState.CLAIMED: "claimed",
    TodoState.RETRY_WAIT: "retry wait",
    TodoState.DONE: "done",
    TodoState.DEAD: "dead letter",
    TodoState.CANCELED: "canceled",
    # A todo waits on people (a question), on other todos or on its children: the tab and
    # the counts say "waiting", a row and the drawer say which (todo_state).
    TodoState.WAITING: "waiting",
}
WAITING_LABELS = {
    "people": "waiting on people",
    "todos": "waiting for todos",
    "children": "waiting for children",
}


@register.filter
def state_label(value: str) -> str:
    return STATE_LABELS.get(value, (value or "").replace("_", " "))


@register.filter
def todo_state(todo) -> str:
    """A todo's state in words, saying what a waiting one waits for."""
    if todo.state == TodoState.WAITING:
        return WAITING_LABELS.get(todo.waiting_for, "waiting")
    return state_label(todo.state)


@register.filter
def spent_tone(todo) -> str:
    """How loud a todo's spent failure budget is: quiet once it is over (done, canceled),
    a warning while it is live, an error for a dead letter."""
    if not todo.failures:
        return "muted"
    if todo.state == TodoState.DEAD:
        return "error"
    if todo.state in (TodoState.DONE, TodoState.CANCELED):
        return "muted"
    return "warn"


@register.filter
def words(value: str | None) -> str:
    """lease_expired → lease expired."""
    return (value or "").replace("_", " ")


@register.filter
def outcome_marker(outcome: str | None):
    """The marker (kind, glyph, words) of an attempt outcome, or None."""
    return marker_for_outcome(outcome)


@register.filter
def percent(value: float) -> str:
    """An SVG length in percent, with a dot whatever the locale."""
    return f"{float(value):.2f}%"


@register.filter
def dead_reason(todo) -> str:
    """A queue row's dead letter, in words ("failed 5 of 5", "died 3 times"): from the
    counts queues.selectors annotates on dead rows (``dead_failed``, ``dead_died``)."""
    if todo.state != TodoState.DEAD:
        return ""
    return dead_letter_reason(
        todo.dead_letter_reason,
        failures=todo.failures,
        max_attempts=todo.max_attempts,
        failed=getattr(todo, "dead_failed", None),
        died=getattr(todo, "dead_died", None),
    )


@register.filter
def cut_short(text: str | None) -> bool:
    """Is this dead letter's summary as much of it as the queue row reads (the rest is in
    its drawer)?"""
    return bool(text) and len(text) >= DEAD_SUMMARY_CHARS


@register.filter
def stall_words(stall) -> str:
    """A stalled endpoint in words (queues.endpoint_health.Stall): colour never says it
    alone."""
    if stall is None:
        return ""
    seen = (
        "no agent seen in the last hour"
        if stall.seen_ago is None
        else f"no agent seen for {span(stall.seen_ago.total_seconds())}"
    )
    waited = span(stall.waiting.total_seconds())
    minutes, seconds = divmod(int(stall.threshold.total_seconds()), 60)
    after = f"{minutes} min" if not seconds else span(stall.threshold.total_seconds())
    return f"work has waited {waited} and {seen} (stalled after {after})"


@register.filter
def highlighted(text: str | None) -> str:
    """A search snippet (queues.selectors.search.Snippet.text): the text escaped first,
    whatever it holds, and only then each START…STOP stretch marked; the marks are the only
    markup, so a worker's summary cannot add any."""
    out, marking = [], False
    for piece in re.split(f"([{START}{STOP}])", text or ""):
        if piece == START and not marking:
            out.append("<mark>")
            marking = True
        elif piece == STOP and marking:
            out.append("</mark>")
            marking = False
        elif piece not in (START, STOP):
            out.append(escape(piece))
    if marking:
        out.append("</mark>")
    return mark_safe("".join(out))  # noqa: S308  (every piece of text escaped above)


@register.filter
def grouped(value) -> str:
    """A count as every count on the Board is written: "2,035"."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)
