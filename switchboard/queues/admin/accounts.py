"""Teams (memberships read-only), users, and a team's dead-letter sinks (never a secret)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import OuterRef
from django.http import HttpRequest

from switchboard.queues.admin.common import (
    HostileQueryStringMixin,
    ReadOnlyAdmin,
    ViewOnly,
    count_of,
    url_host,
    when,
)
from switchboard.queues.admin.endpoints import TeamWithEndpointsFilter
from switchboard.queues.models import (
    DeadLetterSink,
    Endpoint,
    Membership,
    Team,
)

# ---------------------------------------------------------------------------------------
# Teams and memberships


class MembershipInline(ViewOnly, admin.TabularInline):
    model = Membership
    fields = ("user", "role", "created_at_when")
    readonly_fields = fields
    created_at_when = when(Membership, "created_at")
    extra = 0
    can_delete = False
    show_change_link = False

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("user")


@admin.register(Team)
class TeamAdmin(ReadOnlyAdmin):
    list_display = (
        "slug",
        "name",
        "personal",
        "member_total",
        "endpoint_total",
        "created_at_when",
    )
    list_filter = ("personal",)
    search_fields = ("=id", "slug")
    ordering = ("slug",)
    fields = (
        "id",
        "slug",
        "name",
        "personal",
        "created_at_when",
        "member_total",
        "endpoint_total",
    )
    inlines = (MembershipInline,)
    created_at_when = when(Team, "created_at")

    def get_queryset(self, request: HttpRequest):
        return (
            super()
            .get_queryset(request)
            .annotate(
                member_count=count_of(Membership.objects.filter(team=OuterRef("pk")), "team"),
                endpoint_count=count_of(Endpoint.objects.filter(team=OuterRef("pk")), "team"),
            )
        )

    @admin.display(description="members", ordering="member_count")
    def member_total(self, team: Team) -> int:
        return team.member_count  # type: ignore[attr-defined]  # annotated

    @admin.display(description="endpoints", ordering="endpoint_count")
    def endpoint_total(self, team: Team) -> int:
        return team.endpoint_count  # type: ignore[attr-defined]  # annotated


# ---------------------------------------------------------------------------------------
# Dead-letter sinks: where, not what; never the secret


@admin.register(DeadLetterSink)
class DeadLetterSinkAdmin(ReadOnlyAdmin):
    list_display = ("id", "team", "host", "active", "created_at_when", "created_by")
    list_select_related = ("team", "created_by")
    list_filter = ("active", TeamWithEndpointsFilter)
    search_fields = ("=id", "team__slug")
    ordering = ("-id",)
    fields = ("id", "team", "host", "active", "created_at_when", "created_by")
    created_at_when = when(DeadLetterSink, "created_at")

    @admin.display(description="URL host")
    def host(self, sink: DeadLetterSink) -> str:
        return url_host(sink.url)


# ---------------------------------------------------------------------------------------
# Users: Django's own admin, without deletion


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class SwitchboardUserAdmin(HostileQueryStringMixin, UserAdmin):
    """Deactivate a user rather than delete them: attempts a person claimed must keep who
    claimed them (a check constraint), and the audit trail keeps who acted. Who may only
    view users (operators) sees no password field: not even the hash's outline, nor the
    button to a password page they could not use."""

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_fieldsets(self, request: HttpRequest, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or self.has_change_permission(request, obj):
            return fieldsets
        return [
            (name, {**options, "fields": [f for f in options["fields"] if f != "password"]})
            for name, options in fieldsets
        ]
