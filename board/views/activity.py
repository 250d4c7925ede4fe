"""Activity: attempt endings and audited actions across the user's queues, as sentences."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils import timezone
from django.utils.http import urlencode

from board.scope import board_scope
from board.sentences import sentence
from queues.selectors import board_activity

PAGE = 50


@login_required
def activity_list(request):
    scope = board_scope(request)
    before = _timestamp(request.GET.get("before", ""))
    items = board_activity(scope.team_ids, before=before, limit=PAGE)
    lines = [sentence(item) for item in items]
    older = "?" + urlencode({"before": items[-1].at.isoformat()}) if len(items) == PAGE else None
    context = {"lines": lines, "older_url": older, "paged": before is not None}
    if request.htmx and request.htmx.target == "activity":
        return render(request, "board/activity_list.html#activity", context)
    return render(request, "board/activity_list.html", context)


def _timestamp(text: str) -> datetime | None:
    """A bad ``before`` is ignored (the newest page), never an error. The instant is kept in
    UTC: Python reads offsets up to +-23:59, PostgreSQL refuses a literal beyond +-15:59."""
    try:
        value = datetime.fromisoformat(text[:40])
    except ValueError:
        return None
    if not timezone.is_aware(value):
        return None
    try:
        return value.astimezone(UTC)
    except OverflowError:  # before year 1 or after 9999 once in UTC
        return None
