"""Full-text search over todos and attempt summaries (issue 15).

Two GIN expression indexes on PostgreSQL's built-in full-text search (no extension: the
embedded PostgreSQL has no contrib), on the very expressions the Board's search matches
(queues.models TODO_SEARCH_VECTOR, SUMMARY_SEARCH_VECTOR):

- ``todos_search``: ``to_tsvector('simple', title || ' ' || body)``;
- ``todo_attempts_search``: ``to_tsvector('simple', summary)``, partial (``summary > ''``), so
  a claim and a close without a summary never touch it.

Built CONCURRENTLY (so the migration is not atomic): agents keep claiming and closing while a
large ledger's indexes are built, instead of waiting behind a lock on either table.
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("queues", "0014_event_kinds"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="todo",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.search.SearchVector("title", "body", config="simple"),
                name="todos_search",
            ),
        ),
        AddIndexConcurrently(
            model_name="todoattempt",
            index=django.contrib.postgres.indexes.GinIndex(
                django.contrib.postgres.search.SearchVector("summary", config="simple"),
                condition=models.Q(("summary__gt", "")),
                name="todo_attempts_search",
            ),
        ),
    ]
