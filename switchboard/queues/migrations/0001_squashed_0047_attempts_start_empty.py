"""The ledger's migrations 0001 to 0047 in one, for a database that has none of them (a first
run, a test database): the schema as those 47 leave it, made by one script
(0001_squashed_0047_attempts_start_empty.sql, written by ``schema.script`` from
queues/schema/*.sql as they were at 0047), and the models' state as one CreateModel each (as
``makemigrations`` words it). Migrating from zero took 3.8 s on this project's 2-core machine,
nearly all of it Django rendering the models' state after each of 47 migrations; this is one.

A database that has applied some of the 47 goes on through the rest of them; one that has
applied all of them is marked as having this one (Django's squashed migrations). Both ways
make the same schema: tests/queues/test_schema_file.py holds the database made by this one,
and one made by the 47, to queues/schema/*.sql.
"""

from pathlib import Path

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
import django.db.models.functions.comparison
import django.db.models.functions.datetime
import django.db.models.functions.text
import switchboard.queues.models.todos
from django.conf import settings
from django.db import migrations, models

SCRIPT = Path(__file__).with_suffix(".sql").read_text()


class Migration(migrations.Migration):
    replaces = [
        ("queues", "0001_initial"),
        ("queues", "0002_one_open_attempt"),
        ("queues", "0003_lean_indexes"),
        ("queues", "0004_autovacuum"),
        ("queues", "0005_attempts_ended_recent"),
        ("queues", "0006_outbox_sinks_sweeper_metrics_admission"),
        ("queues", "0007_outbox_triggers"),
        ("queues", "0008_owner_attempt_outlives_its_user"),
        ("queues", "0009_autovacuum_fixed_threshold"),
        ("queues", "0010_attempt_records_a_requesters_cancel"),
        ("queues", "0011_sign_in_throttle"),
        ("queues", "0012_exact_counters_and_sender_keys"),
        ("queues", "0013_team_invitations"),
        ("queues", "0014_event_kinds"),
        ("queues", "0015_search"),
        ("queues", "0016_endpoint_pause"),
        ("queues", "0017_attempt_history"),
        ("queues", "0018_todo_search_documents"),
        ("queues", "0019_metric_deltas_ended_at"),
        ("queues", "0020_attempt_summary_document"),
        ("queues", "0021_row_rules_in_one_function"),
        ("queues", "0022_summary_words_written_by_the_close"),
        ("queues", "0023_claimable_at_an_index_expression"),
        ("queues", "0024_attempts_owner_ended"),
        ("queues", "0025_attempts_owner_lapsed"),
        ("queues", "0026_attempt_wake_time"),
        ("queues", "0027_board_live"),
        ("queues", "0028_result_words"),
        ("queues", "0029_endpoint_changes"),
        ("queues", "0030_board_notices_per_statement"),
        ("queues", "0031_board_streams"),
        ("queues", "0032_board_notices_as_records"),
        ("queues", "0033_taken_over"),
        ("queues", "0034_ask_a_person"),
        ("queues", "0035_todo_waiting_event"),
        ("queues", "0036_todos_that_wait"),
        ("queues", "0037_hot_path_triggers"),
        ("queues", "0038_attempt_trace_id"),
        ("queues", "0039_task_push_configs"),
        ("queues", "0040_attempt_endpoint_unchecked"),
        ("queues", "0041_endpoint_waited_at"),
        ("queues", "0042_todo_unclaimed"),
        ("queues", "0043_keys_cheaper_to_count"),
        ("queues", "0044_keyed_then_never_waits_holding_a_key"),
        ("queues", "0045_keys_counted_from_their_todos"),
        ("queues", "0046_outbox_rows_start_untried"),
        ("queues", "0047_attempts_start_empty"),
    ]

    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            # One statement to the driver (a list is run as it is, not split by sqlparse).
            database_operations=[
                migrations.RunSQL(
                    [SCRIPT],
                    [
                        "DROP TABLE IF EXISTS task_push_configs CASCADE",
                        "DROP TABLE IF EXISTS todo_after CASCADE",
                        "DROP TABLE IF EXISTS schedules CASCADE",
                        "DROP TABLE IF EXISTS todo_questions CASCADE",
                        "DROP TABLE IF EXISTS board_streams CASCADE",
                        "DROP TABLE IF EXISTS board_watches CASCADE",
                        "DROP TABLE IF EXISTS sign_in_throttles CASCADE",
                        "DROP TABLE IF EXISTS metric_deltas CASCADE",
                        "DROP TABLE IF EXISTS metric_counters CASCADE",
                        "DROP TABLE IF EXISTS sweeper_status CASCADE",
                        "DROP TABLE IF EXISTS outbox CASCADE",
                        "DROP TABLE IF EXISTS dead_letter_sinks CASCADE",
                        "DROP TABLE IF EXISTS todo_search_documents CASCADE",
                        "DROP TABLE IF EXISTS todo_events CASCADE",
                        "DROP TABLE IF EXISTS todo_attempts CASCADE",
                        "DROP TABLE IF EXISTS todos CASCADE",
                        "DROP TABLE IF EXISTS endpoints CASCADE",
                        "DROP TABLE IF EXISTS team_invitations CASCADE",
                        "DROP TABLE IF EXISTS team_members CASCADE",
                        "DROP TABLE IF EXISTS teams CASCADE",
                        "DROP FUNCTION IF EXISTS todos_valid",
                        "DROP FUNCTION IF EXISTS todo_attempts_valid",
                        "DROP FUNCTION IF EXISTS switchboard_utc",
                        "DROP FUNCTION IF EXISTS switchboard_todo_unclaimed",
                        "DROP FUNCTION IF EXISTS switchboard_outbox_dead_letter",
                        "DROP FUNCTION IF EXISTS switchboard_outbox_doorbell",
                        "DROP FUNCTION IF EXISTS todo_search_document_on_insert",
                        "DROP FUNCTION IF EXISTS todo_attempt_result_words",
                        "DROP FUNCTION IF EXISTS switchboard_endpoint_changed",
                        "DROP FUNCTION IF EXISTS switchboard_board_todos",
                        "DROP FUNCTION IF EXISTS switchboard_board_changed",
                        "DROP FUNCTION IF EXISTS switchboard_wait_ended",
                        "DROP FUNCTION IF EXISTS switchboard_task_state",
                        "DROP FUNCTION IF EXISTS switchboard_outbox_task_push",
                        "DROP FUNCTION IF EXISTS switchboard_outbox_todo_waiting",
                        "DROP FUNCTION IF EXISTS switchboard_waits_follow",
                    ],
                )
            ],
            state_operations=[
                migrations.CreateModel(
                    name="MetricDelta",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("label", models.CharField(blank=True, max_length=100)),
                        ("ended_at", models.DateTimeField()),
                        ("value", models.FloatField()),
                    ],
                    options={
                        "db_table": "metric_deltas",
                    },
                ),
                migrations.CreateModel(
                    name="Todo",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("title", models.CharField(max_length=500)),
                        ("body", models.TextField(blank=True)),
                        ("priority", models.SmallIntegerField(default=0)),
                        (
                            "idempotency_key",
                            models.CharField(blank=True, max_length=200, null=True),
                        ),
                        (
                            "state",
                            models.CharField(
                                choices=[
                                    ("pending", "Pending"),
                                    ("claimed", "Claimed"),
                                    ("retry_wait", "Retry Wait"),
                                    ("done", "Done"),
                                    ("dead", "Dead"),
                                    ("canceled", "Canceled"),
                                    ("waiting", "Waiting"),
                                ],
                                default="pending",
                                max_length=16,
                            ),
                        ),
                        ("max_attempts", models.SmallIntegerField()),
                        ("attempt", models.IntegerField(default=0)),
                        ("failures", models.IntegerField(default=0)),
                        ("round", models.IntegerField(default=1)),
                        ("last_attempt_seq", models.IntegerField(default=0)),
                        ("attempts_pruned", models.IntegerField(default=0)),
                        ("not_before", models.DateTimeField(blank=True, null=True)),
                        ("next_retry_at", models.DateTimeField(blank=True, null=True)),
                        ("owner", models.CharField(blank=True, max_length=200)),
                        ("claimed_at", models.DateTimeField(blank=True, null=True)),
                        ("last_heartbeat_at", models.DateTimeField(blank=True, null=True)),
                        ("lease_expires_at", models.DateTimeField(blank=True, null=True)),
                        ("result", models.JSONField(blank=True, null=True)),
                        (
                            "dead_letter_reason",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("failed", "Failed"),
                                    ("reaped", "Reaped"),
                                    ("lease_expired", "Lease Expired"),
                                    ("revoked", "Revoked"),
                                    ("unanswered", "Unanswered"),
                                    ("after_ended", "After Ended"),
                                ],
                                max_length=16,
                            ),
                        ),
                        (
                            "waiting_for",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("people", "People"),
                                    ("todos", "Todos"),
                                    ("children", "Children"),
                                ],
                                db_default="",
                                max_length=16,
                            ),
                        ),
                        (
                            "after_policy",
                            models.CharField(
                                choices=[("all_done", "All Done"), ("any_end", "Any End")],
                                db_default="all_done",
                                max_length=16,
                            ),
                        ),
                        ("after_total", models.IntegerField(db_default=0)),
                        ("after_left", models.IntegerField(db_default=0)),
                        ("has_dependents", models.BooleanField(db_default=False)),
                        ("push_configs", models.IntegerField(db_default=0)),
                        ("children_total", models.IntegerField(db_default=0)),
                        ("children_open", models.IntegerField(db_default=0)),
                        ("key", models.CharField(blank=True, db_default="", max_length=200)),
                        ("scheduled_for", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "updated_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("ended_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "todos",
                        "indexes": [
                            models.Index(
                                models.F("endpoint"),
                                models.OrderBy(models.F("priority"), descending=True),
                                models.Case(
                                    models.When(state="claimed", then="lease_expires_at"),
                                    models.When(state="retry_wait", then="next_retry_at"),
                                    models.When(
                                        state="pending",
                                        then=django.db.models.functions.comparison.Coalesce(
                                            "not_before", "created_at"
                                        ),
                                    ),
                                    default=None,
                                    output_field=models.DateTimeField(null=True),
                                ),
                                models.F("id"),
                                condition=models.Q(
                                    ("state__in", ["pending", "retry_wait", "claimed"])
                                ),
                                name="todos_claimable",
                            ),
                            models.Index(
                                models.F("state"),
                                models.Case(
                                    models.When(state="claimed", then="lease_expires_at"),
                                    models.When(state="retry_wait", then="next_retry_at"),
                                    models.When(
                                        state="pending",
                                        then=django.db.models.functions.comparison.Coalesce(
                                            "not_before", "created_at"
                                        ),
                                    ),
                                    default=None,
                                    output_field=models.DateTimeField(null=True),
                                ),
                                condition=models.Q(("state__in", ["claimed", "retry_wait"])),
                                name="todos_sweep_due",
                            ),
                            models.Index(
                                models.F("endpoint"),
                                models.F("ended_at"),
                                condition=models.Q(("state__in", ["done", "dead", "canceled"])),
                                name="todos_terminal",
                            ),
                            models.Index(
                                models.F("ended_at"),
                                condition=models.Q(("state__in", ["done", "dead", "canceled"])),
                                name="todos_terminal_age",
                            ),
                            models.Index(
                                models.F("endpoint"),
                                models.OrderBy(models.F("id"), descending=True),
                                name="todos_endpoint_list",
                            ),
                            models.Index(
                                models.F("endpoint"),
                                models.F("state"),
                                models.OrderBy(models.F("id"), descending=True),
                                name="todos_endpoint_state",
                            ),
                            models.Index(
                                models.F("requester"),
                                condition=models.Q(("requester__isnull", False)),
                                name="todos_requester",
                            ),
                            models.Index(
                                models.F("created_by"),
                                condition=models.Q(("created_by__isnull", False)),
                                name="todos_created_by",
                            ),
                            models.Index(
                                models.F("parent"),
                                condition=models.Q(("parent__isnull", False)),
                                name="todos_parent",
                            ),
                            models.Index(
                                models.F("endpoint"),
                                models.F("key"),
                                condition=models.Q(("key", ""), _negated=True),
                                name="todos_key",
                            ),
                            models.Index(
                                models.F("endpoint"),
                                models.F("key"),
                                condition=models.Q(
                                    ("state", "claimed"), models.Q(("key", ""), _negated=True)
                                ),
                                name="todos_key_claimed",
                            ),
                        ],
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Func(
                                    "state",
                                    "priority",
                                    "max_attempts",
                                    "attempt",
                                    "failures",
                                    "round",
                                    "attempts_pruned",
                                    "lease_expires_at",
                                    "next_retry_at",
                                    "ended_at",
                                    "dead_letter_reason",
                                    function="todos_valid",
                                    output_field=models.BooleanField(),
                                ),
                                name="todos_valid",
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("schedule__isnull", False)),
                                fields=("schedule", "scheduled_for"),
                                name="todos_schedule_slot",
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("idempotency_key__isnull", False)),
                                fields=("endpoint", "requester", "idempotency_key"),
                                name="todos_idempotency_key_unique",
                                nulls_distinct=False,
                            ),
                        ],
                    },
                    bases=(switchboard.queues.models.todos.TodoTotals, models.Model),
                ),
                migrations.CreateModel(
                    name="DeadLetterSink",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("url", models.URLField(max_length=500)),
                        ("secret", models.CharField(max_length=128)),
                        ("active", models.BooleanField(default=True)),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "dead_letter_sinks",
                    },
                ),
                migrations.CreateModel(
                    name="Endpoint",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("agent_id", models.SlugField(max_length=64)),
                        ("name", models.CharField(blank=True, max_length=200)),
                        ("token_hash", models.CharField(max_length=64, unique=True)),
                        (
                            "verbs",
                            django.contrib.postgres.fields.ArrayField(
                                base_field=models.CharField(max_length=32)
                            ),
                        ),
                        ("notify_url", models.URLField(blank=True, max_length=500)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("rotated_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        ("notify_secret", models.CharField(blank=True, max_length=128)),
                        ("admission_window_at", models.DateTimeField(blank=True, null=True)),
                        ("admission_claims", models.IntegerField(default=0)),
                        ("paused_at", models.DateTimeField(blank=True, null=True)),
                        ("max_claimed_per_key", models.IntegerField(blank=True, null=True)),
                        ("max_claimed", models.IntegerField(blank=True, null=True)),
                        ("waited_at", models.DateTimeField(blank=True, editable=False, null=True)),
                        (
                            "paused_by",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "endpoints",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("team", "agent_id"), name="endpoints_agent_id_unique"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    (
                                        "verbs__contained_by",
                                        [
                                            "create_todo",
                                            "list_todos",
                                            "get_todo",
                                            "claim",
                                            "claim_next",
                                            "heartbeat",
                                            "complete",
                                            "fail",
                                            "release",
                                            "cancel",
                                            "answer",
                                        ],
                                    )
                                ),
                                name="endpoints_verbs_known",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Membership",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "role",
                            models.CharField(
                                choices=[("owner", "Owner"), ("member", "Member")],
                                default="member",
                                max_length=16,
                            ),
                        ),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "user",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="memberships",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "team_members",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("team", "user"), name="team_members_unique"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("role__in", ["owner", "member"])),
                                name="team_members_role_valid",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="MetricCounter",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("label", models.CharField(blank=True, max_length=100)),
                        ("value", models.FloatField(default=0)),
                    ],
                    options={
                        "db_table": "metric_counters",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("name", "label"), name="metric_counters_name_label"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Schedule",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=100)),
                        ("cron", models.CharField(blank=True, max_length=100)),
                        ("timezone", models.CharField(default="UTC", max_length=64)),
                        ("interval_seconds", models.IntegerField(blank=True, null=True)),
                        ("title_template", models.CharField(max_length=500)),
                        ("body_template", models.TextField(blank=True)),
                        ("priority", models.SmallIntegerField(default=0)),
                        ("max_attempts", models.SmallIntegerField(blank=True, null=True)),
                        (
                            "catch_up",
                            models.CharField(
                                choices=[("none", "None"), ("latest", "Latest")],
                                default="none",
                                max_length=8,
                            ),
                        ),
                        ("paused_at", models.DateTimeField(blank=True, null=True)),
                        ("next_run_at", models.DateTimeField(blank=True, null=True)),
                        ("last_run_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "updated_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "created_by",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "endpoint",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="schedules",
                                to="queues.endpoint",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "schedules",
                        "indexes": [
                            models.Index(
                                models.F("next_run_at"),
                                condition=models.Q(("paused_at__isnull", True)),
                                name="schedules_due",
                            )
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("endpoint", "name"), name="schedules_name_unique"
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(("cron", ""), ("interval_seconds__gte", 60)),
                                    models.Q(
                                        models.Q(("cron", ""), _negated=True),
                                        ("interval_seconds__isnull", True),
                                    ),
                                    _connector="OR",
                                ),
                                name="schedules_cron_or_interval",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="SignInThrottle",
                    fields=[
                        (
                            "key",
                            models.CharField(max_length=200, primary_key=True, serialize=False),
                        ),
                        ("window_started_at", models.DateTimeField()),
                        ("failures", models.IntegerField(default=0)),
                    ],
                    options={
                        "db_table": "sign_in_throttles",
                        "indexes": [
                            models.Index(
                                models.F("window_started_at"), name="sign_in_throttles_window"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="SweeperStatus",
                    fields=[
                        (
                            "id",
                            models.SmallIntegerField(default=1, primary_key=True, serialize=False),
                        ),
                        ("last_started_at", models.DateTimeField(blank=True, null=True)),
                        ("last_finished_at", models.DateTimeField(blank=True, null=True)),
                        ("passes", models.BigIntegerField(default=0)),
                        ("last_report", models.JSONField(blank=True, default=dict)),
                        ("last_error", models.CharField(blank=True, max_length=500)),
                        ("metrics_folded_until", models.DateTimeField(blank=True, null=True)),
                    ],
                    options={
                        "db_table": "sweeper_status",
                        "constraints": [
                            models.CheckConstraint(
                                condition=models.Q(("id", 1)), name="sweeper_status_one_row"
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="Team",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("slug", models.SlugField(max_length=64, unique=True)),
                        ("name", models.CharField(max_length=200)),
                        ("personal", models.BooleanField(default=False)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "members",
                            models.ManyToManyField(
                                related_name="teams",
                                through="queues.Membership",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "teams",
                    },
                ),
                migrations.CreateModel(
                    name="TaskPushConfig",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("config_id", models.CharField(max_length=64)),
                        ("task_id", models.CharField(max_length=64)),
                        ("url", models.URLField(max_length=500)),
                        ("token", models.CharField(blank=True, max_length=500)),
                        ("auth_scheme", models.CharField(blank=True, max_length=32)),
                        ("auth_credentials", models.CharField(blank=True, max_length=1000)),
                        ("secret", models.CharField(max_length=128)),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "endpoint",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                related_name="+",
                                to="queues.endpoint",
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="queues.team",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "task_push_configs",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("todo", "config_id"), name="task_push_config_id"
                            )
                        ],
                    },
                ),
                migrations.AddField(
                    model_name="membership",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="queues.team",
                    ),
                ),
                migrations.AddField(
                    model_name="endpoint",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="endpoints",
                        to="queues.team",
                    ),
                ),
                migrations.CreateModel(
                    name="Delivery",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("dead_letter", "Dead Letter"),
                                    ("doorbell", "Doorbell"),
                                    ("todo.waiting", "Todo Waiting"),
                                    ("task.push", "Task Push"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("todo_id", models.BigIntegerField(blank=True, null=True)),
                        ("url", models.CharField(max_length=500)),
                        ("payload", models.JSONField()),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "next_attempt_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("attempts", models.IntegerField(db_default=0)),
                        ("last_status", models.IntegerField(blank=True, null=True)),
                        ("last_error", models.CharField(blank=True, db_default="", max_length=500)),
                        ("delivered_at", models.DateTimeField(blank=True, null=True)),
                        ("gave_up_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "sink",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to="queues.deadlettersink",
                            ),
                        ),
                        (
                            "endpoint",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to="queues.endpoint",
                            ),
                        ),
                        (
                            "push_config",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to="queues.taskpushconfig",
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="queues.team",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "outbox",
                        "indexes": [
                            models.Index(
                                models.F("next_attempt_at"),
                                condition=models.Q(
                                    ("delivered_at__isnull", True), ("gave_up_at__isnull", True)
                                ),
                                name="outbox_due",
                            ),
                            models.Index(
                                models.F("team"),
                                models.OrderBy(models.F("created_at"), descending=True),
                                name="outbox_team_recent",
                            ),
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(
                                    ("delivered_at__isnull", True),
                                    ("gave_up_at__isnull", True),
                                    ("kind", "doorbell"),
                                ),
                                fields=("endpoint",),
                                name="outbox_one_pending_doorbell",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(("kind", "todo.waiting"), _negated=True),
                                    ("sink__isnull", True),
                                    ("endpoint__isnull", True),
                                    _connector="OR",
                                ),
                                name="outbox_waiting_one_target",
                            ),
                        ],
                    },
                ),
                migrations.AddField(
                    model_name="deadlettersink",
                    name="team",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        related_name="dead_letter_sinks",
                        to="queues.team",
                    ),
                ),
                migrations.CreateModel(
                    name="TeamInvitation",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("username", models.CharField(max_length=150)),
                        (
                            "role",
                            models.CharField(
                                choices=[("owner", "Owner"), ("member", "Member")],
                                default="member",
                                max_length=16,
                            ),
                        ),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("accepted_at", models.DateTimeField(blank=True, null=True)),
                        ("declined_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "answered_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "invited_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                related_name="invitations",
                                to="queues.team",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "team_invitations",
                        "constraints": [
                            models.UniqueConstraint(
                                django.db.models.functions.text.Upper("username"),
                                models.F("team"),
                                condition=models.Q(
                                    ("accepted_at__isnull", True), ("declined_at__isnull", True)
                                ),
                                name="team_invitations_one_pending",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(("role__in", ["owner", "member"])),
                                name="team_invitations_role_valid",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("accepted_at__isnull", True),
                                    ("declined_at__isnull", True),
                                    _connector="OR",
                                ),
                                name="team_invitations_one_answer",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="TodoSearchDocument",
                    fields=[
                        (
                            "todo",
                            models.OneToOneField(
                                db_column="todo_id",
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                primary_key=True,
                                related_name="search_document",
                                serialize=False,
                                to="queues.todo",
                            ),
                        ),
                        ("document", django.contrib.postgres.search.SearchVectorField()),
                    ],
                    options={
                        "db_table": "todo_search_documents",
                        "indexes": [
                            django.contrib.postgres.indexes.GinIndex(
                                fields=["document"], name="todo_search_documents_words"
                            )
                        ],
                    },
                ),
                migrations.AddField(
                    model_name="todo",
                    name="endpoint",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="todos",
                        to="queues.endpoint",
                    ),
                ),
                migrations.AddField(
                    model_name="todo",
                    name="parent",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DB_SET_NULL,
                        related_name="children",
                        to="queues.todo",
                    ),
                ),
                migrations.AddField(
                    model_name="todo",
                    name="requester",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DB_SET_NULL,
                        related_name="sent_todos",
                        to="queues.endpoint",
                    ),
                ),
                migrations.AddField(
                    model_name="todo",
                    name="schedule",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DB_SET_NULL,
                        related_name="todos",
                        to="queues.schedule",
                    ),
                ),
                migrations.AddField(
                    model_name="taskpushconfig",
                    name="todo",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        related_name="+",
                        to="queues.todo",
                    ),
                ),
                migrations.AddField(
                    model_name="schedule",
                    name="last_todo",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DB_SET_NULL,
                        related_name="+",
                        to="queues.todo",
                    ),
                ),
                migrations.CreateModel(
                    name="TodoAfter",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "todo",
                                "after",
                                blank=True,
                                editable=False,
                                primary_key=True,
                                serialize=False,
                            ),
                        ),
                        ("ended", models.CharField(blank=True, db_default="", max_length=16)),
                        (
                            "after",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                related_name="+",
                                to="queues.todo",
                            ),
                        ),
                        (
                            "todo",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                related_name="+",
                                to="queues.todo",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "todo_after",
                        "indexes": [
                            models.Index(
                                models.F("after"),
                                condition=models.Q(("ended", "")),
                                name="todo_after_unmarked",
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="TodoAttempt",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("seq", models.IntegerField()),
                        ("round", models.IntegerField()),
                        ("attempt", models.IntegerField()),
                        (
                            "claimer_kind",
                            models.CharField(
                                choices=[("endpoint", "Endpoint"), ("owner", "Person")],
                                max_length=16,
                            ),
                        ),
                        (
                            "mcp_session_id",
                            models.CharField(blank=True, db_default="", default="", max_length=200),
                        ),
                        (
                            "mcp_session_id_truncated",
                            models.BooleanField(db_default=False, default=False),
                        ),
                        ("mcp_session_id_bytes", models.IntegerField(db_default=0, default=0)),
                        ("owner", models.CharField(max_length=200)),
                        (
                            "claimant",
                            models.CharField(blank=True, db_default="", default="", max_length=200),
                        ),
                        (
                            "claimant_truncated",
                            models.BooleanField(db_default=False, default=False),
                        ),
                        ("claimant_bytes", models.IntegerField(db_default=0, default=0)),
                        ("trace_id", models.CharField(blank=True, db_default="", max_length=32)),
                        ("claimed_at", models.DateTimeField()),
                        ("last_heartbeat_at", models.DateTimeField(blank=True, null=True)),
                        ("lease_expires_at", models.DateTimeField()),
                        ("ended_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "outcome",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("completed", "Completed"),
                                    ("failed", "Failed"),
                                    ("released", "Released"),
                                    ("lease_expired", "Lease Expired"),
                                    ("reaped", "Reaped"),
                                    ("canceled", "Canceled"),
                                    ("revoked", "Revoked"),
                                    ("taken_over", "Taken Over"),
                                    ("asked", "Asked"),
                                ],
                                db_default="",
                                default="",
                                max_length=16,
                            ),
                        ),
                        (
                            "disposition",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("done", "Done"),
                                    ("retry_scheduled", "Retry Scheduled"),
                                    ("requeued", "Requeued"),
                                    ("dead_lettered", "Dead Lettered"),
                                    ("canceled", "Canceled"),
                                    ("taken_over", "Taken Over"),
                                    ("waiting", "Waiting"),
                                ],
                                db_default="",
                                default="",
                                max_length=16,
                            ),
                        ),
                        ("not_before", models.DateTimeField(blank=True, null=True)),
                        ("summary", models.TextField(blank=True, null=True)),
                        ("summary_truncated", models.BooleanField(db_default=False, default=False)),
                        ("summary_bytes", models.IntegerField(db_default=0, default=0)),
                        ("artifact", models.CharField(blank=True, max_length=600, null=True)),
                        (
                            "artifact_truncated",
                            models.BooleanField(db_default=False, default=False),
                        ),
                        ("artifact_bytes", models.IntegerField(db_default=0, default=0)),
                        ("result", models.JSONField(blank=True, null=True)),
                        (
                            "lease_token_hash",
                            models.CharField(blank=True, max_length=64, null=True),
                        ),
                        (
                            "summary_document",
                            django.contrib.postgres.search.SearchVectorField(null=True),
                        ),
                        (
                            "ended_by",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "ended_by_endpoint",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to="queues.endpoint",
                            ),
                        ),
                        (
                            "endpoint",
                            models.ForeignKey(
                                blank=True,
                                db_constraint=False,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="queues.endpoint",
                            ),
                        ),
                        (
                            "todo",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                related_name="attempts",
                                to="queues.todo",
                            ),
                        ),
                        (
                            "user",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "db_table": "todo_attempts",
                        "indexes": [
                            models.Index(
                                models.F("user"),
                                condition=models.Q(("user__isnull", False)),
                                name="todo_attempts_user",
                            ),
                            models.Index(
                                models.F("ended_by"),
                                condition=models.Q(("ended_by__isnull", False)),
                                name="todo_attempts_ended_by",
                            ),
                            models.Index(
                                models.OrderBy(models.F("ended_at"), descending=True),
                                condition=models.Q(("ended_at__isnull", False)),
                                name="todo_attempts_ended_recent",
                            ),
                            django.contrib.postgres.indexes.GinIndex(
                                condition=models.Q(("summary__gt", "")),
                                fields=["summary_document"],
                                name="todo_attempts_search",
                            ),
                            models.Index(
                                condition=models.Q(("ended_at__isnull", False)),
                                fields=["endpoint", "ended_at"],
                                include=("outcome", "claimed_at", "last_heartbeat_at"),
                                name="todo_attempts_endpoint_ended",
                            ),
                            models.Index(
                                models.OrderBy(models.F("ended_at"), descending=True),
                                condition=models.Q(
                                    ("claimer_kind", "owner"),
                                    ("ended_at__isnull", False),
                                    ("ended_by__isnull", True),
                                    ("ended_by_endpoint__isnull", True),
                                    ("outcome__in", ("lease_expired", "reaped", "revoked")),
                                ),
                                name="todo_attempts_owner_lapsed",
                            ),
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("todo", "seq"), name="todo_attempts_todo_seq"
                            ),
                            models.CheckConstraint(
                                condition=models.Func(
                                    "claimer_kind",
                                    "endpoint",
                                    "user",
                                    "ended_at",
                                    "outcome",
                                    "disposition",
                                    "summary",
                                    "summary_document",
                                    function="todo_attempts_valid",
                                    output_field=models.BooleanField(),
                                ),
                                name="todo_attempts_valid",
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("ended_at__isnull", True)),
                                fields=("todo",),
                                name="todo_attempts_one_open",
                            ),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="TodoEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
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
                                    ("answer", "Answer"),
                                    ("unanswered", "Unanswered"),
                                    ("revoke_dead_letter", "Revoke Dead Letter"),
                                    ("start_now", "Start Now"),
                                    ("cancel_child", "Cancel Child"),
                                    ("schedule_add", "Schedule Add"),
                                    ("schedule_edit", "Schedule Edit"),
                                    ("schedule_pause", "Schedule Pause"),
                                    ("schedule_resume", "Schedule Resume"),
                                    ("schedule_remove", "Schedule Remove"),
                                    ("vend", "Endpoint Vend"),
                                    ("rotate", "Endpoint Rotate"),
                                    ("endpoint_revoke", "Endpoint Revoke"),
                                    ("notify_url", "Notify Url"),
                                    ("notify_secret_rotate", "Notify Secret Rotate"),
                                    ("pause", "Endpoint Pause"),
                                    ("resume", "Endpoint Resume"),
                                    ("limits", "Endpoint Limits"),
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
                        ("detail", models.JSONField(blank=True, default=dict)),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        (
                            "actor_endpoint",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to="queues.endpoint",
                            ),
                        ),
                        (
                            "actor_user",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="events",
                                to="queues.team",
                            ),
                        ),
                        (
                            "todo",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                related_name="events",
                                to="queues.todo",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "todo_events",
                        "indexes": [
                            models.Index(
                                models.F("team"),
                                models.OrderBy(models.F("created_at"), descending=True),
                                name="todo_events_team_recent",
                            )
                        ],
                        "constraints": [
                            models.CheckConstraint(
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
                                            "answer",
                                            "unanswered",
                                            "revoke_dead_letter",
                                            "start_now",
                                            "cancel_child",
                                            "schedule_add",
                                            "schedule_edit",
                                            "schedule_pause",
                                            "schedule_resume",
                                            "schedule_remove",
                                            "vend",
                                            "rotate",
                                            "endpoint_revoke",
                                            "notify_url",
                                            "notify_secret_rotate",
                                            "pause",
                                            "resume",
                                            "limits",
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
                            )
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="TodoQuestion",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("attempt_seq", models.IntegerField()),
                        (
                            "asked_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now()
                            ),
                        ),
                        ("text", models.TextField()),
                        ("text_truncated", models.BooleanField(default=False)),
                        ("text_bytes", models.IntegerField(default=0)),
                        ("choices", models.JSONField(blank=True, null=True)),
                        ("answer_schema", models.JSONField(blank=True, null=True)),
                        ("answer_within_seconds", models.IntegerField(blank=True, null=True)),
                        ("expires_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "on_no_answer",
                            models.CharField(
                                choices=[("requeue", "Requeue"), ("dead_letter", "Dead Letter")],
                                default="requeue",
                                max_length=16,
                            ),
                        ),
                        ("ended_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "ending",
                            models.CharField(
                                blank=True,
                                choices=[
                                    ("answered", "Answered"),
                                    ("unanswered", "Unanswered"),
                                    ("withdrawn", "Withdrawn"),
                                ],
                                max_length=16,
                            ),
                        ),
                        ("answer", models.JSONField(blank=True, null=True)),
                        (
                            "answered_by_endpoint",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to="queues.endpoint",
                            ),
                        ),
                        (
                            "answered_by_user",
                            models.ForeignKey(
                                blank=True,
                                db_index=False,
                                null=True,
                                on_delete=django.db.models.deletion.DB_SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "todo",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DB_CASCADE,
                                related_name="questions",
                                to="queues.todo",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "todo_questions",
                        "indexes": [
                            models.Index(
                                models.F("expires_at"),
                                condition=models.Q(
                                    ("ended_at__isnull", True), ("expires_at__isnull", False)
                                ),
                                name="todo_questions_expiring",
                            ),
                            models.Index(
                                models.F("ended_at"),
                                condition=models.Q(("ended_at__isnull", False)),
                                name="todo_questions_ended",
                            ),
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("todo", "attempt_seq"), name="todo_questions_seq"
                            ),
                            models.UniqueConstraint(
                                condition=models.Q(("ended_at__isnull", True)),
                                fields=("todo",),
                                name="todo_questions_open",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    models.Q(("ended_at__isnull", True), ("ending", "")),
                                    models.Q(
                                        ("ended_at__isnull", False),
                                        ("ending__in", ["answered", "unanswered", "withdrawn"]),
                                    ),
                                    _connector="OR",
                                ),
                                name="todo_questions_ending_valid",
                            ),
                            models.CheckConstraint(
                                condition=models.Q(
                                    ("choices__isnull", True),
                                    ("answer_schema__isnull", True),
                                    _connector="OR",
                                ),
                                name="todo_questions_choices_or_schema",
                            ),
                        ],
                    },
                ),
            ],
        ),
    ]
