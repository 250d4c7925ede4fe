"""A claim's pick passes over a todo claimed since its snapshot instead of locking it in
passing: the function switchboard_todo_unclaimed (loaded from queues/schema/functions.sql)."""

from django.db import migrations

from switchboard.queues import schema


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0041_endpoint_waited_at"),
    ]

    operations = [
        migrations.RunSQL(
            schema.function("switchboard_todo_unclaimed"),
            "DROP FUNCTION IF EXISTS switchboard_todo_unclaimed(bigint, integer)",
        ),
    ]
