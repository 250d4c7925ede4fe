"""An attempt's summary words are stored on its row (issue 15: searches under 100 ms).

0015's ``todo_attempts_search`` indexed the expression ``to_tsvector('simple', summary)``. A
search for a common word read the whole of its GIN posting list, 70,000 attempts for one word
over 1,000,000, about 40 ms whatever the window of ids it was ANDed with. The Board now
checks the newest todos' attempts row by row first (queues.selectors.board_queue), which
needs the words on the row: computing them per row costs about 12 µs, reading them under 1.
So ``summary_document`` is a stored generated column, NULL without a summary (a claim's
insert and a close that reports none compute nothing), and the GIN index is rebuilt on it:
a close with a summary computes the words once, as the index expression did.

Adding a stored generated column rewrites ``todo_attempts`` under an ACCESS EXCLUSIVE lock:
36 s for 1,000,000 attempts on the bench machine. Plan the upgrade for a quiet moment.
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('queues', '0019_metric_deltas_ended_at'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='todoattempt',
            name='todo_attempts_search',
        ),
        migrations.AddField(
            model_name='todoattempt',
            name='summary_document',
            field=models.GeneratedField(db_persist=True, expression=models.Case(models.When(models.Q(('summary__gt', '')), then=django.contrib.postgres.search.SearchVector('summary', config='simple'))), output_field=django.contrib.postgres.search.SearchVectorField(null=True)),
        ),
        migrations.AddIndex(
            model_name='todoattempt',
            index=django.contrib.postgres.indexes.GinIndex(condition=models.Q(('summary__gt', '')), fields=['summary_document'], name='todo_attempts_search'),
        ),
    ]
