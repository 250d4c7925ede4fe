"""A take-over says so: the agent's try a person took over from the Board ends with outcome
and disposition ``taken_over`` (it was written ``released`` / ``requeued``, though the todo
stayed claimed, by the person). The choices, and the attempts' row rules loaded from
queues/schema/functions.sql. Rows written before keep what they said."""

from django.db import migrations, models

from switchboard.queues import schema


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0032_board_notices_as_records'),
    ]

    operations = [
        migrations.AlterField(
            model_name='todo',
            name='dead_letter_reason',
            field=models.CharField(blank=True, choices=[('completed', 'Completed'), ('failed', 'Failed'), ('released', 'Released'), ('lease_expired', 'Lease Expired'), ('reaped', 'Reaped'), ('canceled', 'Canceled'), ('revoked', 'Revoked'), ('taken_over', 'Taken Over')], max_length=16),
        ),
        migrations.AlterField(
            model_name='todoattempt',
            name='disposition',
            field=models.CharField(blank=True, choices=[('done', 'Done'), ('retry_scheduled', 'Retry Scheduled'), ('requeued', 'Requeued'), ('dead_lettered', 'Dead Lettered'), ('canceled', 'Canceled'), ('taken_over', 'Taken Over')], max_length=16),
        ),
        migrations.AlterField(
            model_name='todoattempt',
            name='outcome',
            field=models.CharField(blank=True, choices=[('completed', 'Completed'), ('failed', 'Failed'), ('released', 'Released'), ('lease_expired', 'Lease Expired'), ('reaped', 'Reaped'), ('canceled', 'Canceled'), ('revoked', 'Revoked'), ('taken_over', 'Taken Over')], max_length=16),
        ),
        migrations.RunSQL(schema.function("todo_attempts_valid"), migrations.RunSQL.noop),
    ]
