"""Bulk rerun and cancel (board/triage.py): GET shows the confirmation (how many, which, and
which the action would leave alone), POST acts and shows what happened to each. Plain forms:
no JavaScript needed; the POST carries Django's CSRF token like every Board form.

A confirmation's todos are the rows a person ticked, "all matching" the queue's filters, or
one group of the dead letters by reason (``reason``, and ``error`` for one of its errors):
the /queue/dead/ page (``dead_letters``), whose every group offers Rerun… and Cancel…."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_http_methods

from switchboard.board import triage
from switchboard.board.scope import board_scope
from switchboard.board.views.queue import _filters, _query
from switchboard.queues.arguments import id_from_text
from switchboard.queues.models import TodoState
from switchboard.queues.selectors import (
    DEAD_GROUPED,
    ERROR_START_CHARS,
    TAB_COUNT_CAP,
    QueueFilters,
    SearchRefused,
    board_bulk_selection,
    board_dead_letter_groups,
    board_dead_letters,
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
    endpoints = board_endpoint_choices(scope.team_ids)
    pick = triage.group_pick(params)
    if pick is not None:
        # A group of dead letters, of every endpoint or of one of the reader's: an endpoint
        # id that is not one (unknown or another team's) is the ordinary 404.
        endpoint = _endpoint(params.get("endpoint", ""), endpoints)
        filters = QueueFilters(state=TodoState.DEAD, endpoint_id=endpoint.pk if endpoint else None)
        back = _dead_letters_url(filters.endpoint_id)
    else:
        filters = _filters(_Query(params), {endpoint.pk for endpoint in endpoints})
        back = reverse("queue") + (f"?{_query(filters)}" if filters.active else "")
    context = {
        "action": action,
        "filters": filters,
        "group": pick,
        "back_url": back,
        "bulk_max": triage.BULK_MAX,
    }
    if request.method == "POST":
        return _act(request, scope, action, context)
    if pick is not None:
        return _confirm_group(request, scope, action, pick, context)
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
    context["all_matching"] = all_matching
    # Sent ids that are not todos of the teams (unknown or foreign alike): counted only.
    not_found = len(ids) - len(selection.stamps) if ids is not None and not too_many else 0
    return _confirmation(request, action, selection, context, over=too_many, not_found=not_found)


def _confirm_group(request, scope, action, pick, context):
    """One group of the dead letters by reason: its members among the newest DEAD_GROUPED
    dead letters (the ones the page grouped), the newest BULK_MAX of them confirmed."""
    endpoint_id = context["filters"].endpoint_id
    members = triage.group_members(
        pick, board_dead_letters(scope.team_ids, endpoint_id=endpoint_id)
    )
    selection = board_bulk_selection(
        scope.team_ids,
        context["filters"],
        ids=members[: triage.BULK_MAX],
        limit=triage.BULK_MAX,
        shown=triage.CONFIRM_SHOWN,
    )
    context["all_matching"] = False
    return _confirmation(request, action, selection, context, matching=len(members))


def _confirmation(request, action, selection, context, *, over=False, not_found=0, matching=None):
    stamps = selection.stamps
    acting = [s for s in stamps if s.state in action.states]
    leaving = [s for s in stamps if s.state not in action.states]
    rows = {t.pk: t for t in selection.todos}
    acting_shown = [rows[s.pk] for s in acting if s.pk in rows]
    matching = selection.matching if matching is None else matching
    context.update(
        {
            "step": "confirm",
            "matching": matching,
            "over": matching > len(stamps) or over,
            # Counted in full; listed as far as the newest CONFIRM_SHOWN of the selection.
            "acting": len(acting),
            "acting_shown": acting_shown,
            "acting_more": len(acting) - len(acting_shown),
            "leaving": len(leaving),
            "leaving_shown": [rows[s.pk] for s in leaving if s.pk in rows],
            "not_found": not_found,
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


# ---------------------------------------------------------------------------------------
# Dead letters by reason


@require_GET
@login_required
def dead_letters(request):
    """The reader's teams' dead letters (or one endpoint's: ``?endpoint=<id>``), grouped by
    their reason in the queue rows' words and, within a reason, by their last try's error,
    each group with its count and Rerun… / Cancel… for exactly its todos (the bulk
    confirmation). The newest DEAD_GROUPED are grouped, and the page says so past them.
    Four statements: the session, the user with their teams, the endpoints, the groups."""
    scope = board_scope(request)
    endpoints = board_endpoint_choices(scope.team_ids)
    endpoint = _endpoint(request.GET.get("endpoint", ""), endpoints)
    found = board_dead_letter_groups(scope.team_ids, endpoint_id=endpoint.pk if endpoint else None)
    groups = triage.reason_groups(found.keys)
    queue_dead = {"state": TodoState.DEAD, **({"endpoint": endpoint.pk} if endpoint else {})}
    context = {
        "groups": groups[: triage.REASONS_SHOWN],
        "other_reasons": len(groups[triage.REASONS_SHOWN :]),
        "other_reasons_count": sum(g.count for g in groups[triage.REASONS_SHOWN :]),
        "grouped": found.grouped,
        "total": min(found.total, TAB_COUNT_CAP),
        "total_over": found.total > TAB_COUNT_CAP,
        "left_out": found.total > found.grouped,
        "dead_grouped": DEAD_GROUPED,
        "error_chars": ERROR_START_CHARS,
        "endpoints": endpoints,
        "endpoint": endpoint,
        "several_teams": len(scope.team_ids) > 1,
        "queue_url": f"{reverse('queue')}?{urlencode(queue_dead)}",
        "bulk_max": triage.BULK_MAX,
    }
    return render(request, "board/dead_letters.html", context)


def _endpoint(text: str, endpoints):
    """The endpoint ``?endpoint=`` names among the page's (None when empty); any other
    value, an unknown id, another team's or not an id at all, is the ordinary 404."""
    if not text:
        return None
    endpoint_id = id_from_text(text)
    endpoint = next((e for e in endpoints if e.pk == endpoint_id), None)
    if endpoint is None:
        raise Http404
    return endpoint


def _dead_letters_url(endpoint_id: int | None) -> str:
    query = f"?{urlencode({'endpoint': endpoint_id})}" if endpoint_id else ""
    return reverse("dead-letters") + query
