"""Teams and memberships: every user gets a personal team when created."""

from __future__ import annotations

from django.db import transaction
from django.utils.text import slugify

from queues.models import Membership, Team


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


def add_member(team: Team, user, *, role: str = Membership.Role.MEMBER) -> Membership:
    membership, created = Membership.objects.get_or_create(
        team=team, user=user, defaults={"role": role}
    )
    if not created and membership.role != role and role == Membership.Role.OWNER:
        membership.role = role
        membership.save(update_fields=["role"])
    return membership
