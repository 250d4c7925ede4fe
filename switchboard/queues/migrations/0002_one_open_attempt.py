"""At most one open attempt per todo, enforced by PostgreSQL.

Written as SQL: Django's ExclusionConstraint only builds GiST/SP-GiST indexes, which would need
btree_gist for an equality on a bigint, and the embedded PostgreSQL ships no contrib
extensions. A btree EXCLUDE with only `=` is the same as a partial unique index, except that it
can be DEFERRABLE: a claim that closes a lapsed attempt and opens the next one in a single
statement is checked at commit.
"""

from django.db import migrations

FORWARD = """
ALTER TABLE todo_attempts
  ADD CONSTRAINT todo_attempts_one_open
  EXCLUDE USING btree (todo_id WITH =) WHERE (ended_at IS NULL)
  DEFERRABLE INITIALLY DEFERRED;
"""

BACKWARD = "ALTER TABLE todo_attempts DROP CONSTRAINT todo_attempts_one_open;"


class Migration(migrations.Migration):
    dependencies = [("queues", "0001_initial")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
