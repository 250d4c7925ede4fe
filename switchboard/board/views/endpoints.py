"""Endpoints page: list, vend, rotate, revoke, pause and resume, notify URL and its signing
secret, and each endpoint's health at a glance (queues/endpoint_health.py).

Who may do what: any member of a team may vend an endpoint in it; rotating, revoking,
pausing, resuming and changing the notify URL (which cut off or hold back a running agent,
or send data outward) need an owner of the endpoint's team. Checked here, on every POST, not
only by hiding buttons.

A token, and a notify URL's signing secret, is shown once: rendered straight into the POST
response that made it (never stored in the session, a message, a log or a redirect URL) with
caching off.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from switchboard.board import charts
from switchboard.board.drawer import span
from switchboard.board.forms import LimitsForm, NotifyUrlForm, VendForm, duplicate_agent_id
from switchboard.board.redirects import next_url
from switchboard.board.schedules import ScheduleForm, listed
from switchboard.board.scope import board_scope
from switchboard.board.views.queue import first_run_context
from switchboard.queues import endpoints, outbox, selectors, transitions
from switchboard.queues.arguments import id_from_text
from switchboard.queues.endpoint_health import endpoint_health, endpoint_stall
from switchboard.queues.errors import Conflict, Invalid
from switchboard.queues.models import (
    LIVE_STATES,
    VERBS,
    Endpoint,
    TodoState,
)
from switchboard.queues.transitions import Actor

OWNERS_ONLY = "Only an owner of {team} may {action} its endpoints."


def _visible_endpoint(request: HttpRequest, endpoint_id: int) -> Endpoint:
    """The endpoint if it belongs to one of the user's teams; an unknown and a foreign id
    are the same 404 (no existence oracle)."""
    team_ids = [team.pk for team in board_scope(request).teams]
    endpoint = selectors.board_endpoint(team_ids, endpoint_id)
    if endpoint is None:
        raise Http404
    return endpoint


def _owns_team(user, team_id: int) -> bool:
    return selectors.is_team_owner(user, team_id)


def _refuse(request: HttpRequest, endpoint: Endpoint, action: str) -> HttpResponse:
    messages.error(request, OWNERS_ONLY.format(team=endpoint.team.name, action=action))
    return redirect("endpoint-detail", endpoint_id=endpoint.pk)


def base_url(request: HttpRequest) -> str:
    """This server's address as the browser reached it (for the snippets)."""
    return request.build_absolute_uri("/").rstrip("/")


