"""The Board's forms: vend an endpoint, its notify URL, team members and dead-letter sinks,
a new todo.

The forms check shape and range; the queue functions they feed check again (one place for
the rules of the ledger), and their domain errors come back here as form errors.
"""

from __future__ import annotations

import datetime

from django import forms
from django.conf import settings
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.validators import URLValidator
from django.utils import timezone
from django.utils.text import slugify

from switchboard.queues import teams, webhooks
from switchboard.queues.bounds import (
    BODY_MAX_BYTES,
    MAX_ATTEMPTS_MAX,
    PRIORITY_MAX,
    PRIORITY_MIN,
    TITLE_MAX_CHARS,
)
from switchboard.queues.models import VERBS, Endpoint, Membership, Team


class VendForm(forms.Form):
    agent_id = forms.CharField(
        label="Agent id",
        max_length=64,
        help_text="Lowercase letters, digits, hyphens and underscores; unique in the team.",
    )
    name = forms.CharField(
        label="Name", max_length=200, required=False, help_text="Optional; defaults to the id."
    )
    team = forms.ChoiceField(label="Team")
    verbs = forms.MultipleChoiceField(
        label="Verbs",
        choices=[(verb, verb) for verb in VERBS],
        widget=forms.CheckboxSelectMultiple,
        initial=list(VERBS),
        help_text="Frozen at vend time: the agent may call only these.",
        error_messages={"required": "Choose at least one verb."},
    )

    def __init__(self, *args, teams: list[Team], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.teams = {team.slug: team for team in teams}
        self.fields["team"].choices = [(team.slug, team.name) for team in teams]

    def clean_agent_id(self) -> str:
        agent_id = self.cleaned_data["agent_id"].strip()
        if not agent_id or slugify(agent_id) != agent_id:
            raise forms.ValidationError(
                "Use a slug: lowercase letters, digits, hyphens and underscores."
            )
        return agent_id

    def clean_team(self) -> Team:
        return self.teams[self.cleaned_data["team"]]  # ChoiceField already refused others

    def clean(self) -> dict:
        cleaned = super().clean()
        team, agent_id = cleaned.get("team"), cleaned.get("agent_id")
        if team and agent_id and Endpoint.objects.filter(team=team, agent_id=agent_id).exists():
            self.add_error("agent_id", duplicate_agent_id(agent_id, team))
        return cleaned


def duplicate_agent_id(agent_id: str, team: Team) -> str:
    return f"{team.name} already has an endpoint with the agent id “{agent_id}”."


class HttpUrlField(forms.URLField):
    # Django's URLField also lets ftp:// through; a doorbell is an HTTP POST.
    default_validators = [URLValidator(schemes=["http", "https"])]


def webhook_target(url: str) -> str:
    """A webhook URL the guard allows (queues/webhooks.py): no loopback, private or
    link-local target unless SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE is on."""
    if url and (problem := webhooks.url_problem(url)):
        raise forms.ValidationError(problem)
    return url


class NotifyUrlForm(forms.Form):
    notify_url = HttpUrlField(
        label="URL to ring",
        max_length=500,
        required=False,
        assume_scheme="https",
        error_messages={"invalid": "Enter an http:// or https:// URL."},
        help_text="Rung (a signed HTTP POST) when a todo on this queue becomes claimable. "
        "A new URL gets a new signing secret, shown once. Empty turns it off.",
    )

    def clean_notify_url(self) -> str:
        return webhook_target(self.cleaned_data["notify_url"])


class LimitsForm(forms.Form):
    """An endpoint's limits on what its agents hold at once (queues.endpoints.set_limits)."""

    max_claimed = forms.IntegerField(
        label="Claimed at most",
        required=False,
        min_value=1,
        max_value=10_000,
        help_text="Todos its agents may hold at once, in all. Empty: no limit.",
    )
    max_claimed_per_key = forms.IntegerField(
        label="Claimed at most, a key",
        required=False,
        min_value=1,
        max_value=10_000,
        help_text="Todos of one key its agents may hold at once (1: one at a time, say one "
        "agent a repository); a claim passes over a key at its limit. Empty: no limit.",
    )


class SinkForm(forms.Form):
    url = HttpUrlField(
        label="Sink URL",
        max_length=500,
        assume_scheme="https",
        error_messages={"invalid": "Enter an http:// or https:// URL."},
        help_text="Every todo of this team that is dead-lettered is POSTed here, signed.",
    )

    def clean_url(self) -> str:
        return webhook_target(self.cleaned_data["url"])


class InviteMemberForm(forms.Form):
    """A user name to invite, existing or not: the form never looks users up, so its answer
    says nothing about which names exist (queues/teams.py, ``invite``). Only the shape of a
    name is checked, by the rule every account's name follows (``adduser`` checks it too)."""

    username = forms.CharField(
        label="Username", max_length=150, validators=[UnicodeUsernameValidator()]
    )
    role = forms.ChoiceField(
        label="Role", choices=Membership.Role.choices, initial=Membership.Role.MEMBER
    )

    def clean_username(self) -> str:
        return teams.normalize_username(self.cleaned_data["username"])


class UtcDateTimeField(forms.DateTimeField):
    """A date and time with its UTC offset (``2030-01-02T09:30-08:00``: what the browser
    sends when it shows the field in its own time zone, static/board/time.js), or a naive one
    read as UTC (without JavaScript, and the page says so), whatever the server's zone."""

    def to_python(self, value):
        with timezone.override(datetime.UTC):
            return super().to_python(value)

    def prepare_value(self, value):
        # Shown again (a form with an error) as the input takes it, naive in UTC; the
        # browser's script shows it in its own zone.
        original = value
        if isinstance(value, str) and value.strip():
            try:
                value = self.to_python(value)
            except forms.ValidationError:
                return value
        if isinstance(value, datetime.datetime) and timezone.is_aware(value):
            try:
                return value.astimezone(datetime.UTC).replace(tzinfo=None)
            except OverflowError:  # before year 1 or after 9999 in UTC: refused, shown as typed
                return original
        return value


class TodoForm(forms.Form):
    # No endpoint is picked for the person (the alphabetically first one was: a demo agent
    # claimed the new todo within a second): the one asked for or used last, else a choice.
    endpoint = forms.ModelChoiceField(
        label="Endpoint",
        queryset=Endpoint.objects.none(),
        empty_label="Choose the endpoint whose agents should do it…",
        help_text="The queue the todo goes on (active endpoints of your teams).",
    )
    title = forms.CharField(label="Title", max_length=TITLE_MAX_CHARS)
    body = forms.CharField(
        label="Body",
        required=False,
        # The browser counts the bytes as they are typed (static/board/board.js) and will not
        # send more: a body past the request limit would otherwise be refused before this
        # form could keep what was typed.
        widget=forms.Textarea(
            attrs={"rows": 6, "data-max-bytes": BODY_MAX_BYTES, "data-bytes-out": "body-bytes"}
        ),
        help_text=f"Optional. What the agent needs to know: at most {BODY_MAX_BYTES // 1024} KiB.",
    )
    priority = forms.IntegerField(
        label="Priority",
        min_value=PRIORITY_MIN,
        max_value=PRIORITY_MAX,
        initial=0,
        help_text=f"{PRIORITY_MIN} to {PRIORITY_MAX}; higher is claimed first.",
    )
    max_attempts = forms.IntegerField(
        label="Max attempts",
        min_value=1,
        max_value=MAX_ATTEMPTS_MAX,
        help_text=f"Failed or died attempts before the todo is dead-lettered (1 to {MAX_ATTEMPTS_MAX}).",
    )
    not_before = UtcDateTimeField(
        label="Not before (UTC)",
        required=False,
        # data-local-datetime: static/board/time.js shows it in the browser's zone and sends
        # the value with its offset; without script it stays UTC, as the label says.
        widget=forms.DateTimeInput(
            attrs={"type": "datetime-local", "data-local-datetime": ""}, format="%Y-%m-%dT%H:%M"
        ),
        help_text="Optional. Read as UTC: nobody claims it before then.",
    )

    def __init__(self, *args, team_ids: list[int], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].queryset = (
            Endpoint.objects.active()
            .filter(team_id__in=team_ids)
            .select_related("team")
            .order_by("team__name", "agent_id")
        )
        self.fields["endpoint"].label_from_instance = lambda ep: f"{ep.agent_id} · {ep.team.name}"
        self.fields["max_attempts"].initial = settings.SWITCHBOARD_MAX_ATTEMPTS

    def clean_body(self) -> str:
        body = self.cleaned_data["body"]
        size = len(body.encode("utf-8", "surrogatepass"))
        if size > BODY_MAX_BYTES:
            raise forms.ValidationError(
                f"The body is {size // 1024} KiB; a todo's body holds at most "
                f"{BODY_MAX_BYTES // 1024} KiB. Shorten it (your text is kept below), or put "
                "the rest where the agent can fetch it and link to it."
            )
        return body
