"""Keys, cheaper to count (docs/benchmarks.md, "Keys, a fourth time"):

- A keyed claim counts its key with an UPDATE first, an INSERT only for the key's first claim:
  the trigger todos_waits_follow (loaded from queues/schema/functions.sql). INSERT … ON
  CONFLICT DO UPDATE locked the key's row and logged the lock, a WAL record more each claim.
- todo_key_claims keeps a tenth of each page for its first rows (fillfactor 10). A server with
  a few hundred keys kept them on one or two pages that every claim and end of every keyed todo
  updated (a version more each time), and at that size the planner read the counter by
  scanning those pages, every version on them, in each claim's pick and each count's update.
  Spread out, the same rows are read by their primary key once there are about 60 of them.
"""

from django.db import migrations

from switchboard.queues import schema


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0042_todo_unclaimed"),
    ]

    operations = [
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
        migrations.RunSQL(
            "ALTER TABLE todo_key_claims SET (fillfactor = 10)",
            "ALTER TABLE todo_key_claims RESET (fillfactor)",
        ),
    ]
