"""Todos that wait for todos (issue 44): ``after`` (todo_after, with the todo's after_policy,
after_total, after_left and has_dependents), children (``parent``, children_total,
children_open), keys (``key``, the endpoint's max_claimed_per_key and max_claimed,
todo_key_claims), schedules (schedules, and the todo's schedule slot), the dead-letter reason
``after_ended``, the waits ``todos`` and ``children``, and their audit kinds. The triggers
that keep the counts are loaded from queues/schema/functions.sql."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models

from switchboard.queues import schema


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0035_todo_waiting_event'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='KeyClaims',
            fields=[
                ('pk', models.CompositePrimaryKey('endpoint', 'key', blank=True, editable=False, primary_key=True, serialize=False)),
                ('endpoint', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='queues.endpoint')),
                ('key', models.CharField(max_length=200)),
                ('claimed', models.IntegerField(db_default=0)),
            ],
            options={
                'db_table': 'todo_key_claims',
            },
        ),
        migrations.CreateModel(
            name='Schedule',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('cron', models.CharField(blank=True, max_length=100)),
                ('timezone', models.CharField(default='UTC', max_length=64)),
                ('interval_seconds', models.IntegerField(blank=True, null=True)),
                ('title_template', models.CharField(max_length=500)),
                ('body_template', models.TextField(blank=True)),
                ('priority', models.SmallIntegerField(default=0)),
                ('max_attempts', models.SmallIntegerField(blank=True, null=True)),
                ('catch_up', models.CharField(choices=[('none', 'None'), ('latest', 'Latest')], default='none', max_length=8)),
                ('paused_at', models.DateTimeField(blank=True, null=True)),
                ('next_run_at', models.DateTimeField(blank=True, null=True)),
                ('last_run_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'db_table': 'schedules',
            },
        ),
        migrations.CreateModel(
            name='TodoAfter',
            fields=[
                ('pk', models.CompositePrimaryKey('todo', 'after', blank=True, editable=False, primary_key=True, serialize=False)),
                ('todo', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.DB_CASCADE, related_name='+', to='queues.todo')),
                ('after', models.ForeignKey(on_delete=django.db.models.deletion.DB_CASCADE, related_name='+', to='queues.todo')),
                ('ended', models.CharField(blank=True, db_default='', max_length=16)),
            ],
            options={
                'db_table': 'todo_after',
            },
        ),
        migrations.RemoveConstraint(
            model_name='todoevent',
            name='todo_events_kind_known',
        ),
        migrations.AddField(
            model_name='endpoint',
            name='max_claimed',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='endpoint',
            name='max_claimed_per_key',
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='todo',
            name='after_left',
            field=models.IntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name='todo',
            name='after_policy',
            field=models.CharField(choices=[('all_done', 'All Done'), ('any_end', 'Any End')], db_default='all_done', max_length=16),
        ),
        migrations.AddField(
            model_name='todo',
            name='after_total',
            field=models.IntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name='todo',
            name='children_open',
            field=models.IntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name='todo',
            name='children_total',
            field=models.IntegerField(db_default=0),
        ),
        migrations.AddField(
            model_name='todo',
            name='has_dependents',
            field=models.BooleanField(db_default=False),
        ),
        migrations.AddField(
            model_name='todo',
            name='key',
            field=models.CharField(blank=True, db_default='', max_length=200),
        ),
        migrations.AddField(
            model_name='todo',
            name='parent',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.DB_SET_NULL, related_name='children', to='queues.todo'),
        ),
        migrations.AddField(
            model_name='todo',
            name='scheduled_for',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='todo',
            name='dead_letter_reason',
            field=models.CharField(blank=True, choices=[('failed', 'Failed'), ('reaped', 'Reaped'), ('lease_expired', 'Lease Expired'), ('revoked', 'Revoked'), ('unanswered', 'Unanswered'), ('after_ended', 'After Ended')], max_length=16),
        ),
        migrations.AlterField(
            model_name='todo',
            name='waiting_for',
            field=models.CharField(blank=True, choices=[('people', 'People'), ('todos', 'Todos'), ('children', 'Children')], db_default='', max_length=16),
        ),
        migrations.AlterField(
            model_name='todoevent',
            name='kind',
            field=models.CharField(choices=[('create', 'Create'), ('claim', 'Claim'), ('extend', 'Extend'), ('release', 'Release'), ('complete', 'Complete'), ('fail', 'Fail'), ('cancel', 'Cancel'), ('retry_now', 'Retry Now'), ('rerun', 'Rerun'), ('take_over', 'Take Over'), ('answer', 'Answer'), ('unanswered', 'Unanswered'), ('revoke_dead_letter', 'Revoke Dead Letter'), ('start_now', 'Start Now'), ('cancel_child', 'Cancel Child'), ('schedule_add', 'Schedule Add'), ('schedule_edit', 'Schedule Edit'), ('schedule_pause', 'Schedule Pause'), ('schedule_resume', 'Schedule Resume'), ('schedule_remove', 'Schedule Remove'), ('vend', 'Endpoint Vend'), ('rotate', 'Endpoint Rotate'), ('endpoint_revoke', 'Endpoint Revoke'), ('notify_url', 'Notify Url'), ('notify_secret_rotate', 'Notify Secret Rotate'), ('pause', 'Endpoint Pause'), ('resume', 'Endpoint Resume'), ('limits', 'Endpoint Limits'), ('member_add', 'Member Add'), ('member_remove', 'Member Remove'), ('member_invite', 'Member Invite'), ('invite_accept', 'Invite Accept'), ('invite_decline', 'Invite Decline'), ('invite_revoke', 'Invite Revoke'), ('sink_add', 'Sink Add'), ('sink_activate', 'Sink Activate'), ('sink_deactivate', 'Sink Deactivate'), ('sink_remove', 'Sink Remove')], max_length=32),
        ),
        migrations.AddConstraint(
            model_name='todoevent',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['create', 'claim', 'extend', 'release', 'complete', 'fail', 'cancel', 'retry_now', 'rerun', 'take_over', 'answer', 'unanswered', 'revoke_dead_letter', 'start_now', 'cancel_child', 'schedule_add', 'schedule_edit', 'schedule_pause', 'schedule_resume', 'schedule_remove', 'vend', 'rotate', 'endpoint_revoke', 'notify_url', 'notify_secret_rotate', 'pause', 'resume', 'limits', 'member_add', 'member_remove', 'member_invite', 'invite_accept', 'invite_decline', 'invite_revoke', 'sink_add', 'sink_activate', 'sink_deactivate', 'sink_remove'])), name='todo_events_kind_known'),
        ),
        migrations.AddField(
            model_name='schedule',
            name='created_by',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.DB_SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='schedule',
            name='endpoint',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='schedules', to='queues.endpoint'),
        ),
        migrations.AddField(
            model_name='schedule',
            name='last_todo',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.DB_SET_NULL, related_name='+', to='queues.todo'),
        ),
        migrations.AddField(
            model_name='todo',
            name='schedule',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.DB_SET_NULL, related_name='todos', to='queues.schedule'),
        ),
        migrations.AddIndex(
            model_name='todo',
            index=models.Index(models.F('parent'), condition=models.Q(('parent__isnull', False)), name='todos_parent'),
        ),
        migrations.AddIndex(
            model_name='todo',
            index=models.Index(models.F('endpoint'), models.F('key'), condition=models.Q(('key', ''), _negated=True), name='todos_key'),
        ),
        migrations.AddConstraint(
            model_name='todo',
            constraint=models.UniqueConstraint(condition=models.Q(('schedule__isnull', False)), fields=('schedule', 'scheduled_for'), name='todos_schedule_slot'),
        ),
        migrations.AddConstraint(
            model_name='keyclaims',
            constraint=models.CheckConstraint(condition=models.Q(('claimed__gte', 0)), name='key_claims_count'),
        ),
        migrations.AddIndex(
            model_name='schedule',
            index=models.Index(models.F('next_run_at'), condition=models.Q(('paused_at__isnull', True)), name='schedules_due'),
        ),
        migrations.AddConstraint(
            model_name='schedule',
            constraint=models.UniqueConstraint(fields=('endpoint', 'name'), name='schedules_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='schedule',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('cron', ''), ('interval_seconds__gte', 60)), models.Q(models.Q(('cron', ''), _negated=True), ('interval_seconds__isnull', True)), _connector='OR'), name='schedules_cron_or_interval'),
        ),
        migrations.AddIndex(
            model_name='todoafter',
            index=models.Index(models.F('after'), condition=models.Q(('ended', '')), name='todo_after_unmarked'),
        ),
        # Once three triggers (after_ended, children_counted, key_claims); 0037 made them
        # one, and a database made today gets the one here too.
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
        # The Board's statement trigger without nested loops (many rows a statement).
        migrations.RunSQL(schema.function("switchboard_board_todos"), migrations.RunSQL.noop),
    ]
