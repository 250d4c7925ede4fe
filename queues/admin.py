"""Django admin for operators (staff): counts, states and metadata, never anybody's work.

Tenancy (docs/operators.md): staff see teams, users, endpoints and todos as ids, states,
counters and timestamps; never a todo's title or body, a result, an attempt's summary,
artifact or claimant label, an event's detail, a token or a webhook secret. So every admin
here names its fields, columns, search fields and filters explicitly (nothing falls back to
"all fields"), the ledger is read-only (state changes only through ``queues.transitions``:
the writes are the endpoint revoke action, and pause and resume, which change an endpoint's
metadata only), and attempts, events and the outbox have no pages at all. Aggregates are computed by the database: counts are subqueries or GROUP BYs,
never rows loaded and counted in Python. Staff are not team members by being staff: nothing
here adds a membership, and memberships are shown read-only.

Operators (``queues.operators``: staff in the Operators group) hold the view permissions of
these pages, the revoke action's own permission and queue health's. A query string is
hostile input: a filter takes only the lookups of the page's own filters (a lookup over any
other column, e.g. ``?title__icontains=`` or ``?notify_secret__startswith=``, would be an
oracle for text the page never shows), an id that is not an id is an invalid filter (Django
answers those by showing the unfiltered list with its ``?e=1`` flag), and a search that could
only be slow or could never match (NUL, overlong, too many words) finds nothing.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import ActionLocation, IncorrectLookupParameters
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.html import format_html
from django.utils.text import smart_split

from queues import endpoints, operators, queue_health, transitions
from queues.errors import Conflict
from queues.models import (
    LIVE_STATES,
    DeadLetterSink,
    Endpoint,
    Membership,
    Team,
    Todo,
    TodoState,
)
from queues.transitions import Actor


def _count(queryset, group_by: str) -> Coalesce:
    """A correlated COUNT for each row of the changelist page (so only the page's rows are
    counted, each through an index), 0 when there is none."""
    counted = queryset.order_by().values(group_by).annotate(n=Count("*")).values("n")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def url_host(url: str) -> str:
    """Where a webhook goes, without its path, query or credentials (which may hold a
    secret): the host name, or "unset"."""
    if not url:
        return "unset"
    try:
        return urlsplit(url).hostname or "set"
    except ValueError:
        return "set"


def time_html(value: datetime | None):
    """A time as the Board shows it (board/templatetags/board.py ``when``): a ``<time>``
    with the full date and time in UTC, which static/board/time.js (loaded by
    templates/admin/base_site.html) shows in the browser's time zone with UTC on hover."""
    if value is None:
        return None  # the admin's empty value
    text = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    iso = value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return format_html('<time datetime="{}" data-when="full" title="{}">{}</time>', iso, text, text)


def when(model, field: str):
    """A column or read-only field showing ``field`` of ``model`` through ``time_html``,
    sortable by it, under the field's own name."""

    @admin.display(description=model._meta.get_field(field).verbose_name, ordering=field)
    def show(self, obj):
        return time_html(getattr(obj, field))

    show.__name__ = f"{field}_when"
    return show


# A search is over ids, agent ids, slugs, user names and e-mail addresses: a few short words.
SEARCH_MAX_CHARS = 256
SEARCH_MAX_WORDS = 8

_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only ("²".isdigit()), within a bigint


def parse_id(value: str) -> int:
    """A filter's id from the query string; anything else is an invalid filter."""
    if not _ID.fullmatch(value):
        raise IncorrectLookupParameters(f"not an id: {value[:20]!r}")
    return int(value)


class HostileQueryStringMixin(admin.ModelAdmin):
    """Filters only through the page's own filters; searches that can neither be slow nor
    fail in the database (PostgreSQL refuses a NUL in text)."""

    def lookup_allowed(self, lookup: str, value, request: HttpRequest) -> bool:
        if isinstance(value, str) and "\x00" in value:
            return False
        if lookup not in self._filter_lookups(request):
            return False
        return super().lookup_allowed(lookup, value, request)

    def _filter_lookups(self, request: HttpRequest) -> set[str]:
        """The query-string keys the page's own filters read: a SimpleListFilter's
        parameter, a field filter's ``<field>``, ``__exact``, ``__isnull`` and, for a
        relation, ``__id__exact``."""
        lookups: set[str] = set()
        for item in self.get_list_filter(request):
            if isinstance(item, type) and issubclass(item, admin.SimpleListFilter):
                if item.parameter_name:
                    lookups.add(item.parameter_name)
                continue
            field = str(item[0] if isinstance(item, list | tuple) else item)
            lookups.update({field, f"{field}__exact", f"{field}__isnull", f"{field}__id__exact"})
        return lookups

    def get_search_results(self, request: HttpRequest, queryset, search_term: str):
        if "\x00" in search_term:  # no stored id, slug or name holds one
            return queryset.none(), False
        if len(search_term) > SEARCH_MAX_CHARS or len(list(smart_split(search_term))) > (
            SEARCH_MAX_WORDS
        ):
            # Each word is one more condition over every search field: thousands of words
            # made a todo search take minutes.
            match = request.resolver_match
            if match and match.url_name and match.url_name.endswith("_changelist"):
                self.message_user(
                    request,
                    f"Search for at most {SEARCH_MAX_WORDS} words of "
                    f"{SEARCH_MAX_CHARS} characters in all.",
                    messages.WARNING,
                )
            return queryset.none(), False
        return super().get_search_results(request, queryset, search_term)


