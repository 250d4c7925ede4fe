"""What operators and integrations need: the outbox and dead-letter sinks, the sweeper's
status, the metrics counters, and the sign-in throttle."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from switchboard.queues.models.endpoints import Endpoint
from switchboard.queues.models.fields import reference
from switchboard.queues.models.teams import Team

# ---------------------------------------------------------------------------------------
# Operators and integrations: the outbox, dead-letter sinks, the sweeper's status, metrics.


class DeadLetterSink(models.Model):
    """A team's webhook for dead letters: every todo of the team that dead-letters is POSTed
    there (from the outbox), HMAC-SHA256 signed with ``secret``."""

    team = models.ForeignKey(Team, on_delete=models.DB_CASCADE, related_name="dead_letter_sinks")
    url = models.URLField(max_length=500)
    # Needed in clear to sign; shown once to the team's owners, never in admin or logs.
    secret = models.CharField(max_length=128)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(db_default=Now())
    created_by = reference(settings.AUTH_USER_MODEL)

    class Meta:
        db_table = "dead_letter_sinks"

    def __str__(self) -> str:
        return f"dead-letter sink #{self.pk}"


class Delivery(models.Model):
    """The outbox: one webhook to send, written in the transaction that made it necessary
    (a todo dead-lettered, a todo became claimable, an agent asked a question) and sent after
    commit by the sweeper. It keeps its own copy of the payload, so retention deleting the
    todo cannot race it. A dead letter goes to a sink, a doorbell to its endpoint's notify
    URL, a ``todo.waiting`` to either (it names one of them: queues/outbox.py)."""

    class Kind(models.TextChoices):
        DEAD_LETTER = "dead_letter"
        DOORBELL = "doorbell"
        TODO_WAITING = "todo.waiting"
        TASK_PUSH = "task.push"  # an A2A push notification (its config: ``push_config``)

    kind = models.CharField(max_length=16, choices=Kind)
    team = models.ForeignKey(Team, on_delete=models.DO_NOTHING, related_name="+", db_index=False)
    sink = reference(DeadLetterSink)
    endpoint = reference(Endpoint)
    push_config = reference("queues.TaskPushConfig")
    todo_id = models.BigIntegerField(null=True, blank=True)  # no FK: the todo may be gone
    url = models.CharField(max_length=500)
    payload = models.JSONField()
    # A row starts due now and untried: the outbox triggers (queues/schema/functions.sql) name
    # only what they send, where and why.
    created_at = models.DateTimeField(db_default=Now())
    next_attempt_at = models.DateTimeField(db_default=Now())
    attempts = models.IntegerField(db_default=0)
    last_status = models.IntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True, db_default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "outbox"
        indexes = [
            # The sweeper: due, undelivered rows.
            models.Index(
                "next_attempt_at",
                name="outbox_due",
                condition=Q(delivered_at__isnull=True, gave_up_at__isnull=True),
            ),
            models.Index("team", models.F("created_at").desc(), name="outbox_team_recent"),
        ]
        constraints = [
            # One pending doorbell per endpoint: rings coalesce until it is sent.
            models.UniqueConstraint(
                fields=["endpoint"],
                condition=Q(kind="doorbell", delivered_at__isnull=True, gave_up_at__isnull=True),
                name="outbox_one_pending_doorbell",
            ),
            # A todo.waiting goes to a sink or to an endpoint's notify URL, never both: the
            # sender tells its target by which one it names.
            models.CheckConstraint(
                condition=~Q(kind="todo.waiting") | Q(sink__isnull=True) | Q(endpoint__isnull=True),
                name="outbox_waiting_one_target",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} delivery #{self.pk}"


class TaskPushConfig(models.Model):
    """An A2A push-notification config (agents/a2a.py): where to POST a task's status each
    time its todo changes state, set by the endpoint that reads the task (only it sees the
    config). Sent through the outbox, signed with ``secret`` and carrying the client's
    ``token`` and ``authentication`` as A2A says; the URL passes the webhooks' SSRF rules."""

    todo = models.ForeignKey("queues.Todo", on_delete=models.DB_CASCADE, related_name="+")
    endpoint = models.ForeignKey(Endpoint, on_delete=models.DB_CASCADE, related_name="+")
    team = models.ForeignKey(Team, on_delete=models.DO_NOTHING, related_name="+", db_index=False)
    config_id = models.CharField(max_length=64)
    task_id = models.CharField(max_length=64)  # the task id A2A knows (a MAC: agents/task_view.py)
    url = models.URLField(max_length=500)
    token = models.CharField(max_length=500, blank=True)
    auth_scheme = models.CharField(max_length=32, blank=True)
    # Needed in clear to call the client's URL; shown only to the endpoint that set it.
    auth_credentials = models.CharField(max_length=1000, blank=True)
    secret = models.CharField(max_length=128)  # signs each POST (X-Switchboard-Signature)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "task_push_configs"
        constraints = [
            models.UniqueConstraint(fields=["todo", "config_id"], name="task_push_config_id"),
        ]

    def __str__(self) -> str:
        return f"push config #{self.pk}"


