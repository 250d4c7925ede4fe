"""Pausing an endpoint and taking a todo over (issue 15).

- ``endpoints.paused_at`` and ``paused_by``: while set, claim and claim_next of the endpoint
  hand out nothing (queues/endpoints.py ``pause``); nullable, so adding them rewrites nothing.
- Three audit kinds: ``pause`` and ``resume`` (team-level rows) and ``take_over`` (a person
  took a todo from the agent holding it).
- ``todo_attempts_endpoint_ended``: (endpoint_id, ended_at) over closed attempts, carrying
  outcome, claimed_at and last_heartbeat_at, for the endpoint page's last hour and last day
  (queues/endpoint_health.py): an index-only scan of one endpoint's day. Built CONCURRENTLY
  (so the migration is not atomic): agents keep claiming and closing while it is built.
"""

import django.db.models.deletion
from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("queues", "0015_search"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="paused_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="endpoint",
            name="paused_by",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.DB_SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RemoveConstraint(
            model_name="todoevent",
            name="todo_events_kind_known",
        ),
        migrations.AlterField(
            model_name="todoevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("create", "Create"),
                    ("claim", "Claim"),
                    ("extend", "Extend"),
                    ("release", "Release"),
                    ("complete", "Complete"),
                    ("fail", "Fail"),
                    ("cancel", "Cancel"),
                    ("retry_now", "Retry Now"),
                    ("rerun", "Rerun"),
                    ("take_over", "Take Over"),
                    ("revoke_dead_letter", "Revoke Dead Letter"),
                    ("vend", "Endpoint Vend"),
                    ("rotate", "Endpoint Rotate"),
                    ("endpoint_revoke", "Endpoint Revoke"),
                    ("notify_url", "Notify Url"),
                    ("notify_secret_rotate", "Notify Secret Rotate"),
                    ("pause", "Endpoint Pause"),
                    ("resume", "Endpoint Resume"),
                    ("member_add", "Member Add"),
                    ("member_remove", "Member Remove"),
                    ("member_invite", "Member Invite"),
                    ("invite_accept", "Invite Accept"),
                    ("invite_decline", "Invite Decline"),
                    ("invite_revoke", "Invite Revoke"),
                    ("sink_add", "Sink Add"),
                    ("sink_activate", "Sink Activate"),
                    ("sink_deactivate", "Sink Deactivate"),
                    ("sink_remove", "Sink Remove"),
                ],
                max_length=32,
            ),
        ),
        migrations.AddConstraint(
            model_name="todoevent",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "kind__in",
                        [
                            "create",
                            "claim",
                            "extend",
                            "release",
                            "complete",
                            "fail",
                            "cancel",
                            "retry_now",
                            "rerun",
                            "take_over",
                            "revoke_dead_letter",
                            "vend",
                            "rotate",
                            "endpoint_revoke",
                            "notify_url",
                            "notify_secret_rotate",
                            "pause",
                            "resume",
                            "member_add",
                            "member_remove",
                            "member_invite",
                            "invite_accept",
                            "invite_decline",
                            "invite_revoke",
                            "sink_add",
                            "sink_activate",
                            "sink_deactivate",
                            "sink_remove",
                        ],
                    )
                ),
                name="todo_events_kind_known",
            ),
        ),
        AddIndexConcurrently(
            model_name="todoattempt",
            index=models.Index(
                condition=models.Q(("ended_at__isnull", False)),
                fields=["endpoint", "ended_at"],
                include=("outcome", "claimed_at", "last_heartbeat_at"),
                name="todo_attempts_endpoint_ended",
            ),
        ),
    ]
