"""Teams, memberships and dead-letter sinks: every user gets a personal team when created."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.db import transaction
from django.utils.text import slugify

from queues import webhooks
from queues.errors import Invalid
from queues.models import DeadLetterSink, Membership, Team, TodoEvent

SINK_URL_MAX_CHARS = 500


def _free_slug(base: str) -> str:
    base = slugify(base)[:56] or "team"
    slug, n = base, 1
    while Team.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def give_new_user_a_personal_team(sender, instance, created: bool, **kwargs) -> None:
    if not created or kwargs.get("raw"):
        return
    with transaction.atomic():
        team = Team.objects.create(
            slug=_free_slug(instance.get_username()),
            name=f"{instance.get_username()}'s team",
            personal=True,
        )
        Membership.objects.create(team=team, user=instance, role=Membership.Role.OWNER)


def get_or_create_team(slug: str, *, name: str | None = None) -> Team:
    team, _ = Team.objects.get_or_create(slug=slugify(slug), defaults={"name": name or slug})
    return team


def add_member(team: Team, user, *, role: str = Membership.Role.MEMBER, by=None) -> Membership:
    """Add ``user`` to ``team`` (or raise them to owner); audited as a team-level event."""
    with transaction.atomic():
        membership, created = Membership.objects.get_or_create(
            team=team, user=user, defaults={"role": role}
        )
        if not created and membership.role != role and role == Membership.Role.OWNER:
            membership.role = role
            membership.save(update_fields=["role"])
        elif not created:
            return membership
        TodoEvent.objects.create(
            team=team,
            actor_user=by,
            kind="member_add",
            detail={"user_id": user.pk, "role": membership.role},
        )
    return membership


def remove_member(team: Team, user, *, by=None) -> bool:
    """Remove ``user`` from ``team``; audited. The last owner cannot leave."""
    from queues.errors import Conflict

    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
        if membership is None:
            return False
        owners = Membership.objects.filter(team=team, role=Membership.Role.OWNER)
        if membership.role == Membership.Role.OWNER and owners.count() == 1:
            raise Conflict("A team keeps at least one owner.")
        membership.delete()
        TodoEvent.objects.create(
            team=team, actor_user=by, kind="member_remove", detail={"user_id": user.pk}
        )
    return True


# ---------------------------------------------------------------------------------------
# Dead-letter sinks: every todo of the team that dead-letters is POSTed to each active sink
# (queues/outbox.py). Audit rows carry the URL's host only: a webhook URL often carries a
# secret in its path or query.


def add_sink(team: Team, url: str, *, by=None) -> tuple[DeadLetterSink, str]:
    """A new sink for ``team``. Returns it and its signing secret, to be shown once. A URL
    the webhook guard refuses (queues/webhooks.py) is Invalid."""
    if len(url) > SINK_URL_MAX_CHARS:
        raise Invalid(f"A sink URL has at most {SINK_URL_MAX_CHARS} characters.")
    if problem := webhooks.url_problem(url):
        raise Invalid(problem)
    secret = webhooks.new_secret()
    with transaction.atomic():
        sink = DeadLetterSink.objects.create(team=team, url=url, secret=secret, created_by=by)
        _sink_event(sink, "sink_add", by)
    return sink, secret


def set_sink_active(sink: DeadLetterSink, active: bool, *, by=None) -> bool:
    """Turn a sink off (its deliveries not yet sent are given up, new dead letters skip it)
    or on again. Returns whether anything changed; audited when it did."""
    with transaction.atomic():
        changed = DeadLetterSink.objects.filter(pk=sink.pk, active=not active).update(active=active)
        if changed:
            sink.active = active
            _sink_event(sink, "sink_activate" if active else "sink_deactivate", by)
    return bool(changed)


def remove_sink(sink: DeadLetterSink, *, by=None) -> None:
    """Delete a sink. Its deliveries stay in the outbox as a record; those not yet sent are
    given up by the sender. Audited."""
    with transaction.atomic():
        _sink_event(sink, "sink_remove", by)
        sink.delete()


def _sink_event(sink: DeadLetterSink, kind: str, by) -> None:
    TodoEvent.objects.create(
        team_id=sink.team_id,
        actor_user=by,
        kind=kind,
        detail={"sink_id": sink.pk, "host": urlsplit(sink.url).hostname or ""},
    )
