"""Schedules: an endpoint's recurring work. Each makes one todo per due time (a slot), from
its templates, however many sweepers run: the slot is unique on the todo (``todos_schedule
_slot``) and the sweeper takes due schedules ``FOR UPDATE SKIP LOCKED``
(queues/schedules.py)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from switchboard.queues.models.endpoints import Endpoint
from switchboard.queues.models.fields import reference


class CatchUp(models.TextChoices):
    """What a schedule does with the slots it missed while nothing ran."""

    NONE = "none"  # nothing: the next slot to come is the next todo
    LATEST = "latest"  # one todo, for the latest slot missed


class Schedule(models.Model):
    """A 5-field cron expression in an IANA time zone, or an interval; the todo each slot
    makes (title and body templates, priority, max attempts); and when it runs next."""

    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, related_name="schedules", db_index=False
    )
    name = models.CharField(max_length=100)
    cron = models.CharField(max_length=100, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    interval_seconds = models.IntegerField(null=True, blank=True)
    title_template = models.CharField(max_length=500)
    body_template = models.TextField(blank=True)
    priority = models.SmallIntegerField(default=0)
    max_attempts = models.SmallIntegerField(null=True, blank=True)
    catch_up = models.CharField(max_length=8, choices=CatchUp, default=CatchUp.NONE)
    paused_at = models.DateTimeField(null=True, blank=True)
    # The next slot (the database's clock decides when it is due); the last one made.
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_todo = reference("queues.Todo", index=False)
    created_by = reference(settings.AUTH_USER_MODEL, index=False)
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "schedules"
        constraints = [
            models.UniqueConstraint(fields=["endpoint", "name"], name="schedules_name_unique"),
            # A cron expression or an interval, never both.
            models.CheckConstraint(
                condition=(Q(cron="") & Q(interval_seconds__gte=60))
                | (~Q(cron="") & Q(interval_seconds__isnull=True)),
                name="schedules_cron_or_interval",
            ),
        ]
        indexes = [
            # The sweeper: the schedules due, soonest first.
            models.Index("next_run_at", name="schedules_due", condition=Q(paused_at__isnull=True)),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def paused(self) -> bool:
        return self.paused_at is not None
