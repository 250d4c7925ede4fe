"""An endpoint's schedules on its page (issue 44): the list (each one's timing, its next slots
in the reader's time, its last run and the todo it made) and the changes a person of its team
makes from there: add, edit, pause, resume, remove, each through queues.schedules (which checks
the fields, the team and audits the change). ``POST /endpoints/<id>/schedules/`` with ``op``;
a refused change is the endpoint page again (400) with the form as typed and the reason; an
unknown schedule and another team's answer the same 404."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from switchboard.board.schedules import ScheduleForm
from switchboard.board.views.endpoints import _visible_endpoint, detail_page
from switchboard.queues import schedules
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.models import Endpoint

SAID = {
    "add": "Schedule added.",
    "edit": "Schedule saved.",
    "pause": "Schedule paused: it makes no todos until resumed.",
    "resume": "Schedule resumed: it runs from its next due time.",
    "remove": "Schedule removed; the todos it made stay.",
}


@login_required
@require_POST
def endpoint_schedules(request: HttpRequest, endpoint_id: int) -> HttpResponse:
    endpoint = _visible_endpoint(request, endpoint_id)
    op = request.POST.get("op", "")
    if op not in SAID:
        raise Http404()
    form = None
    try:
        match op:
            case "add" | "edit":
                form = ScheduleForm(request.POST)
                if not form.is_valid():
                    return detail_page(
                        request,
                        endpoint,
                        status=400,
                        schedule_form=form,
                        editing=request.POST.get("schedule"),
                    )
                if op == "add":
                    schedules.add(endpoint, by=request.user, **form.fields_for_ledger())
                else:
                    _mine(request, endpoint)
                    schedules.edit(
                        request.POST.get("schedule"), by=request.user, **form.fields_for_ledger()
                    )
            case "pause":
                changed = schedules.pause(_mine(request, endpoint), by=request.user)
                if not changed:
                    messages.info(request, "It was already paused; nothing changed.")
                    return redirect("endpoint-detail", endpoint_id=endpoint.pk)
            case "resume":
                changed = schedules.resume(_mine(request, endpoint), by=request.user)
                if not changed:
                    messages.info(request, "It was not paused; nothing changed.")
                    return redirect("endpoint-detail", endpoint_id=endpoint.pk)
            case "remove":
                schedules.remove(_mine(request, endpoint), by=request.user)
    except NotFound:
        raise Http404() from None
    except (Invalid, Conflict) as exc:
        if form is None:
            messages.error(request, str(exc))
            return redirect("endpoint-detail", endpoint_id=endpoint.pk)
        form.add_error(None, str(exc))
        return detail_page(
            request, endpoint, status=400, schedule_form=form, editing=request.POST.get("schedule")
        )
    messages.success(request, SAID[op])
    return redirect("endpoint-detail", endpoint_id=endpoint.pk)


def _mine(request: HttpRequest, endpoint: Endpoint) -> int:
    """The posted schedule's id, if it is one of this endpoint's that the person may see
    (else the one 404, unknown and another team's alike)."""
    schedule = schedules.get(request.POST.get("schedule"), by=request.user)
    if schedule.endpoint_id != endpoint.pk:
        raise NotFound("No such schedule.")
    return schedule.pk
