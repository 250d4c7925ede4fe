"""The one kind of field the schema repeats: a reference to who did something (a person or
an endpoint) that outlives them."""

from __future__ import annotations

from django.db import models


def reference(to, *, index: bool = True, related_name: str | None = "+") -> models.ForeignKey:
    """An optional reference, set to NULL when its row goes (people may be deleted; endpoints
    are revoked, never deleted), with no reverse accessor by default. ``index=False`` where
    the rare lookups have a partial index of their own, or the table is small."""
    return models.ForeignKey(
        to,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name=related_name,
        db_index=index,
    )
