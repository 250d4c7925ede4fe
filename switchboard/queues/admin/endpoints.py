"""Endpoints: metadata, live todo counts, pause and resume, and the revoke action (never a
token or a notify secret)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import ActionLocation
from django.db.models import OuterRef
from django.http import HttpRequest
from django.template.response import TemplateResponse

from switchboard.queues import endpoints, operators, transitions
from switchboard.queues.admin.common import (
    ReadOnlyAdmin,
    count_of,
    parse_id,
    shows_times,
    url_host,
)
from switchboard.queues.errors import Conflict
from switchboard.queues.models import (
    LIVE_STATES,
    Endpoint,
    Team,
    Todo,
    TodoState,
)
from switchboard.queues.transitions import Actor

# ---------------------------------------------------------------------------------------
# Endpoints


def _action(description: str, permission: str):
    """An action on the endpoint list and on an endpoint's own page, for those who have the
    permission (``has_<permission>_permission``)."""
    return admin.action(
        description=description,
        permissions=[permission],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )


class EndpointStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request, model_admin):
        return (("active", "active"), ("paused", "paused"), ("revoked", "revoked"))

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "paused":
            return queryset.filter(revoked_at__isnull=True, paused_at__isnull=False)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


class TeamWithEndpointsFilter(admin.SimpleListFilter):
    """Teams that have endpoints (most personal teams have none), from the small endpoints
    table; Django's related-only filter would scan the filtered model's whole table."""

    title = "team"
    parameter_name = "team"
    path = "team"

    def lookups(self, request, model_admin):
        teams = Team.objects.filter(pk__in=Endpoint.objects.values("team_id")).order_by("slug")
        return [(str(team.pk), team.slug) for team in teams]

    def queryset(self, request, queryset):
        if not self.value():
            return queryset
        return queryset.filter(**{f"{self.path}_id": parse_id(self.value())})


@admin.register(Endpoint)
@shows_times(
    Endpoint,
    "created_at",
    "rotated_at",
    "paused_at",
    "revoked_at",
    "admission_window_at",
)
class EndpointAdmin(ReadOnlyAdmin):
    list_display = (
        "agent_id",
        "name",
        "team",
        "verb_list",
        "live_todos",
        "dead_todos",
        "notify",
        "created_at_when",
        "rotated_at_when",
        "paused_at_when",
        "revoked_at_when",
    )
    list_select_related = ("team",)
    list_filter = (EndpointStatusFilter, TeamWithEndpointsFilter)
    search_fields = ("=id", "agent_id", "team__slug")
    ordering = ("team__slug", "agent_id")
    # Never token_hash nor notify_secret; the notify URL only as its host.
    fields = (
        "id",
        "agent_id",
        "name",
        "team",
        "verb_list",
        "notify",
        "created_at_when",
        "rotated_at_when",
        "paused_at_when",
        "paused_by",
        "revoked_at_when",
        "live_todos",
        "dead_todos",
        "admission_window_at_when",
        "admission_claims",
    )
    actions = ("revoke_endpoints", "pause_endpoints", "resume_endpoints")

    def get_queryset(self, request: HttpRequest):
        return (
            super()
            .get_queryset(request)
            .annotate(
                # Through the claimable index (live states) and (endpoint, state, id).
                live_count=count_of(
                    Todo.objects.filter(endpoint=OuterRef("pk"), state__in=LIVE_STATES),
                    "endpoint",
                ),
                dead_count=count_of(
                    Todo.objects.filter(endpoint=OuterRef("pk"), state=TodoState.DEAD),
                    "endpoint",
                ),
            )
        )

    @admin.display(description="verbs")
    def verb_list(self, endpoint: Endpoint) -> str:
        return ", ".join(endpoint.verbs)

    @admin.display(description="live todos", ordering="live_count")
    def live_todos(self, endpoint: Endpoint) -> int:
        return endpoint.live_count  # type: ignore[attr-defined]  # annotated

    @admin.display(description="dead letters", ordering="dead_count")
    def dead_todos(self, endpoint: Endpoint) -> int:
        return endpoint.dead_count  # type: ignore[attr-defined]  # annotated

    @admin.display(description="notify URL host")
    def notify(self, endpoint: Endpoint) -> str:
        return url_host(endpoint.notify_url)

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"queues.{operators.REVOKE_ENDPOINT}")

    @_action("Revoke the selected endpoints (their live todos become dead letters)", "revoke")
    def revoke_endpoints(self, request: HttpRequest, queryset):
        """Confirm first (how many endpoints, how many live todos die), then revoke each
        active endpoint through the one transition that does it."""
        active = queryset.filter(revoked_at__isnull=True).select_related("team").order_by("pk")
        if request.POST.get("confirmed") != "yes":
            return TemplateResponse(
                request,
                "admin/queues/endpoint/revoke_confirmation.html",
                {
                    **self.admin_site.each_context(request),
                    "title": "Revoke endpoints?",
                    "opts": self.opts,
                    "endpoints": active,
                    "live_todos": Todo.objects.filter(
                        endpoint__in=active.values("pk"), state__in=LIVE_STATES
                    ).count(),
                    "already_revoked": queryset.filter(revoked_at__isnull=False).count(),
                    "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                },
            )
        revoked = dead_lettered = 0
        for endpoint in active:
            try:
                killed = transitions.revoke_endpoint(Actor.human(request.user), endpoint)
            except Conflict:  # revoked by someone else since the page was shown
                continue
            revoked += 1
            dead_lettered += killed
            self.log_change(request, endpoint, f"Revoked; {killed} todos dead-lettered.")
        if revoked:
            self.message_user(
                request,
                f"Revoked {revoked} endpoint{'s' if revoked != 1 else ''}; "
                f"{dead_lettered} todo{'s' if dead_lettered != 1 else ''} dead-lettered "
                "with reason revoked.",
                messages.SUCCESS,
            )
        else:
            self.message_user(request, "No active endpoint was selected.", messages.WARNING)
        return None

    def has_pause_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(f"queues.{operators.PAUSE_ENDPOINT}")

    @_action("Pause the selected endpoints (their agents claim nothing until resumed)", "pause")
    def pause_endpoints(self, request: HttpRequest, queryset):
        """Pause each active endpoint through queues.endpoints.pause (audited as the
        operator). Metadata only: no todo is read or changed; leases held are kept."""
        self._pause_or_resume(request, queryset, endpoints.pause, "Paused", "paused")

    @_action("Resume the selected endpoints", "pause")
    def resume_endpoints(self, request: HttpRequest, queryset):
        self._pause_or_resume(request, queryset, endpoints.resume, "Resumed", "not paused")

    def _pause_or_resume(self, request, queryset, change, done: str, already: str) -> None:
        changed = unchanged = 0
        for endpoint in queryset.filter(revoked_at__isnull=True).order_by("pk"):
            if change(endpoint, user=request.user):
                changed += 1
                self.log_change(request, endpoint, f"{done}.")
            else:
                unchanged += 1
        noun = "endpoint" if changed == 1 else "endpoints"
        text = f"{done} {changed} {noun}."
        if unchanged:
            text += f" {unchanged} already {already}: unchanged."
        revoked = queryset.filter(revoked_at__isnull=False).count()
        if revoked:
            text += f" {revoked} revoked: left alone."
        self.message_user(request, text, messages.SUCCESS if changed else messages.WARNING)
