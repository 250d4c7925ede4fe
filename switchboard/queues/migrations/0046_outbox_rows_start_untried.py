"""An outbox row starts due now and untried by the table's own defaults (attempts 0, no error,
as created_at and next_attempt_at already were), so the four outbox triggers name only what
they send, where and why; they are loaded again from queues/schema/functions.sql."""

from django.db import migrations, models

from switchboard.queues import schema

TRIGGERS = (
    "switchboard_outbox_dead_letter",
    "switchboard_outbox_doorbell",
    "switchboard_outbox_task_push",
    "switchboard_outbox_todo_waiting",
)


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0045_keys_counted_from_their_todos"),
    ]

    operations = [
        migrations.AlterField(
            model_name="delivery",
            name="attempts",
            field=models.IntegerField(db_default=0),
        ),
        migrations.AlterField(
            model_name="delivery",
            name="last_error",
            field=models.CharField(blank=True, db_default="", max_length=500),
        ),
        *(migrations.RunSQL(schema.function(name), migrations.RunSQL.noop) for name in TRIGGERS),
    ]
