"""A keyed claim counts its key with an UPDATE first, an INSERT only for the key's first claim:
the trigger todos_waits_follow (loaded from queues/schema/functions.sql). INSERT … ON CONFLICT
DO UPDATE locked the key's row and logged the lock, a WAL record more each keyed claim."""

from django.db import migrations

from switchboard.queues import schema


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0042_todo_unclaimed"),
    ]

    operations = [
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
    ]
