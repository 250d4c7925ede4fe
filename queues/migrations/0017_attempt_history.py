"""Cheaper attempt history (issue 13; docs/benchmarks.md, "ADR-0039's bar").

At most one open attempt per todo becomes a partial unique index instead of 0002's deferred
btree EXCLUDE constraint: the same rule, checked inside the index insert instead of by a
second index scan per insert. A claim that closes a lapsed attempt and opens the next one in
one statement opens it after the close (queues/sql/claim.py: ``opened`` reads ``lapsed``),
so the row-by-row check holds there too.

todo_attempts gets fillfactor 85: every attempt row is rewritten once, when it closes (never
a HOT update: ``ended_at`` is indexed), and the room left on each page lets the closed
version stay on its page (one page touched, and a smaller WAL record) while the claims that
filled the page are still open.
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
        migrations.RunSQL(
            "ALTER TABLE todo_attempts SET (fillfactor = 85);",
            "ALTER TABLE todo_attempts RESET (fillfactor);",
        ),
    ]
