"""A complete with then under max_claimed_per_key no longer waits holding a key's row
(docs/ledger.md, "Keys"): the trigger todos_waits_follow (loaded from
queues/schema/functions.sql) takes the claimed key's row without waiting once its transaction
holds an ended key's row. Two such statements that each ended the key the other claimed waited
for each other until deadlock_timeout: 4 keys under a limit of 2, four workers completing with
then, drained 177-247 todos a second against 868-1,242 for the same todos claimed and
completed in two calls; 939-998 with this (docs/benchmarks.md, "A keyed then that waited
holding a key").
"""

from django.db import migrations

from switchboard.queues import schema


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0043_keys_cheaper_to_count"),
    ]

    operations = [
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
    ]
