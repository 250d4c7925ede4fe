"""Todos as ids, states, counters and timestamps (never a title, a body or a result), and
the queue health page."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse

from switchboard.queues import operators, queue_health
from switchboard.queues.admin.common import ReadOnlyAdmin, parse_id, shows_times
from switchboard.queues.admin.endpoints import TeamWithEndpointsFilter
from switchboard.queues.models import (
    STANDING,
    Endpoint,
    Todo,
    TodoState,
)

# ---------------------------------------------------------------------------------------
# Todos: ids, endpoint, state, counters and timestamps only


class TodoTeamFilter(TeamWithEndpointsFilter):
    path = "endpoint__team"


class TodoEndpointFilter(admin.SimpleListFilter):
    title = "endpoint"
    parameter_name = "endpoint"

    def lookups(self, request, model_admin):
        endpoints = Endpoint.objects.select_related("team").order_by("team__slug", "agent_id")
        return [(str(e.pk), f"{e.team.slug}/{e.agent_id}") for e in endpoints]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return queryset.filter(endpoint_id=parse_id(self.value()))


# What a todo's list row and its page both start with: where it is and where it stands.
_TODO_HEAD = ("id", "endpoint", "team", *STANDING)


@admin.register(Todo)
@shows_times(
    Todo,
    "created_at",
    "updated_at",
    "not_before",
    "next_retry_at",
    "claimed_at",
    "last_heartbeat_at",
    "lease_expires_at",
    "ended_at",
)
class TodoAdmin(ReadOnlyAdmin):
    list_display = (
        *_TODO_HEAD,
        "attempts_kept",
        "dead_letter_reason",
        "created_at_when",
        "updated_at_when",
        "ended_at_when",
    )
    list_select_related = ("endpoint__team",)
    list_filter = ("state", "dead_letter_reason", TodoTeamFilter, TodoEndpointFilter)
    # Ids and agent ids only: a search over titles or bodies would be an oracle for them.
    search_fields = ("=id", "=endpoint__agent_id")
    ordering = ("-id",)
    # Never title, body, result, idempotency_key. `owner` is `agent:<agent_id>` or
    # `user:<id>`, written by Switchboard, not by a client: who holds the lease.
    fields = (
        *_TODO_HEAD,
        "last_attempt_seq",
        "attempts_pruned",
        "attempts_kept",
        "owner",
        "requester",
        "created_by",
        "dead_letter_reason",
        "created_at_when",
        "updated_at_when",
        "not_before_when",
        "next_retry_at_when",
        "claimed_at_when",
        "last_heartbeat_at_when",
        "lease_expires_at_when",
        "ended_at_when",
    )

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("endpoint__team")

    @admin.display(description="team", ordering="endpoint__team__slug")
    def team(self, todo: Todo) -> str:
        return todo.endpoint.team.slug

    @admin.display(description="attempts kept")
    def attempts_kept(self, todo: Todo) -> int:
        return todo.attempts_total


# ---------------------------------------------------------------------------------------
# Queue health


def _age(delta: timedelta | None) -> str:
    if delta is None:
        return "—"
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    if seconds < 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    return f"{seconds // 86400} d {seconds % 86400 // 3600:02d} h"


def queue_health_view(request: HttpRequest) -> TemplateResponse:
    """Staff (the site's ``admin_view``, queues/admin_site.py) with
    ``queues.view_queue_health``:
    it names every team's endpoints, so being staff is not enough."""
    if not request.user.has_perm(f"queues.{operators.VIEW_QUEUE_HEALTH}"):
        raise PermissionDenied
    health = queue_health.queue_health()
    sweeper = health.sweeper
    return TemplateResponse(
        request,
        "admin/queue_health.html",
        {
            **admin.site.each_context(request),
            "title": "Queue health",
            "health": health,
            "states": TodoState.values,
            "outcomes": list(health.closed_last_day),
            "closed": [
                (outcome, health.closed_last_hour[outcome], health.closed_last_day[outcome])
                for outcome in health.closed_last_day
            ],
            "oldest_pending_age": _age(health.oldest_pending_age),
            "oldest_question_age": _age(health.questions.oldest_waiting_age),
            "question_rows": [
                (row, _age(row.questions.oldest_waiting_age))
                for row in health.endpoints
                if row.questions.any
            ],
            "sweeper": sweeper,
            "sweeper_lag": _age(sweeper["lag"]) if sweeper else "—",
            "sweeper_report": sorted((sweeper or {}).get("last_report", {}).items()),
        },
    )
