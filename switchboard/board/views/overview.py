"""The landing page: the team overview (board/overview.py) once the reader's teams have an
endpoint; before that, the queue page's first-run walkthrough. A ``/?…`` link from before
the queue moved to ``/queue/`` is sent there."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET

from switchboard.board import overview
from switchboard.board.scope import board_scope
from switchboard.board.sentences import sentence
from switchboard.board.templatetags.board import stall_words
from switchboard.board.views import queue
from switchboard.board.waiting import people_counts
from switchboard.queues.endpoint_health import team_last_hour, team_now
from switchboard.queues.selectors import TAB_COUNT_CAP, board_activity, owned_team_ids


@require_GET
@login_required
def overview_page(request):
    if request.GET:
        return redirect(f"{reverse('queue')}?{request.GET.urlencode()}")
    scope = board_scope(request)
    sections = []
    for team in [scope.current] if scope.current else scope.teams:
        now = team_now(team.pk, cap=TAB_COUNT_CAP)
        if not now:
            continue  # a team without endpoints has nothing to show here
        rows = overview.rows(now, team_last_hour(team.pk))
        sections.append({"team": team, "rows": rows, "totals": overview.totals(team.pk, rows)})
    if not sections:
        return queue.todo_list(request)  # the walkthrough: vend, connect, first todo
    team_ids = [section["team"].pk for section in sections]
    context = {
        "sections": sections,
        "owner_of": owned_team_ids(request.user, team_ids),
        "ticker": [sentence(i) for i in board_activity(scope.team_ids, limit=queue.TICKER_LINES)],
        "refresh_seconds": queue.refresh_seconds(),
        "nav_stalls": sum(len(section["totals"].stalled) for section in sections),
        "nav_people": sum(section["totals"].people for section in sections),
    }
    return render(request, "board/overview.html", context)


@require_GET
@login_required
def stalls(request):
    """The stalled endpoints of the teams the Board shows, for the nav's badge on every page
    but the overview (which counts its own rows): static/board/board.js asks on load and now
    and then. Two statements a team, the overview's, its counts by state capped at zero (the
    badge needs none of them); and how many of their todos wait on people, for the nav's
    Waiting count (one statement)."""
    scope = board_scope(request)
    found = []
    for team in [scope.current] if scope.current else scope.teams:
        now = team_now(team.pk, cap=0)
        if not now:
            continue
        for row in overview.rows(now, team_last_hour(team.pk)):
            if row.stall:
                found.append(
                    {
                        "endpoint": row.endpoint.pk,
                        "agent_id": row.endpoint.agent_id,
                        "team": team.name,
                        "words": stall_words(row.stall),
                    }
                )
    # The nav's Waiting count too, on pages whose stream does not carry every team's counts
    # (one more statement, through todos_endpoint_state).
    people = sum(n for counts in people_counts(scope.team_ids).values() for n in counts.values())
    response = JsonResponse({"stalled": found, "people": people})
    response["Cache-Control"] = "no-store"
    return response
