"""Teams: owner scopes, their members and invitations (queues/teams.py changes them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from switchboard.queues.models.fields import reference


class Team(models.Model):
    """An owner scope. Every user gets a personal team; members are managed by owners."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    personal = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        db_table = "teams"

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "team_members"
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="team_members_unique"),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "member"]), name="team_members_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.team_id} ({self.role})"


# ---------------------------------------------------------------------------------------
# Team invitations (queues/teams.py): an owner invites a user name; its user accepts.


class TeamInvitationQuerySet(models.QuerySet):
    def pending(self) -> TeamInvitationQuerySet:
        return self.filter(accepted_at__isnull=True, declined_at__isnull=True)


class TeamInvitation(models.Model):
    """An owner's invitation of a user name to a team, as typed; the user whose name matches
    it (in any letter case) accepts or declines it. Made for any name, existing or not, so
    that inviting says nothing about which names exist. A revoked invitation is deleted (its
    audit rows stay)."""

    team = models.ForeignKey(Team, on_delete=models.DB_CASCADE, related_name="invitations")
    username = models.CharField(max_length=150)
    role = models.CharField(max_length=16, choices=Membership.Role, default=Membership.Role.MEMBER)
    invited_by = reference(settings.AUTH_USER_MODEL)
    created_at = models.DateTimeField(db_default=Now())
    accepted_at = models.DateTimeField(null=True, blank=True)
    declined_at = models.DateTimeField(null=True, blank=True)
    # Who answered: several accounts may differ from the typed name by letter case only.
    answered_by = reference(settings.AUTH_USER_MODEL)

    objects = TeamInvitationQuerySet.as_manager()

    class Meta:
        db_table = "team_invitations"
        constraints = [
            # One pending invitation per name and team; also the index behind "the
            # invitations waiting for me" (Upper: Django's iexact compares UPPER(...)).
            models.UniqueConstraint(
                models.functions.Upper("username"),
                models.F("team"),
                condition=Q(accepted_at__isnull=True, declined_at__isnull=True),
                name="team_invitations_one_pending",
            ),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "member"]), name="team_invitations_role_valid"
            ),
            models.CheckConstraint(
                condition=Q(accepted_at__isnull=True) | Q(declined_at__isnull=True),
                name="team_invitations_one_answer",
            ),
        ]

    def __str__(self) -> str:
        return f"invitation #{self.pk} of {self.username!r} to {self.team_id} ({self.role})"

    @property
    def pending(self) -> bool:
        return self.accepted_at is None and self.declined_at is None
