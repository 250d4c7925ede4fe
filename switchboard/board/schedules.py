"""An endpoint's schedules as its Board page shows them (issue 44): the form a person adds or
edits one with, and the list (board/views/schedules.py changes them)."""

from __future__ import annotations

from django import forms

from switchboard.queues import schedules
from switchboard.queues.models import CatchUp, Endpoint, Schedule

UPCOMING = 3  # next slots shown for each


class ScheduleForm(forms.Form):
    name = forms.CharField(label="Name", max_length=schedules.NAME_MAX_CHARS)
    cron = forms.CharField(
        label="Cron",
        required=False,
        max_length=100,
        help_text="Five fields: minute hour day-of-month month day-of-week (0 9 * * 1-5: "
        "weekdays at 09:00). Or leave it empty and say every how many minutes.",
    )
    every_minutes = forms.IntegerField(
        label="Or every (minutes)", required=False, min_value=1, max_value=366 * 24 * 60
    )
    timezone = forms.CharField(
        label="Time zone", max_length=64, initial="UTC", help_text="IANA, as Europe/Berlin."
    )
    title_template = forms.CharField(
        label="Title",
        max_length=500,
        help_text="{date}, {scheduled_for} and {name} are replaced for each run.",
    )
    body_template = forms.CharField(
        label="Body", required=False, widget=forms.Textarea(attrs={"rows": 3})
    )
    priority = forms.IntegerField(label="Priority", initial=0, min_value=-100, max_value=100)
    max_attempts = forms.IntegerField(
        label="Max attempts", required=False, min_value=1, max_value=1000
    )
    catch_up = forms.ChoiceField(
        label="Missed runs",
        choices=[(CatchUp.NONE, "skip them"), (CatchUp.LATEST, "make the latest one")],
        initial=CatchUp.NONE,
    )

    def fields_for_ledger(self) -> dict:
        data = dict(self.cleaned_data)
        minutes = data.pop("every_minutes")
        data["interval_seconds"] = minutes * 60 if minutes else None
        data["cron"] = (data.get("cron") or "").strip()
        if data["interval_seconds"] is None:
            data.pop("interval_seconds")
        return data

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleForm:
        return cls(
            initial={
                "name": schedule.name,
                "cron": schedule.cron,
                "every_minutes": schedule.interval_seconds // 60
                if schedule.interval_seconds
                else None,
                "timezone": schedule.timezone,
                "title_template": schedule.title_template,
                "body_template": schedule.body_template,
                "priority": schedule.priority,
                "max_attempts": schedule.max_attempts,
                "catch_up": schedule.catch_up,
            }
        )


def listed(user, endpoint: Endpoint) -> list[tuple[Schedule, list]]:
    """The endpoint's schedules the user may see, by name, each with its next slots."""
    found = schedules.visible(user).filter(endpoint=endpoint).order_by("name")
    return [(s, schedules.upcoming(s, UPCOMING)) for s in found]
