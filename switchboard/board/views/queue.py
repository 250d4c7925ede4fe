"""The queue page: the todos of the user's endpoints, filtered, newest first, live.

The page is drawn whole once; static/board/board.js then asks for ``#queue`` every few
seconds (``HX-Target: queue``) with the rows it shows (``shown``) and the newest id it has
seen (``upto``). The answer is those rows as they are now, each marked when it no longer
passes the filters, and the count of todos that arrived since, which the page offers behind
an "N new — show" bar instead of pushing the rows down. The script patches rows in place, so
focus, a text selection and the scroll position stay where the reader left them.
"""

from __future__ import annotations

from dataclasses import replace

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode

from switchboard.board.scope import board_scope
from switchboard.board.sentences import sentence
from switchboard.board.templatetags.board import STATE_LABELS
from switchboard.board.triage import BULK_MAX
from switchboard.queues.arguments import id_from_text
from switchboard.queues.bounds import KEY_MAX_CHARS
from switchboard.queues.models import VERBS, TodoState
from switchboard.queues.selectors import (
    BOARD_PAGE,
    QueueFilters,
    SearchRefused,
    board_activity,
    board_endpoint_choices,
    board_queue,
    board_queue_counts,
    board_queue_rows,
    board_todo_exists,
    jump_target,
    search_time_bound,
)
from switchboard.queues.selectors.search import search_snippets

TICKER_LINES = 8
# Seconds between the live queue's refreshes (and an open drawer's).
REFRESH_SECONDS = 5
TAB_LABELS = {
    TodoState.PENDING: "Pending",
    TodoState.CLAIMED: "Claimed",
    TodoState.RETRY_WAIT: "Retry wait",
    TodoState.WAITING: "Waiting",
    TodoState.DONE: "Done",
    TodoState.DEAD: "Dead letters",
    TodoState.CANCELED: "Canceled",
}
assert set(TAB_LABELS) == set(STATE_LABELS) == set(TodoState)


def refresh_seconds() -> int:
    return int(getattr(settings, "SWITCHBOARD_BOARD_REFRESH_SECONDS", REFRESH_SECONDS))


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
        key=get.get("key", "").replace("\x00", "\ufffd").strip()[:KEY_MAX_CHARS],
        parent_id=id_from_text(get.get("parent", "")),
    )


def _query(filters: QueueFilters, **extra) -> str:
    params = {
        "state": filters.state or "",
        "endpoint": filters.endpoint_id or "",
        "died": "1" if filters.died else "",
        "q": filters.text,
        "key": filters.key,
        "parent": filters.parent_id or "",
        **extra,
    }
    return urlencode({key: value for key, value in params.items() if value})


def _shown(request) -> list[int] | None:
    """The ids the browser shows (``shown=12,11,9``), at most a page; None: not a refresh."""
    if "shown" not in request.GET:
        return None
    ids = (id_from_text(part) for part in request.GET["shown"].split(",")[: BOARD_PAGE + 1])
    return [n for n in ids if n is not None][:BOARD_PAGE]


