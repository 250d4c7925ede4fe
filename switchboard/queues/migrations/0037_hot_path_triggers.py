"""What the claim and the complete pay for in triggers, back near what it was before the
waits (docs/benchmarks.md, "Waits"). The three row triggers that keep the waits' counts
(todos_after_ended, todos_children_counted, todos_key_claims) become one, todos_waits_follow:
every UPDATE of todos prepares each row trigger's WHEN again, and the claim and the complete
paid for three they never fire. The Board's statement trigger plans a statement of a few rows
once, nested loops on; only a statement of many is planned for its count, without them.
Loaded from queues/schema/functions.sql; a database that 0036 made today has both already
(loading again is harmless)."""

from django.db import migrations

from switchboard.queues import schema

_DROP = """
DROP TRIGGER IF EXISTS todos_after_ended ON todos;
DROP TRIGGER IF EXISTS todos_children_counted ON todos;
DROP TRIGGER IF EXISTS todos_key_claims ON todos;
DROP FUNCTION IF EXISTS switchboard_after_ended();
DROP FUNCTION IF EXISTS switchboard_children_counted();
DROP FUNCTION IF EXISTS switchboard_key_claims();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0036_todos_that_wait"),
    ]

    operations = [
        migrations.RunSQL(_DROP, migrations.RunSQL.noop),
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
        migrations.RunSQL(schema.function("switchboard_board_todos"), migrations.RunSQL.noop),
    ]
