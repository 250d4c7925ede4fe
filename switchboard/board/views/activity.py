"""Activity: attempt endings and audited actions across the user's queues, as sentences."""

from __future__ import annotations

from datetime import UTC, datetime

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from switchboard.board.scope import board_scope
from switchboard.board.sentences import sentence
from switchboard.queues.arguments import id_from_text
from switchboard.queues.selectors import (
    ActivityFilters,
    board_activity,
    board_endpoint_choices,
    board_people,
)
from switchboard.queues.selectors.board import ACTIVITY_KINDS

PAGE = 50


@login_required
def activity_list(request):
    scope = board_scope(request)
    before = _timestamp(request.GET.get("before", ""))
    endpoints = board_endpoint_choices(scope.team_ids)
    people = board_people(scope.team_ids)
    filters, query = _filters(request.GET, endpoints, people)
    items = board_activity(scope.team_ids, before=before, limit=PAGE, filters=filters)
    lines = [sentence(item) for item in items]
    older = (
        "?" + urlencode({**query, "before": items[-1].at.isoformat()})
        if len(items) == PAGE
        else None
    )
    context = {
        "lines": lines,
        "older_url": older,
        "paged": before is not None,
        "filters": filters,
        "endpoints": endpoints,
        "people": people,
        "several_teams": len(scope.team_ids) > 1,
        "live_url": reverse("activity-list") + (f"?{urlencode(query)}" if query else ""),
        # Everything, or only what went wrong, or what people did: links that keep the
        # other filters.
        "kinds": [
            {
                "label": kind.label,
                "url": "?"
                + urlencode(
                    {
                        **{k: v for k, v in query.items() if k != "kind"},
                        **({"kind": key} if key else {}),
                    }
                ),
                "current": key == filters.kind,
                "key": key or "all",
            }
            for key, kind in ACTIVITY_KINDS.items()
        ],
    }
    if request.htmx and request.htmx.target == "activity":
        return render(request, "board/activity_list.html#activity", context)
    return render(request, "board/activity_list.html", context)


def _filters(get, endpoints, people) -> tuple[ActivityFilters, dict]:
    """Activity's filters from the query string, and the query that keeps them. A value that
    is not one of the teams' (an id of another team's todo, endpoint or member) is ignored,
    never an error; a todo id outside the teams simply finds nothing."""
    todo_id = id_from_text(get.get("todo", ""))
    endpoint_id = id_from_text(get.get("endpoint", ""))
    endpoint = next((e for e in endpoints if e.pk == endpoint_id), None)
    person_id = id_from_text(get.get("person", ""))
    if person_id not in {pk for pk, _ in people}:
        person_id = None
    kind = get.get("kind", "")
    if kind not in ACTIVITY_KINDS:
        kind = ""
    filters = ActivityFilters(todo_id=todo_id, endpoint=endpoint, person_id=person_id, kind=kind)
    query = {
        key: value
        for key, value in (
            ("todo", todo_id),
            ("endpoint", endpoint.pk if endpoint else None),
            ("person", person_id),
            ("kind", kind),
        )
        if value
    }
    return filters, query


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
