"""What every admin page here shares: counts as subqueries, times as ``<time>``, hosts of
URLs, and the guard against hostile query strings (``HostileQueryStringMixin``,
``ReadOnlyAdmin``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from urllib.parse import urlsplit

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.db.models import Count, IntegerField, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.text import smart_split


def count_of(queryset, group_by: str) -> Coalesce:
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


def shows_times(model, *fields: str):
    """A model admin's class decorator: ``<field>_when`` (``when``) for each of ``fields``,
    for its list_display and readonly_fields to name."""

    def decorate(cls):
        for field in fields:
            setattr(cls, f"{field}_when", when(model, field))
        return cls

    return decorate


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


class ViewOnly:
    """Viewing only: nothing of the ledger is added, changed or deleted through admin (a
    page or an inline)."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class ReadOnlyAdmin(ViewOnly, HostileQueryStringMixin, admin.ModelAdmin):
    """A page of the ledger, viewing only, guarded against hostile query strings."""

    show_full_result_count = False  # one COUNT per changelist page, not two

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return self.fields or ()
