"""Team page (members, invitations and dead-letter sinks; owners change them) and the team
switcher.

Membership, invitation and sink changes go through ``queues.teams`` (audited there). Only
owners of the team may invite, remove members or change sinks; a team keeps at least one
owner (``queues.teams.remove_member``). Owners **invite** a user name rather than add a user:
the answer is the same whether or not the name exists, and the user with that name joins by
accepting the invitation, here or from the queue page's banner. Answering an invitation is the
invitee's own action, so it is taken before any team of the query string is looked at; an
invitation that is not theirs (unknown, someone else's, already answered) is the ordinary 404. A sink's signing secret is shown once, rendered straight
into the response to the POST that made it (never stored in the session, a message, a log or
a redirect URL) with caching off, like an endpoint's token.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from switchboard.board import live
from switchboard.board import scope as board_scopes
from switchboard.board.forms import InviteMemberForm, SinkForm
from switchboard.board.redirects import local
from switchboard.board.scope import board_scope
from switchboard.board.views.endpoints import shown_once
from switchboard.queues import outbox, selectors, teams
from switchboard.queues.arguments import id_from_text
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import DeadLetterSink, Membership, Team

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


def _page(request, team, memberships, form, *, sink_form=None, status: int = 200) -> HttpResponse:
    is_owner = _is_owner(request.user, memberships)
    context = {
        "team": team,
        "personal_of": _personal_of(team, memberships),
        "memberships": memberships,
        "is_owner": is_owner,
        # The last owner is offered no Leave or Remove: the team would have no owner.
        "owners": sum(1 for m in memberships if m.role == Membership.Role.OWNER),
        "invitations": teams.pending_invitations(team) if team and is_owner else [],
        # Loaded with the user (board/auth.py): no query of its own.
        "my_invitations": getattr(request.user, "pending_invitations", []),
        "form": form,
        "sink_form": sink_form or SinkForm(),
        "sinks": _sinks(team) if team else [],
        "teams": board_scope(request).teams,
        "action_url": _team_url(team) if team else "",
    }
    return render(request, "board/team_detail.html", context, status=status)


def _personal_of(team: Team | None, memberships: list[Membership]):
    """Whose personal team this is: its first member (made its owner with the account), who
    may not be the person reading (another owner, or a member invited in)."""
    if team is None or not team.personal or not memberships:
        return None
    return min(memberships, key=lambda m: (m.created_at, m.pk)).user


def _sinks(team: Team) -> list[DeadLetterSink]:
    sinks = selectors.team_sinks(team)
    for sink in sinks:
        sink.last = outbox.DeliveryStatus.from_json(sink.last_delivery)
    return sinks


def _members(team: Team) -> list[Membership]:
    return selectors.team_members(team)


def _is_owner(user, memberships: list[Membership]) -> bool:
    return any(m.user_id == user.pk and m.role == OWNER for m in memberships)


@login_required
@require_http_methods(["GET", "POST"])
def team_detail(request: HttpRequest) -> HttpResponse:
    if request.method == "POST" and request.POST.get("op") in ("invite_accept", "invite_decline"):
        return _answer(request, request.POST["op"])
    team = _team_from_query(request)
    if team is None:  # a user in no team at all
        return _page(request, None, [], None)
    memberships = _members(team)
    if request.method == "GET":
        return _page(request, team, memberships, InviteMemberForm())

    op = request.POST.get("op", "")
    if not _is_owner(request.user, memberships):
        what = "dead-letter sinks" if op.startswith("sink_") else "members"
        messages.error(request, f"Only an owner of {team.name} may change its {what}.")
        return _page(request, team, memberships, InviteMemberForm(), status=403)
    if op == "sink_add":
        return _add_sink(request, team, memberships)
    if op in ("sink_deactivate", "sink_activate", "sink_delete"):
        return _change_sink(request, team, op)
    if op == "invite":
        form = InviteMemberForm(request.POST)
        if not form.is_valid():
            return _page(request, team, memberships, form, status=400)
        return _invite(request, team, memberships, form)
    if op == "invite_revoke":
        return _revoke_invitation(request, team)
    if op == "remove":
        return _remove(request, team, memberships)
    messages.error(request, "Unknown action.")
    return redirect(_team_url(team))


def _invite(request, team: Team, memberships: list[Membership], form: InviteMemberForm):
    username, role = form.cleaned_data["username"], form.cleaned_data["role"]
    # A current member is on this page already, so saying so tells the owner nothing new;
    # inviting one as owner promotes them, as adding did.
    member = next(
        (m for m in memberships if m.user.get_username().lower() == username.lower()), None
    )
    if member is not None:
        name = member.user.get_username()
        if member.role == role or member.role == OWNER:
            what = "an owner" if member.role == OWNER else "a member"
            messages.info(request, f"{name} is already {what}.")
        else:
            teams.add_member(team, member.user, role=role, by=request.user)
            messages.success(request, f"{name} is now an owner of {team.name}.")
        return redirect(_team_url(team))
    # Anyone else: the same invitation and the same words, whether or not the name exists.
    teams.invite(team, username, role=role, by=request.user)
    messages.success(
        request,
        f"Invited {username} as {role}. If {username} has an account, they will see the "
        "invitation on their Team page.",
    )
    return redirect(_team_url(team))


def _revoke_invitation(request, team: Team) -> HttpResponse:
    try:
        invitation = teams.revoke_invitation(
            team, request.POST.get("invitation", ""), by=request.user
        )
    except NotFound:
        raise Http404 from None  # another team's invitation is the same 404 as an unknown one
    messages.success(request, f"Withdrew the invitation of {invitation.username}.")
    return redirect(_team_url(team))


def _answer(request, op: str) -> HttpResponse:
    """The signed-in user accepts or declines an invitation to their name."""
    invitation_id = request.POST.get("invitation", "")
    try:
        if op == "invite_accept":
            membership = teams.accept_invitation(request.user, invitation_id)
            team = membership.team
            messages.success(request, f"You joined {team.name} as {membership.role}.")
            default = _team_url(team)
        else:
            invitation = teams.decline_invitation(request.user, invitation_id)
            messages.info(request, f"You declined the invitation to {invitation.team.name}.")
            default = reverse("team-detail")
    except NotFound:
        raise Http404 from None
    return redirect(local(request, request.POST.get("next", "")) or default)


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


def _add_sink(request, team: Team, memberships: list[Membership]) -> HttpResponse:
    form = SinkForm(request.POST)
    if not form.is_valid():
        return _page(request, team, memberships, InviteMemberForm(), sink_form=form, status=400)
    try:
        sink, secret = teams.add_sink(team, form.cleaned_data["url"], by=request.user)
    except Invalid as exc:  # the guard again, in the queue function
        form.add_error("url", exc.message)
        return _page(request, team, memberships, InviteMemberForm(), sink_form=form, status=400)
    context = {"sink": sink, "team": team, "secret": secret, "back_url": _team_url(team)}
    return shown_once(request, "board/webhook_secret.html", context)


def _host(sink: DeadLetterSink) -> str:
    # Messages name the host only: they are kept in the session, and a webhook URL often
    # carries a secret of the receiver's in its path or query.
    return urlsplit(sink.url).hostname or "?"


def _change_sink(request, team: Team, op: str) -> HttpResponse:
    # Only this team's sinks: another team's sink id is the same 404 as an unknown one.
    sink_id = request.POST.get("sink", "")
    sink = selectors.team_sink(team, pk) if (pk := id_from_text(sink_id)) is not None else None
    if sink is None:
        raise Http404
    if op == "sink_delete":
        teams.remove_sink(sink, by=request.user)
        messages.success(request, f"Sink to {_host(sink)} deleted; its unsent dead letters drop.")
    elif teams.set_sink_active(sink, op == "sink_activate", by=request.user):
        if sink.active:
            messages.success(request, f"Sink to {_host(sink)} is active again.")
        else:
            messages.success(
                request, f"Sink to {_host(sink)} deactivated; its unsent dead letters drop."
            )
    return redirect(_team_url(team))


@login_required
@require_POST
def team_switch(request: HttpRequest) -> HttpResponse:
    """Pick the team the Board shows (empty: all of the user's teams)."""
    slug = request.POST.get("team", "")
    picked = next((t for t in board_scope(request).teams if slug and t.slug == slug), None)
    if picked is not None:
        request.session[board_scopes.SESSION_KEY] = slug
        # The session's open streams that show another team end (board/live.py).
        live.narrow(request.session.session_key, [picked.pk])
        if request.POST.get("say"):  # a button that switches as a side effect says so
            messages.info(
                request,
                f"Now showing {picked.name}. The other teams' work is one pick away in the "
                "team menu (All teams).",
            )
    else:
        request.session.pop(board_scopes.SESSION_KEY, None)
        if slug:  # the same words for an unknown and a foreign slug
            messages.error(request, "That is not one of your teams; showing all teams.")
    # A path of this site only ("/…", never "//host"): a bare word would be read as a view
    # name by redirect(), and NUL or other oddities as anything at all.
    target = request.POST.get("next", "")
    if not (target.startswith("/") and "\x00" not in target and local(request, target)):
        target = reverse("board-home")
    return HttpResponseRedirect(target)
