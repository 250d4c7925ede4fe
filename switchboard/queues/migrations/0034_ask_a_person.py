"""A todo can wait for a person's answer (issue 43): the state ``waiting`` (with
``waiting_for``), the outcome ``asked`` and disposition ``waiting`` of the attempt that asked,
the ``answer`` verb, the audit kinds ``answer`` and ``unanswered``, the dead-letter reason
``unanswered``, and ``todo_questions``: each question, what it takes for an answer, and how it
ended. The row rules and the trigger that ends a wait are loaded from
queues/schema/functions.sql."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models

from switchboard.queues import schema


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0033_taken_over'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='TodoQuestion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('attempt_seq', models.IntegerField()),
                ('asked_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('text', models.TextField()),
                ('text_truncated', models.BooleanField(default=False)),
                ('text_bytes', models.IntegerField(default=0)),
                ('choices', models.JSONField(blank=True, null=True)),
                ('answer_schema', models.JSONField(blank=True, null=True)),
                ('answer_within_seconds', models.IntegerField(blank=True, null=True)),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('on_no_answer', models.CharField(choices=[('requeue', 'Requeue'), ('dead_letter', 'Dead Letter')], default='requeue', max_length=16)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('ending', models.CharField(blank=True, choices=[('answered', 'Answered'), ('unanswered', 'Unanswered'), ('withdrawn', 'Withdrawn')], max_length=16)),
                ('answer', models.JSONField(blank=True, null=True)),
            ],
            options={
                'db_table': 'todo_questions',
            },
        ),
        migrations.RemoveConstraint(
            model_name='endpoint',
            name='endpoints_verbs_known',
        ),
        migrations.RemoveConstraint(
            model_name='todoevent',
            name='todo_events_kind_known',
        ),
        migrations.AddField(
            model_name='todo',
            name='waiting_for',
            field=models.CharField(blank=True, choices=[('people', 'People')], db_default='', max_length=16),
        ),
        migrations.AlterField(
            model_name='todo',
            name='dead_letter_reason',
            field=models.CharField(blank=True, choices=[('failed', 'Failed'), ('reaped', 'Reaped'), ('lease_expired', 'Lease Expired'), ('revoked', 'Revoked'), ('unanswered', 'Unanswered')], max_length=16),
        ),
        migrations.AlterField(
            model_name='todo',
            name='state',
            field=models.CharField(choices=[('pending', 'Pending'), ('claimed', 'Claimed'), ('retry_wait', 'Retry Wait'), ('done', 'Done'), ('dead', 'Dead'), ('canceled', 'Canceled'), ('waiting', 'Waiting')], default='pending', max_length=16),
        ),
        migrations.AlterField(
            model_name='todoattempt',
            name='disposition',
            field=models.CharField(blank=True, choices=[('done', 'Done'), ('retry_scheduled', 'Retry Scheduled'), ('requeued', 'Requeued'), ('dead_lettered', 'Dead Lettered'), ('canceled', 'Canceled'), ('taken_over', 'Taken Over'), ('waiting', 'Waiting')], max_length=16),
        ),
        migrations.AlterField(
            model_name='todoattempt',
            name='outcome',
            field=models.CharField(blank=True, choices=[('completed', 'Completed'), ('failed', 'Failed'), ('released', 'Released'), ('lease_expired', 'Lease Expired'), ('reaped', 'Reaped'), ('canceled', 'Canceled'), ('revoked', 'Revoked'), ('taken_over', 'Taken Over'), ('asked', 'Asked')], max_length=16),
        ),
        migrations.AlterField(
            model_name='todoevent',
            name='kind',
            field=models.CharField(choices=[('create', 'Create'), ('claim', 'Claim'), ('extend', 'Extend'), ('release', 'Release'), ('complete', 'Complete'), ('fail', 'Fail'), ('cancel', 'Cancel'), ('retry_now', 'Retry Now'), ('rerun', 'Rerun'), ('take_over', 'Take Over'), ('answer', 'Answer'), ('unanswered', 'Unanswered'), ('revoke_dead_letter', 'Revoke Dead Letter'), ('vend', 'Endpoint Vend'), ('rotate', 'Endpoint Rotate'), ('endpoint_revoke', 'Endpoint Revoke'), ('notify_url', 'Notify Url'), ('notify_secret_rotate', 'Notify Secret Rotate'), ('pause', 'Endpoint Pause'), ('resume', 'Endpoint Resume'), ('member_add', 'Member Add'), ('member_remove', 'Member Remove'), ('member_invite', 'Member Invite'), ('invite_accept', 'Invite Accept'), ('invite_decline', 'Invite Decline'), ('invite_revoke', 'Invite Revoke'), ('sink_add', 'Sink Add'), ('sink_activate', 'Sink Activate'), ('sink_deactivate', 'Sink Deactivate'), ('sink_remove', 'Sink Remove')], max_length=32),
        ),
        migrations.AddConstraint(
            model_name='endpoint',
            constraint=models.CheckConstraint(condition=models.Q(('verbs__contained_by', ['create_todo', 'list_todos', 'get_todo', 'claim', 'claim_next', 'heartbeat', 'complete', 'fail', 'release', 'cancel', 'answer'])), name='endpoints_verbs_known'),
        ),
        migrations.AddConstraint(
            model_name='todoevent',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['create', 'claim', 'extend', 'release', 'complete', 'fail', 'cancel', 'retry_now', 'rerun', 'take_over', 'answer', 'unanswered', 'revoke_dead_letter', 'vend', 'rotate', 'endpoint_revoke', 'notify_url', 'notify_secret_rotate', 'pause', 'resume', 'member_add', 'member_remove', 'member_invite', 'invite_accept', 'invite_decline', 'invite_revoke', 'sink_add', 'sink_activate', 'sink_deactivate', 'sink_remove'])), name='todo_events_kind_known'),
        ),
        migrations.AddField(
            model_name='todoquestion',
            name='answered_by_endpoint',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.DB_SET_NULL, related_name='+', to='queues.endpoint'),
        ),
        migrations.AddField(
            model_name='todoquestion',
            name='answered_by_user',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.DB_SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='todoquestion',
            name='todo',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.DB_CASCADE, related_name='questions', to='queues.todo'),
        ),
        migrations.AddIndex(
            model_name='todoquestion',
            index=models.Index(models.F('expires_at'), condition=models.Q(('ended_at__isnull', True), ('expires_at__isnull', False)), name='todo_questions_expiring'),
        ),
        migrations.AddConstraint(
            model_name='todoquestion',
            constraint=models.UniqueConstraint(fields=('todo', 'attempt_seq'), name='todo_questions_seq'),
        ),
        migrations.AddConstraint(
            model_name='todoquestion',
            constraint=models.UniqueConstraint(condition=models.Q(('ended_at__isnull', True)), fields=('todo',), name='todo_questions_open'),
        ),
        migrations.AddConstraint(
            model_name='todoquestion',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('ended_at__isnull', True), ('ending', '')), models.Q(('ended_at__isnull', False), ('ending__in', ['answered', 'unanswered', 'withdrawn'])), _connector='OR'), name='todo_questions_ending_valid'),
        ),
        migrations.AddConstraint(
            model_name='todoquestion',
            constraint=models.CheckConstraint(condition=models.Q(('choices__isnull', True), ('answer_schema__isnull', True), _connector='OR'), name='todo_questions_choices_or_schema'),
        ),
        migrations.RunSQL(schema.function("todos_valid"), migrations.RunSQL.noop),
        migrations.RunSQL(schema.function("todo_attempts_valid"), migrations.RunSQL.noop),
        migrations.RunSQL(schema.function("switchboard_wait_ended"), migrations.RunSQL.noop),
    ]
