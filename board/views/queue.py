"""The queue page: the todos of the user's endpoints, filtered, newest first, refreshing."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.http import urlencode

from board.scope import board_scope
from board.sentences import sentence
from queues.arguments import id_from_text
from queues.models import TodoState
from queues.selectors import (
    QueueFilters,
    board_activity,
    board_endpoint_choices,
    board_queue,
)

TICKER_LINES = 8
STATE_TABS = [("", "All")] + [
    (state, label)
    for state, label in [
        ("pending", "Pending"),
        ("claimed", "Claimed"),
        ("retry_wait", "Retry wait"),
        ("done", "Done"),
        ("dead", "Dead letters"),
        ("canceled", "Canceled"),
    ]
]


def _filters(request, endpoint_ids: set[int]) -> QueueFilters:
    """Unknown values are dropped, never an error: a stale bookmark still opens."""
    get = request.GET
    state = get.get("state", "")
    endpoint_id = id_from_text(get.get("endpoint", ""))
    return QueueFilters(
        state=state if state in TodoState.values else None,
        endpoint_id=endpoint_id if endpoint_id in endpoint_ids else None,
        died=get.get("died") in ("1", "on", "true"),
        # PostgreSQL text cannot hold a NUL, and the ledger stored each one as U+FFFD, so
        # the filter looks for what was stored.
        text=get.get("q", "").replace("\x00", "\ufffd").strip()[:200],
    )


def _query(filters: QueueFilters, **extra) -> str:
    params = {
        "state": filters.state or "",
        "endpoint": filters.endpoint_id or "",
        "died": "1" if filters.died else "",
        "q": filters.text,
        **extra,
    }
    return urlencode({key: value for key, value in params.items() if value})


@login_required
def todo_list(request):
    scope = board_scope(request)
    endpoints = board_endpoint_choices(scope.team_ids)
    filters = _filters(request, {endpoint.pk for endpoint in endpoints})
    before_id = id_from_text(request.GET.get("before", ""))
    todos, next_before = board_queue(scope.team_ids, filters, before_id=before_id)
    ticker = [sentence(item) for item in board_activity(scope.team_ids, limit=TICKER_LINES)]
    context = {
        "todos": todos,
        "filters": filters,
        "endpoints": endpoints,
        "several_teams": len(scope.team_ids) > 1,
        "state_tabs": [
            (
                label,
                f"?{_query(QueueFilters(state or None, filters.endpoint_id, filters.died, filters.text))}",
                (filters.state or "") == state,
            )
            for state, label in STATE_TABS
        ],
        "older_url": f"?{_query(filters, before=next_before)}" if next_before else None,
        "newest_url": f"?{_query(filters)}" if before_id else None,
        "refresh_url": f"{request.path}?{request.GET.urlencode()}",
        "ticker": ticker,
        "has_any_endpoint": bool(endpoints),
    }
    if request.htmx and request.htmx.target == "queue":
        return render(request, "board/todo_list.html#queue", context)
    return render(request, "board/todo_list.html", context)
