"""Teams and memberships: every user gets a personal team when created."""

from __future__ import annotations

from django.db import transaction
from django.utils.text import slugify

from queues.models import Membership, Team, TodoEvent


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
