"""An attempt starts with nothing said by the table's own defaults: what a claim may leave
empty (its MCP session, its claimant) and what only its ending writes (outcome, disposition,
the sizes and cut-off flags of its summary and artifact). The two statements that open an
attempt (queues/sql/claim.py, queues/sql/by_hand.py) name only what they set. Defaults only:
no row is rewritten."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0046_outbox_rows_start_untried"),
    ]

    operations = [
        migrations.AlterField(
            model_name="todoattempt",
            name="artifact_bytes",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="artifact_truncated",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="claimant",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="claimant_bytes",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="claimant_truncated",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="disposition",
            field=models.CharField(
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
        migrations.AlterField(
            model_name="todoattempt",
            name="mcp_session_id",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="mcp_session_id_bytes",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="mcp_session_id_truncated",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="outcome",
            field=models.CharField(
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
        migrations.AlterField(
            model_name="todoattempt",
            name="summary_bytes",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="todoattempt",
            name="summary_truncated",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