@login_required
def todo_list(request):
    scope = board_scope(request)
    endpoints = board_endpoint_choices(scope.team_ids)
    endpoint_ids = [endpoint.pk for endpoint in endpoints]
    filters = _filters(request, {endpoint.pk for endpoint in endpoints})
    before_id = id_from_text(request.GET.get("before", ""))
    refresh = request.htmx and request.htmx.target == "queue"
    # A search of exactly "#123" jumps to that todo's drawer, when it is one of the teams'.
    jump = jump_target(filters.text) if not refresh and not before_id else None
    if jump is not None and board_todo_exists(scope.team_ids, jump):
        return redirect("todo-detail", todo_id=jump)
    shown = _shown(request) if refresh else None
    search_refused = None
    try:
        # A search runs with a statement timeout, and one too broad to run is refused before
        # any query (queues.selectors.search_refusal): the page says why, rows none.
        with search_time_bound(filters.text, searcher=request.user.pk):
            if shown:
                todos = board_queue_rows(scope.team_ids, filters, shown, endpoint_ids=endpoint_ids)
                next_before = min(shown)
                upto = id_from_text(request.GET.get("upto", "")) or max(shown)
            else:
                todos, next_before = board_queue(
                    scope.team_ids, filters, before_id=before_id, endpoint_ids=endpoint_ids
                )
                upto = max((t.pk for t in todos), default=0)
            # New arrivals are offered by the newest page's live refresh only: an older page
            # is a fixed slice, and a page just read is the newest there is (what arrived in
            # the milliseconds since, the first refresh counts).
            newer_than = upto if refresh and not before_id else None
            counts = board_queue_counts(
                scope.team_ids, filters, newer_than=newer_than, endpoint_ids=endpoint_ids
            )
            # Why each row matched: where the words are, and the text around them.
            snippets = search_snippets(filters.text, [t.pk for t in todos])
            for t in todos:
                t.snippet = snippets.get(t.pk)
    except SearchRefused as refused:
        search_refused = str(refused)
        todos, next_before, upto = [], None, 0
        counts = board_queue_counts(scope.team_ids, replace(filters, text=""), newer_than=None)
    ticker = [sentence(item) for item in board_activity(scope.team_ids, limit=TICKER_LINES)]
    tab_filters = replace(filters, state=None)
    context = {
        "todos": todos,
        "filters": filters,
        "search_refused": search_refused,
        "endpoints": endpoints,
        "several_teams": len(scope.team_ids) > 1,
        "state_tabs": [
            {
                "state": state,
                "label": label,
                "url": f"?{_query(replace(tab_filters, state=state or None))}",
                "current": (filters.state or "") == state,
                "count": counts.label(state or None),
                # A searched (or "has died") count that stopped early is at least that many.
                "estimate": bool(filters.text or filters.died) and counts.over_cap(state or None),
            }
            for state, label in [("", "All"), *TAB_LABELS.items()]
        ],
        "older_url": f"?{_query(filters, before=next_before)}" if next_before else None,
        "newest_url": f"?{_query(filters)}" if before_id else None,
        "refresh_url": f"{reverse('queue')}?{_query(filters, before=before_id or '')}",
        "refresh_seconds": refresh_seconds(),
        "upto": upto,
        "newer": counts.newer,
        "newest": counts.newest,
        "ticker": ticker,
        "has_any_endpoint": bool(endpoints),
        # The queue filtered to a paused endpoint says so above the list.
        "paused_endpoint": next(
            (e for e in endpoints if e.pk == filters.endpoint_id and e.paused_at), None
        ),
        # "all N matching this filter": N when the tab's count says it (no search and no
        # "has died"), else the confirmation page counts them.
        "bulk_matching": f"{counts.by_state[filters.state] if filters.state else counts.total:,}"
        if not (filters.text or filters.died or counts.over_cap(filters.state))
        else None,
        "bulk_max": BULK_MAX,
        "first_run": not endpoints and not filters.active,
        **first_run_context(scope),
    }
    if refresh:
        return render(request, "board/todo_list.html#queue", context)
    return render(request, "board/todo_list.html", context)


# What the live stream (board/live.py) sends, drawn once per watched team for all its viewers.


def todo_rows_html(team_ids: list[int], ids: list[int]) -> dict[str, dict]:
    """Todo id → its queue row as the page draws it (every filter passed: each page marks
    a row that left its view itself), with its state and endpoint. One query."""
    rows = board_queue_rows(team_ids, QueueFilters(), ids)
    return {
        str(t.pk): {
            "state": t.state,
            "endpoint": t.endpoint_id,
            "html": render_to_string("board/todo_list.html#todo-row", {"t": t}),
        }
        for t in rows
    }


def ticker_lines(team_ids: list[int]) -> list[dict]:
    """The teams' newest feed lines, each drawn as the ticker draws it, with its time (the
    page merges them with its other teams' lines). One statement."""
    return ticker_html(board_activity(team_ids, limit=TICKER_LINES))


def ticker_html(lines) -> list[dict]:
    """Feed lines (``board_activity``'s) as the ticker draws them, each with its time."""
    return [
        {
            "at": line.at.timestamp(),
            "html": render_to_string("board/_feed.html#feed-line", {"line": line, "ticker": True}),
        }
        for line in map(sentence, lines)
    ]


def first_run_context(scope, **extra) -> dict:
    """What templates/board/_first_run.html needs besides its step."""
    return {
        "first_run_team": scope.home_team,
        "first_run_verbs": VERBS,
        "max_attempts": settings.SWITCHBOARD_MAX_ATTEMPTS,
        **extra,
    }
