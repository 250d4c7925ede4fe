"""Bulk rerun and cancel (board/triage.py): GET shows the confirmation (how many, which, and
which the action would leave alone), POST acts and shows what happened to each. Plain forms:
no JavaScript needed; the POST carries Django's CSRF token like every Board form."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from board import triage
from board.scope import board_scope
from board.views.queue import _filters, _query
from queues.arguments import id_from_text
from queues.selectors import (
    SearchRefused,
    board_bulk_selection,
    board_endpoint_choices,
    board_titles,
    search_time_bound,
)


@login_required
@require_http_methods(["GET", "POST"])
def bulk(request):
    params = request.GET if request.method == "GET" else request.POST
    action = triage.ACTIONS.get(params.get("do", ""))
    if action is None:
        return HttpResponseBadRequest("Unknown bulk action: rerun or cancel.")
    scope = board_scope(request)
    endpoint_ids = {endpoint.pk for endpoint in board_endpoint_choices(scope.team_ids)}
    filters = _filters(_Query(params), endpoint_ids)
    back = reverse("queue") + (f"?{_query(filters)}" if filters.active else "")
    context = {"action": action, "filters": filters, "back_url": back, "bulk_max": triage.BULK_MAX}
    if request.method == "POST":
        return _act(request, scope, action, context)
    return _confirm(request, scope, action, filters, context)


def _confirm(request, scope, action, filters, context):
    all_matching = request.GET.get("all") in ("1", "on", "true")
    ids = None
    if not all_matching:
        ids = [n for n in map(id_from_text, request.GET.getlist("pick")) if n is not None]
        ids = list(dict.fromkeys(ids))
    too_many = ids is not None and len(ids) > triage.BULK_MAX
    try:
        with search_time_bound(filters.text, searcher=request.user.pk):
            selection = board_bulk_selection(
                scope.team_ids, filters, ids=ids, limit=triage.BULK_MAX, shown=triage.CONFIRM_SHOWN
            )
    except SearchRefused as refused:
        context.update({"step": "refused", "refusal": str(refused)})
        return render(request, "board/triage.html", context, status=400)
    stamps = selection.stamps
    acting = [s for s in stamps if s.state in action.states]
    leaving = [s for s in stamps if s.state not in action.states]
    rows = {t.pk: t for t in selection.todos}
    acting_shown = [rows[s.pk] for s in acting if s.pk in rows]
    context.update(
        {
            "step": "confirm",
            "all_matching": all_matching,
            "matching": selection.matching,
            "over": selection.matching > len(stamps) or too_many,
            # Counted in full; listed as far as the newest CONFIRM_SHOWN of the selection.
            "acting": len(acting),
            "acting_shown": acting_shown,
            "acting_more": len(acting) - len(acting_shown),
            "leaving": len(leaving),
            "leaving_shown": [rows[s.pk] for s in leaving if s.pk in rows],
            # Sent ids that are not todos of the teams (unknown or foreign alike): counted only.
            "not_found": len(ids) - len(stamps) if ids is not None and not too_many else 0,
            "items": triage.encode_items(
                (s.pk, triage.stamp(s.state, s.last_attempt_seq, s.round)) for s in acting
            ),
        }
    )
    return render(request, "board/triage.html", context)


def _act(request, scope, action, context):
    items = triage.decode_items(request.POST.get("items", ""))
    result = triage.act(request.user, action, items)
    titles = board_titles(
        scope.team_ids, [o.todo_id for o in result.outcomes if o.kind != "missing"]
    )
    lines = [
        {
            "outcome": o,
            "title": titles.get(o.todo_id, ("", "", ""))[0],
            "agent": titles.get(o.todo_id, ("", "", ""))[2],
        }
        for o in result.outcomes
    ]
    context.update({"step": "result", "result": result, "lines": lines})
    return render(request, "board/triage.html", context)


class _Query:
    """The queue's filters read from a GET or, posted back with the confirmation, a POST."""

    def __init__(self, params) -> None:
        self.GET = params
