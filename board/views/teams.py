"""Team page (members; owners add and remove them) and the team switcher.

Membership changes go through ``queues.teams`` (audited there). Only owners of the team may
change its members; a team keeps at least one owner (``queues.teams.remove_member``).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from board import scope as board_scopes
from board.forms import AddMemberForm
from board.scope import board_scope
from queues import teams
from queues.errors import Conflict
from queues.models import Membership, Team

OWNER = Membership.Role.OWNER


def _team_from_query(request: HttpRequest) -> Team | None:
    """``?team=<slug>`` among the user's teams (anything else is the 404 every unknown page
    gets), else the scope's home team."""
    scope = board_scope(request)
    slug = request.GET.get("team")
    if not slug:
        return scope.home_team
    team = next((team for team in scope.teams if team.slug == slug), None)
    if team is None:
        raise Http404
    return team


def _team_url(team: Team) -> str:
    return f"{reverse('team-detail')}?team={team.slug}"


def _page(request, team, memberships, form, *, status: int = 200) -> HttpResponse:
    context = {
        "team": team,
        "memberships": memberships,
        "is_owner": _is_owner(request.user, memberships),
        "form": form,
        "teams": board_scope(request).teams,
        "action_url": _team_url(team) if team else "",
    }
    return render(request, "board/team_detail.html", context, status=status)


def _members(team: Team) -> list[Membership]:
    rows = Membership.objects.filter(team=team).select_related("user")
    # Owners first, then by username.
    return sorted(rows, key=lambda m: (m.role != OWNER, m.user.get_username().lower()))


def _is_owner(user, memberships: list[Membership]) -> bool:
    return any(m.user_id == user.pk and m.role == OWNER for m in memberships)


@login_required
@require_http_methods(["GET", "POST"])
def team_detail(request: HttpRequest) -> HttpResponse:
    team = _team_from_query(request)
    if team is None:  # a user in no team at all
        return _page(request, None, [], None)
    memberships = _members(team)
    if request.method == "GET":
        return _page(request, team, memberships, AddMemberForm())

    if not _is_owner(request.user, memberships):
        messages.error(request, f"Only an owner of {team.name} may change its members.")
        return _page(request, team, memberships, AddMemberForm(), status=403)
    op = request.POST.get("op")
    if op == "add":
        form = AddMemberForm(request.POST)
        if not form.is_valid():
            return _page(request, team, memberships, form, status=400)
        return _add(request, team, memberships, form)
    if op == "remove":
        return _remove(request, team, memberships)
    messages.error(request, "Unknown action.")
    return redirect(_team_url(team))


def _add(request, team: Team, memberships: list[Membership], form: AddMemberForm):
    user, role = form.cleaned_data["username"], form.cleaned_data["role"]
    before = next((m for m in memberships if m.user_id == user.pk), None)
    name = user.get_username()
    if before is not None and (before.role == role or before.role == OWNER):
        messages.info(
            request, f"{name} is already {'an owner' if before.role == OWNER else 'a member'}."
        )
        return redirect(_team_url(team))
    teams.add_member(team, user, role=role, by=request.user)
    if before is not None:
        messages.success(request, f"{name} is now an owner of {team.name}.")
    else:
        messages.success(request, f"{name} added to {team.name} as {role}.")
    return redirect(_team_url(team))


def _remove(request, team: Team, memberships: list[Membership]):
    user_id = request.POST.get("user", "")
    membership = next((m for m in memberships if str(m.user_id) == user_id), None)
    if membership is None:
        messages.error(request, "That user is not a member of this team.")
        return redirect(_team_url(team))
    try:
        teams.remove_member(team, membership.user, by=request.user)
    except Conflict:
        messages.error(request, f"{team.name} keeps at least one owner: add another owner first.")
        return redirect(_team_url(team))
    name = membership.user.get_username()
    messages.success(request, f"{name} removed from {team.name}.")
    if membership.user_id == request.user.pk:  # left the team: its page is no longer yours
        return redirect("board-home")
    return redirect(_team_url(team))


@login_required
@require_POST
def team_switch(request: HttpRequest) -> HttpResponse:
    """Pick the team the Board shows (empty: all of the user's teams)."""
    slug = request.POST.get("team", "")
    if slug and any(team.slug == slug for team in board_scope(request).teams):
        request.session[board_scopes.SESSION_KEY] = slug
    else:
        request.session.pop(board_scopes.SESSION_KEY, None)
        if slug:  # the same words for an unknown and a foreign slug
            messages.error(request, "That is not one of your teams; showing all teams.")
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = reverse("board-home")
    return redirect(target)
