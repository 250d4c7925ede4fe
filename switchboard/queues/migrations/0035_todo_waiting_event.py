"""A todo that starts waiting on people tells them (issue 43): the outbox's kind
``todo.waiting``, written by the trigger ``todo_questions_outbox_waiting`` when a question is
recorded, one row per active dead-letter sink of the team and one to the notify URL of the
endpoint that may answer (a row names its sink or its endpoint, never both); and the index of
ended questions by ``ended_at`` that the metrics fold and queue health read (answered,
unanswered, withdrawn, the time to answer). The function is loaded from
queues/schema/functions.sql."""

from django.db import migrations, models

from switchboard.queues import schema


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0034_ask_a_person'),
    ]

    operations = [
        migrations.AlterField(
            model_name='delivery',
            name='kind',
            field=models.CharField(choices=[('dead_letter', 'Dead Letter'), ('doorbell', 'Doorbell'), ('todo.waiting', 'Todo Waiting')], max_length=16),
        ),
        migrations.AddIndex(
            model_name='todoquestion',
            index=models.Index(models.F('ended_at'), condition=models.Q(('ended_at__isnull', False)), name='todo_questions_ended'),
        ),
        migrations.AddConstraint(
            model_name='delivery',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('kind', 'todo.waiting'), _negated=True), ('sink__isnull', True), ('endpoint__isnull', True), _connector='OR'), name='outbox_waiting_one_target'),
        ),
        migrations.RunSQL(
            schema.function("switchboard_outbox_todo_waiting"), migrations.RunSQL.noop
        ),
    ]
