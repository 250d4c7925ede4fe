"""A claimed todo with a key holds a place of its key's, 1 to the endpoint's
max_claimed_per_key, and the unique todos_key_slot (in place of the index todos_key_claimed)
keeps two claims out of one place: the keyed claim takes its place in its own statement, and
the claim-side half of the trigger todos_waits_follow (an advisory lock of the key and a
count, on every keyed claim) is gone. The trigger todos_key_slot finds a place for a claim
that did not take one (docs/ledger.md, "Keys"). Both functions are loaded from
queues/schema/functions.sql. The todos claimed now keep their places, numbered in the order
they were made."""

from django.conf import settings
from django.db import migrations, models

from switchboard.queues import schema

PLACES_OF_CLAIMED = """
UPDATE todos t
   SET key_slot = n.place
  FROM (SELECT c.id, row_number() OVER (PARTITION BY c.endpoint_id, c.key ORDER BY c.id) AS place
          FROM todos c
          JOIN endpoints e ON e.id = c.endpoint_id AND e.max_claimed_per_key IS NOT NULL
         WHERE c.state = 'claimed' AND c.key <> '') n
 WHERE t.id = n.id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0047_attempts_start_empty"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="todo",
            name="key_slot",
            field=models.IntegerField(blank=True, null=True),
        ),
        migrations.RunSQL(PLACES_OF_CLAIMED, migrations.RunSQL.noop),
        migrations.AddConstraint(
            model_name="todo",
            constraint=models.UniqueConstraint(
                condition=models.Q(("state", "claimed"), models.Q(("key", ""), _negated=True)),
                fields=("endpoint", "key", "key_slot"),
                name="todos_key_slot",
            ),
        ),
        migrations.RemoveIndex(
            model_name="todo",
            name="todos_key_claimed",
        ),
        migrations.RunSQL(schema.function("switchboard_key_slot"), migrations.RunSQL.noop),
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
    ]