def shown_once(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    """A page that shows a credential once (a token, a signing secret): never cached, so
    there is no back-button or proxy copy of it."""
    response = render(request, template, context)
    add_never_cache_headers(response)
    return response


def _token_page(request: HttpRequest, endpoint: Endpoint, token: str, *, rotated: bool):
    context = {"endpoint": endpoint, "token": token, "rotated": rotated}
    return shown_once(
        request, "board/endpoint_token.html", {**context, "base_url": base_url(request)}
    )


def _list_page(request: HttpRequest, form: VendForm, *, status: int = 200) -> HttpResponse:
    scope = board_scope(request)
    rows = selectors.board_endpoint_list(scope.team_ids)
    context = {"endpoints": rows, "form": form, "scope": scope, "verb_count": len(VERBS)}
    return render(request, "board/endpoint_list.html", context, status=status)


@login_required
@require_GET
def endpoint_list(request: HttpRequest) -> HttpResponse:
    scope = board_scope(request)
    home = scope.home_team
    form = VendForm(teams=scope.teams, initial={"team": home.slug if home else None})
    return _list_page(request, form)


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_new(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return redirect(reverse("endpoint-list") + "#vend")
    form = VendForm(request.POST, teams=board_scope(request).teams)
    first_run = bool(request.htmx) and request.POST.get("first_run") == "1"
    if not form.is_valid():
        return _refused(request, form, first_run=first_run)
    data = form.cleaned_data
    try:
        endpoint, token = endpoints.vend(
            data["team"],
            data["agent_id"],
            name=data["name"],
            verbs=data["verbs"],
            user=request.user,
        )
    except Conflict:  # a concurrent vend of the same agent id won the race
        form.add_error("agent_id", duplicate_agent_id(data["agent_id"], data["team"]))
        return _refused(request, form, first_run=first_run)
    except Invalid as exc:
        form.add_error(None, exc.message)
        return _refused(request, form, first_run=first_run)
    if first_run:
        return _first_run(request, endpoint=endpoint, token=token)
    return _token_page(request, endpoint, token, rotated=False)


def _refused(request: HttpRequest, form: VendForm, *, first_run: bool) -> HttpResponse:
    """The form again with what was wrong (400), where it was sent from: the walkthrough's
    first step, or the endpoints page."""
    if first_run:
        return _first_run(request, form=form, status=400)
    return _list_page(request, form, status=400)


def _first_run(request: HttpRequest, *, form=None, endpoint=None, token=None, status=200):
    """The queue page's walkthrough, in place: step 1 again with the form's errors, or step
    2 with the token (once) and the snippets filled in with it."""
    context = first_run_context(
        board_scope(request),
        step=2 if token else 1,
        vend_form=form,
        endpoint=endpoint,
        token=token,
        base_url=base_url(request),
    )
    response = render(request, "board/_first_run.html", context, status=status)
    add_never_cache_headers(response)
    return response


def _detail_page(
    request,
    endpoint: Endpoint,
    form: NotifyUrlForm,
    *,
    status: int = 200,
    limits: LimitsForm | None = None,
    schedule_form=None,
    editing: str | None = None,
):
    counts = selectors.endpoint_todo_counts(endpoint)
    newest_doorbell = selectors.endpoint_newest_doorbell(endpoint)
    health = endpoint_health(endpoint)
    context = {
        "endpoint": endpoint,
        "form": form,
        "limits": limits
        or LimitsForm(
            initial={
                "max_claimed": endpoint.max_claimed,
                "max_claimed_per_key": endpoint.max_claimed_per_key,
            }
        ),
        "is_owner": _owns_team(request.user, endpoint.team_id),
        # Its schedules (board/views/schedules.py): each with its next slots; the add form,
        # or the one a refused change came back with (``editing``: the schedule it edits).
        "schedules": listed(request.user, endpoint),
        **_schedule_form(request, endpoint, schedule_form, editing),
        "counts": [(state, counts.get(state, 0)) for state in TodoState],
        "live": sum(counts.get(state, 0) for state in LIVE_STATES),
        "last_doorbell": outbox.DeliveryStatus.of(newest_doorbell),
        "health": health,
        "dead": counts.get(TodoState.DEAD, 0),
        "oldest_claimable": _length(health.oldest_claimable_age),
        "took_p50": _length(health.took_p50),
        "took_p95": _length(health.took_p95),
        "charts": [charts.per_minute(health.per_minute), charts.per_hour(health.per_hour)],
        # Agents are alive if one claimed, heartbeat or ended a try within a lease's length.
        "quiet": _quiet(health),
        "stall": endpoint_stall(
            endpoint, waits=health, per_minute=health.per_minute, at=timezone.now()
        ),
    }
    return render(request, "board/endpoint_detail.html", context, status=status)


def _schedule_form(request, endpoint: Endpoint, form, editing) -> dict:
    """The schedule form: a refused one as typed, else the one ``?edit=<id>`` asks for (one of
    this endpoint's schedules: any other id gives the add form), else the add form."""
    if form is None and (wanted := request.GET.get("edit")):
        shown = {s.pk: s for s, _ in listed(request.user, endpoint)}
        schedule = shown.get(id_from_text(wanted))
        if schedule is not None:
            form, editing = ScheduleForm.of(schedule), str(schedule.pk)
    return {"schedule_form": form or ScheduleForm(), "editing": editing or ""}


def detail_page(request, endpoint: Endpoint, *, status: int = 200, **forms) -> HttpResponse:
    """The endpoint page with a refused form of another view (schedules) shown as typed."""
    notify = NotifyUrlForm(initial={"notify_url": endpoint.notify_url})
    return _detail_page(request, endpoint, notify, status=status, **forms)


def _length(value: timedelta | float | None) -> str:
    """A duration as the Board says one ("2m 13s"), finer under ten seconds ("4.2s",
    "350 ms")."""
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f}s" if seconds < 10 else span(seconds)


def _quiet(health) -> bool:
    """No agent of this endpoint was seen (a claim, a heartbeat, an ending) for longer than
    a lease while it has work: are its agents alive?"""
    seen = [t for t in (health.last_claim_at, health.last_heartbeat_at, health.last_ended_at) if t]
    has_work = health.claimable or health.held
    if not has_work:
        return False
    lease = timedelta(seconds=settings.SWITCHBOARD_LEASE_SECONDS)
    return not seen or timezone.now() - max(seen) > lease


def _secret_page(request: HttpRequest, endpoint: Endpoint, secret: str, *, rotated: bool):
    response = render(
        request,
        "board/webhook_secret.html",
        {
            "endpoint": endpoint,
            "secret": secret,
            "rotated": rotated,
            "back_url": reverse("endpoint-detail", args=[endpoint.pk]),
        },
    )
    add_never_cache_headers(response)  # no back-button or proxy copy of the secret
    return response


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_detail(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = _visible_endpoint(request, endpoint_id)
    if request.method == "GET":
        form = NotifyUrlForm(initial={"notify_url": endpoint.notify_url})
        return _detail_page(request, endpoint, form)
    op = request.POST.get("op")
    rotating = op == "rotate_secret"
    if not _owns_team(request.user, endpoint.team_id):
        what = {
            "rotate_secret": "rotate the doorbell secret of",
            "limits": "change the limits of",
        }.get(op, "change the notify URL of")
        return _refuse(request, endpoint, what)
    if op == "limits":
        return _set_limits(request, endpoint)
    if rotating:
        try:
            secret = endpoints.rotate_notify_secret(endpoint, user=request.user)
        except Conflict:
            messages.error(request, "Set a notify URL first: it gets a secret of its own.")
            return redirect("endpoint-detail", endpoint_id=endpoint.pk)
        return _secret_page(request, endpoint, secret, rotated=True)
    form = NotifyUrlForm(request.POST)
    if not form.is_valid():
        return _detail_page(request, endpoint, form, status=400)
    url = form.cleaned_data["notify_url"]
    if url != endpoint.notify_url:
        try:
            secret = endpoints.set_notify_url(endpoint, url, user=request.user)
        except Invalid as exc:  # the webhook guard again, in the queue function
            form.add_error("notify_url", exc.message)
            return _detail_page(request, endpoint, form, status=400)
        if secret:
            return _secret_page(request, endpoint, secret, rotated=False)
        messages.success(request, "Notify URL removed.")
    return redirect("endpoint-detail", endpoint_id=endpoint.pk)


def _set_limits(request: HttpRequest, endpoint: Endpoint) -> HttpResponse:
    limits = LimitsForm(request.POST)
    blank = NotifyUrlForm(initial={"notify_url": endpoint.notify_url})
    if not limits.is_valid():
        return _detail_page(request, endpoint, blank, status=400, limits=limits)
    try:
        changed = endpoints.set_limits(endpoint, **limits.cleaned_data, user=request.user)
    except Conflict as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "Limits saved." if changed else "Nothing changed.")
    return redirect("endpoint-detail", endpoint_id=endpoint.pk)


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_rotate(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = _visible_endpoint(request, endpoint_id)
    if request.method == "GET":
        return render(
            request,
            "board/endpoint_rotate.html",
            {"endpoint": endpoint, "is_owner": _owns_team(request.user, endpoint.team_id)},
        )
    if not _owns_team(request.user, endpoint.team_id):
        return _refuse(request, endpoint, "rotate")
    try:
        token = endpoints.rotate(endpoint, user=request.user)
    except Conflict:
        messages.error(
            request, f"{endpoint.agent_id} is revoked; a revoked endpoint keeps no token."
        )
        return redirect("endpoint-detail", endpoint_id=endpoint.pk)
    return _token_page(request, endpoint, token, rotated=True)


@login_required
@require_http_methods(["GET", "POST"])
def endpoint_revoke(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = _visible_endpoint(request, endpoint_id)
    if request.method == "GET":
        live = selectors.endpoint_live_todos(endpoint)
        context = {
            "endpoint": endpoint,
            "live": live,
            "is_owner": _owns_team(request.user, endpoint.team_id),
        }
        return render(request, "board/endpoint_revoke.html", context)
    if not _owns_team(request.user, endpoint.team_id):
        return _refuse(request, endpoint, "revoke")
    try:
        killed = transitions.revoke_endpoint(Actor.human(request.user), endpoint)
    except Conflict:
        messages.info(request, f"{endpoint.agent_id} was already revoked; nothing changed.")
    else:
        noun = "todo" if killed == 1 else "todos"
        messages.success(request, f"{endpoint.agent_id} revoked; {killed} {noun} dead-lettered.")
    return redirect("endpoint-detail", endpoint_id=endpoint.pk)


PAUSE_ACTIONS = {
    # op → (what the refusal calls it, the change, said after it, said when nothing changed).
    # A pause is said by the page's banner (since when, by whom, what it holds back, and
    # Resume), so no flash repeats it above; a resume leaves no banner, so a flash says it.
    "pause": (
        "pause",
        endpoints.pause,
        None,
        "{agent} was already paused; nothing changed.",
    ),
    "resume": (
        "resume",
        endpoints.resume,
        "{agent} resumed: its agents claim again (waiting long-polls were woken).",
        "{agent} was not paused; nothing changed.",
    ),
}


@login_required
@require_POST
def endpoint_pause(request: HttpRequest, endpoint_id: int, op: str) -> HttpResponse:
    """Pause or resume (owners only). A foreign endpoint answers as an unknown one (404); a
    change already made (by someone else, in another tab) is said, and changes nothing."""
    endpoint = _visible_endpoint(request, endpoint_id)
    if op not in PAUSE_ACTIONS:
        raise Http404
    action, change, done, unchanged = PAUSE_ACTIONS[op]
    if not _owns_team(request.user, endpoint.team_id):
        return _refuse(request, endpoint, action)
    try:
        changed = change(endpoint, user=request.user)
    except Conflict as exc:
        messages.error(request, str(exc))
    else:
        if not changed:
            messages.info(request, unchanged.format(agent=endpoint.agent_id))
        elif done:
            messages.success(request, done.format(agent=endpoint.agent_id))
    # From the overview's row back to the overview; else the endpoint's page.
    return redirect(next_url(request) or reverse("endpoint-detail", args=[endpoint.pk]))
