"""The demo team's strip (templates/board/_demo_strip.html): the agents there are simulated,
and the first-run walkthrough (vend an endpoint, copy a snippet, create a first todo) is one
click away, on the queue of the person's own team, where it shows while that team has no
endpoint.

The demo team is the one ``switchboard demo`` created: it names it ``DEMO_TEAM_NAME``, which
nothing else does, and teams are never renamed. Hiding the strip lasts until sign-out (kept
in the session); both of its buttons are plain POSTs, so it works without script.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from switchboard.board.redirects import local
from switchboard.board.scope import board_scope
from switchboard.queues.models import Team

DEMO_TEAM_NAME = "Demo agents"  # switchboard/demo/team.py names the team it creates so
HIDDEN_KEY = "board_demo_strip_hidden"


def is_demo_team(team: Team) -> bool:
    return not team.personal and team.name == DEMO_TEAM_NAME


def demo_strip(request: HttpRequest) -> dict | None:
    """The strip's context when the page shows a demo team's work (picked, or among "All
    teams") and the person has not hidden it; else None. No query: the teams come with the
    user (board.scope)."""
    if not request.user.is_authenticated or request.session.get(HIDDEN_KEY):
        return None
    scope = board_scope(request)
    shown = set(scope.team_ids)
    team = next((t for t in scope.teams if t.pk in shown and is_demo_team(t)), None)
    if team is None:
        return None
    # Where the walkthrough shows: the person's personal team (the first by name, as
    # Scope.home_team picks it), else the endpoints page's vend form.
    own = next((t for t in scope.teams if t.personal), None)
    return {"team": team, "own_team": own}


@login_required
@require_POST
def demo_strip_hide(request: HttpRequest) -> HttpResponse:
    """Hide the strip until sign-out, back to the page it was on (a path of this site only,
    as the team switcher's ``next``)."""
    request.session[HIDDEN_KEY] = True
    return HttpResponseRedirect(
        local(request, request.POST.get("next", "")) or reverse("board-home")
    )


def context(request: HttpRequest) -> dict:
    """Template context on every page (base.html shows the strip): a callable, so a fragment
    that never shows it never decides."""
    return {"demo_strip": lambda: demo_strip(request)}
