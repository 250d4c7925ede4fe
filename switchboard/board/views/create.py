"""New todo form: puts a todo on one of the user's endpoints (any member may)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from switchboard.board.forms import TodoForm
from switchboard.board.scope import board_scope
from switchboard.queues import transitions
from switchboard.queues.arguments import id_from_text
from switchboard.queues.errors import Conflict, Invalid, NotFound, Unauthorized
from switchboard.queues.transitions import Actor

LAST_ENDPOINT_KEY = "board_last_endpoint"  # the endpoint the person last put a todo on


@login_required
@require_http_methods(["GET", "POST"])
def todo_new(request: HttpRequest) -> HttpResponse:
    team_ids = board_scope(request).team_ids
    if request.method == "GET":
        form = TodoForm(team_ids=team_ids, initial=_preselect(request))
        return _page(request, form)
    first_run = bool(request.htmx) and request.POST.get("first_run") == "1"
    form = TodoForm(request.POST, team_ids=team_ids)
    if not form.is_valid():
        return _refused(request, form, first_run=first_run)
    data = form.cleaned_data
    try:
        todo, _ = transitions.create_todo(
            Actor.human(request.user),
            endpoint=data["endpoint"],
            title=data["title"],
            body=data["body"],
            priority=data["priority"],
            max_attempts=data["max_attempts"],
            not_before=data["not_before"],
        )
    except (Invalid, Unauthorized, Conflict) as exc:  # e.g. revoked since the form loaded
        form.add_error(None, exc.message)
        return _refused(request, form, first_run=first_run)
    request.session[LAST_ENDPOINT_KEY] = data["endpoint"].pk
    if first_run:
        response = _first_todo(request, todo=todo, endpoint=data["endpoint"])
        # The person made it: the live queue shows it at once, not behind the "new" bar.
        response["HX-Trigger"] = json.dumps({"queue-changed": {"show": True}})
        return response
    made = f"Todo #{todo.id} created on {data['endpoint'].agent_id}"
    if request.POST.get("claim") == "1":
        # Two steps, so an agent polling that queue may claim it in between: said if so.
        try:
            held = transitions.claim(Actor.human(request.user), todo.id)
        except (Conflict, Invalid, NotFound, Unauthorized):
            held = None
        if held is None:
            messages.warning(request, f"{made}, but an agent claimed it before you could.")
        else:
            messages.success(request, f"{made}; you hold it.")
        return redirect("todo-detail", todo_id=todo.id)
    messages.success(request, f"{made}.")
    return redirect("todo-detail", todo_id=todo.id)


def _refused(request: HttpRequest, form: TodoForm, *, first_run: bool) -> HttpResponse:
    """The form again with what was wrong (400), where it was sent from: the walkthrough's
    first todo, or the New todo page."""
    if first_run:
        return _first_todo(request, form=form, status=400)
    return _page(request, form, status=400)


def _preselect(request: HttpRequest) -> dict:
    """``?endpoint=<id>`` preselects that endpoint, else the one the person last put a todo
    on; the form's choices decide if it may (one it may not is no choice: none is picked)."""
    endpoint_id = id_from_text(request.GET.get("endpoint", ""))
    if endpoint_id is None:
        endpoint_id = request.session.get(LAST_ENDPOINT_KEY)
    return {"endpoint": endpoint_id} if endpoint_id is not None else {}


def _page(request: HttpRequest, form: TodoForm, *, status: int = 200) -> HttpResponse:
    return render(request, "board/todo_new.html", {"form": form}, status=status)


def _first_todo(request: HttpRequest, *, form=None, todo=None, endpoint=None, status=200):
    """The walkthrough's step 3, answered in place: the todo made, or why not."""
    context = {"form": form, "todo": todo, "endpoint": endpoint}
    return render(request, "board/_first_todo.html", context, status=status)