class ReadOnlyAdmin(HostileQueryStringMixin, admin.ModelAdmin):
    """Viewing only: nothing of the ledger is added, changed or deleted through admin."""

    show_full_result_count = False  # one COUNT per changelist page, not two

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return self.fields or ()


# ---------------------------------------------------------------------------------------
# Teams and memberships


class MembershipInline(admin.TabularInline):
    model = Membership
    fields = ("user", "role", "created_at_when")
    readonly_fields = fields
    created_at_when = when(Membership, "created_at")
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

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
                member_count=_count(Membership.objects.filter(team=OuterRef("pk")), "team"),
                endpoint_count=_count(Endpoint.objects.filter(team=OuterRef("pk")), "team"),
            )
        )

    @admin.display(description="members", ordering="member_count")
    def member_total(self, team: Team) -> int:
        return team.member_count  # type: ignore[attr-defined]  # annotated

    @admin.display(description="endpoints", ordering="endpoint_count")
    def endpoint_total(self, team: Team) -> int:
        return team.endpoint_count  # type: ignore[attr-defined]  # annotated


# ---------------------------------------------------------------------------------------
# Endpoints


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
    created_at_when = when(Endpoint, "created_at")
    rotated_at_when = when(Endpoint, "rotated_at")
    paused_at_when = when(Endpoint, "paused_at")
    revoked_at_when = when(Endpoint, "revoked_at")
    admission_window_at_when = when(Endpoint, "admission_window_at")

    def get_queryset(self, request: HttpRequest):
        return (
            super()
            .get_queryset(request)
            .annotate(
                # Through the claimable index (live states) and (endpoint, state, id).
                live_count=_count(
                    Todo.objects.filter(endpoint=OuterRef("pk"), state__in=LIVE_STATES),
                    "endpoint",
                ),
                dead_count=_count(
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

    @admin.action(
        description="Revoke the selected endpoints (their live todos become dead letters)",
        permissions=["revoke"],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
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

    @admin.action(
        description="Pause the selected endpoints (their agents claim nothing until resumed)",
        permissions=["pause"],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
    def pause_endpoints(self, request: HttpRequest, queryset):
        """Pause each active endpoint through queues.endpoints.pause (audited as the
        operator). Metadata only: no todo is read or changed; leases held are kept."""
        self._pause_or_resume(request, queryset, endpoints.pause, "Paused", "paused")

    @admin.action(
        description="Resume the selected endpoints",
        permissions=["pause"],
        location=[ActionLocation.CHANGE_LIST, ActionLocation.CHANGE_FORM],
    )
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


# What a todo's list row and its page both start with: where it is, its state and counters.
_TODO_HEAD = (
    "id",
    "endpoint",
    "team",
    "state",
    "priority",
    "attempt",
    "failures",
    "max_attempts",
    "round",
)


@admin.register(Todo)
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
    created_at_when = when(Todo, "created_at")
    updated_at_when = when(Todo, "updated_at")
    not_before_when = when(Todo, "not_before")
    next_retry_at_when = when(Todo, "next_retry_at")
    claimed_at_when = when(Todo, "claimed_at")
    last_heartbeat_at_when = when(Todo, "last_heartbeat_at")
    lease_expires_at_when = when(Todo, "lease_expires_at")
    ended_at_when = when(Todo, "ended_at")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).select_related("endpoint__team")

    @admin.display(description="team", ordering="endpoint__team__slug")
    def team(self, todo: Todo) -> str:
        return todo.endpoint.team.slug

    @admin.display(description="attempts kept")
    def attempts_kept(self, todo: Todo) -> int:
        return todo.attempts_total


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
            "sweeper": sweeper,
            "sweeper_lag": _age(sweeper["lag"]) if sweeper else "—",
            "sweeper_report": sorted((sweeper or {}).get("last_report", {}).items()),
        },
    )