class SweeperStatus(models.Model):
    """One row: when a sweeper pass last started and finished, and what it did. Shared by
    every sweeper process (queue health and /metrics read it)."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    passes = models.BigIntegerField(default=0)
    last_report = models.JSONField(default=dict, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    # Attempt endings up to here are folded into metric_counters.
    metrics_folded_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sweeper_status"
        constraints = [models.CheckConstraint(condition=Q(id=1), name="sweeper_status_one_row")]

    def __str__(self) -> str:
        return "sweeper status"


class MetricCounter(models.Model):
    """Monotonic counters for /metrics, kept in the database so they survive restarts and
    agree across processes: (name, label) → value. Histogram buckets are counters too."""

    name = models.CharField(max_length=100)
    label = models.CharField(max_length=100, blank=True)
    value = models.FloatField(default=0)

    class Meta:
        db_table = "metric_counters"
        constraints = [
            models.UniqueConstraint(fields=["name", "label"], name="metric_counters_name_label")
        ]

    def __str__(self) -> str:
        return f"{self.name}{{{self.label}}}"


class MetricDelta(models.Model):
    """Counts waiting to be added to ``metric_counters`` by the sweeper's fold: attempts the
    per-todo history cap deleted before the fold had counted them (queues/sql/claim.py, the
    ``carried`` arm), with the time they ended. The fold counts a delta whose ``ended_at`` is
    in its window, drops one before it (that attempt's row was counted while it was still
    there) and keeps one after it for a later fold. Insert-only for writers, emptied by the
    fold: no row is ever updated, so writers never queue on one."""

    name = models.CharField(max_length=100)
    label = models.CharField(max_length=100, blank=True)
    # When the pruned attempts ended (one delta per outcome and ended_at).
    ended_at = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        db_table = "metric_deltas"

    def __str__(self) -> str:
        return f"{self.name}{{{self.label}}} +{self.value}"


# ---------------------------------------------------------------------------------------
# Signing in: the throttle (queues/signin_throttle.py, used by board/auth.py).


class SignInThrottle(models.Model):
    """Sign-ins charged to one key in its current fixed window: ``user:<lowercased name>`` or
    ``addr:<client address>``. Kept in PostgreSQL so that every web process counts the same
    guesses. A sign-in is charged before its password is checked and refunded when it
    succeeds, so ``failures`` counts the ones that did not."""

    key = models.CharField(max_length=200, primary_key=True)
    window_started_at = models.DateTimeField()
    failures = models.IntegerField(default=0)

    class Meta:
        db_table = "sign_in_throttles"
        indexes = [
            # Pruning: the oldest windows first (queues/signin_throttle.py, PRUNE).
            models.Index("window_started_at", name="sign_in_throttles_window"),
        ]

    def __str__(self) -> str:
        return f"{self.key}: {self.failures}"
