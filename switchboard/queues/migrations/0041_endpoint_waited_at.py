"""A freed key rings the doorbell only while a long-poll of its endpoint may be waiting:
``endpoints.waited_at``, marked by a long-poll about to wait, and the trigger
todos_waits_follow reading it (loaded from queues/schema/functions.sql)."""

from django.db import migrations, models

from switchboard.queues import schema


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0040_attempt_endpoint_unchecked"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="waited_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
    ]
