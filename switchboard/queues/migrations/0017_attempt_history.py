"""Cheaper attempt history (issue 13; docs/benchmarks.md, "ADR-0039's bar").

At most one open attempt per todo becomes a partial unique index instead of 0002's deferred
btree EXCLUDE constraint: the same rule, checked inside the index insert instead of by a
second index scan per insert. A claim that closes a lapsed attempt and opens the next one in
one statement opens it after the close (queues/sql/claim.py: ``opened`` reads ``lapsed``),
so the row-by-row check holds there too.

Not changed: todo_attempts keeps fillfactor 100. 85 was tried (room on each page for the
closed version of an attempt row, which is never a HOT update) and measured worse: every page
of the history then had room for one more row, so consecutive claims inserted into
different old pages, each its first write since the checkpoint (a full-page image: 7 KB of
WAL per claim at 200,000 attempts; docs/benchmarks.md).
"""

from django.db import migrations, models

EXCLUDE = """
ALTER TABLE todo_attempts
  ADD CONSTRAINT todo_attempts_one_open
  EXCLUDE USING btree (todo_id WITH =) WHERE (ended_at IS NULL)
  DEFERRABLE INITIALLY DEFERRED;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0016_endpoint_pause"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE todo_attempts DROP CONSTRAINT todo_attempts_one_open;", EXCLUDE
        ),
        migrations.AddConstraint(
            model_name="todoattempt",
            constraint=models.UniqueConstraint(
                fields=["todo"],
                condition=models.Q(("ended_at__isnull", True)),
                name="todo_attempts_one_open",
            ),
        ),
    ]
