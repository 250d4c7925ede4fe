"""Endpoints: an agent's credential and its queue, with the frozen verb set it was vended."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from switchboard.queues.models.fields import reference
from switchboard.queues.models.teams import Team
from switchboard.queues.verbs import VERBS


class EndpointQuerySet(models.QuerySet):
    def active(self) -> EndpointQuerySet:
        return self.filter(revoked_at__isnull=True)


class Endpoint(models.Model):
    """An agent's credential and its queue. The token is stored only as its SHA-256."""

    # Teams and endpoints are never deleted (revoke instead); the FK alone forbids it.
    team = models.ForeignKey(Team, on_delete=models.DO_NOTHING, related_name="endpoints")
    agent_id = models.SlugField(max_length=64)
    name = models.CharField(max_length=200, blank=True)
    token_hash = models.CharField(max_length=64, unique=True)
    verbs = ArrayField(models.CharField(max_length=32))
    notify_url = models.URLField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The secret that signs this endpoint's doorbell webhooks (HMAC-SHA256); made when a notify
    # URL is set. Needed in clear to sign, so never shown in admin or logs.
    notify_secret = models.CharField(max_length=128, blank=True)
    # Admission (SWITCHBOARD_CLAIMS_PER_MINUTE): the current minute's window and the claims
    # committed in it. Written only when a limit is set.
    admission_window_at = models.DateTimeField(null=True, blank=True)
    admission_claims = models.IntegerField(default=0)
    # Paused by an owner (the Board) or an operator (admin): claim and claim_next hand out
    # nothing while set; every other verb works (queues/endpoints.py ``pause``). Read with the
    # token on every request, so a pause costs the claim path no query of its own.
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = reference(settings.AUTH_USER_MODEL, index=False)  # a small table
    # Limits on what may be claimed at once: todos of one key (a todo's ``key``), and all of
    # the endpoint's. None: no limit. Counted by the claim: the trigger todos_waits_follow (a
    # key's claimed todos, todos_key_claimed) and, for max_claimed, sql.CLAIMED_OF_ENDPOINT.
    max_claimed_per_key = models.IntegerField(null=True, blank=True)
    max_claimed = models.IntegerField(null=True, blank=True)
    # When a long-poll of this endpoint last began waiting (sql.MARK_WAITING; each process marks
    # at most every bounds.WAITED_REFRESH_SECONDS): a freed key rings the doorbell only while
    # one may be waiting (the trigger todos_waits_follow).
    waited_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = EndpointQuerySet.as_manager()

    class Meta:
        db_table = "endpoints"
        constraints = [
            models.UniqueConstraint(fields=["team", "agent_id"], name="endpoints_agent_id_unique"),
            models.CheckConstraint(
                condition=Q(verbs__contained_by=list(VERBS)), name="endpoints_verbs_known"
            ),
        ]

    def __str__(self) -> str:
        return self.agent_id

    @property
    def owner_label(self) -> str:
        return f"agent:{self.agent_id}"

    @property
    def paused(self) -> bool:
        return self.paused_at is not None
