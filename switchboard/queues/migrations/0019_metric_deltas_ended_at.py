"""A carried count remembers when its attempts ended (the first-fold double count).

A claim that pruned attempt rows the metrics fold had not counted left their counts in
``metric_deltas``, and took a KEY SHARE lock on the ``sweeper_status`` row to read the fold's
mark, so that a fold in progress (FOR UPDATE on that row) was waited out. With no row yet (a
new database: the sweeper makes it on its first pass) there was nothing to lock, so a first
fold running while such a claim was still open counted the pruned row, which it could still
see, and then took the carried count as well. Now each delta keeps the ``ended_at`` of its
attempts and the fold decides by that, as it does for the rows: counted if in its window,
dropped if before it (the row was counted while it was there), kept if after it. The claim
no longer locks anything to carry.

Deltas waiting at migration time were all uncounted: they get the fold's mark (or
-infinity), the start of the next fold's window, so the next fold counts them.
"""

from django.db import migrations, models

BACKFILL = """
UPDATE metric_deltas
   SET ended_at = COALESCE(
           (SELECT s.metrics_folded_until FROM sweeper_status s WHERE s.id = 1),
           '-infinity'::timestamptz)
"""


class Migration(migrations.Migration):
    dependencies = [("queues", "0018_todo_search_documents")]

    operations = [
        migrations.AddField(
            model_name="metricdelta",
            name="ended_at",
            field=models.DateTimeField(null=True),
            preserve_default=False,
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="metricdelta",
            name="ended_at",
            field=models.DateTimeField(),
        ),
    ]
