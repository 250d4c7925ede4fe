"""Keys counted from their todos, not a counter (docs/ledger.md, "Keys"; docs/benchmarks.md,
"Keys counted from their todos"): a keyed claim under max_claimed_per_key counts its key's
claimed todos (a partial index, todos_key_claimed) under an advisory lock of the key, and an
end writes nothing. todo_key_claims and the two updates of a key's row a claimed todo cost
go, and with them the row an end held to its commit (0044's reason). The trigger
todos_waits_follow is loaded from queues/schema/functions.sql.
"""

from django.db import migrations, models

from switchboard.queues import schema


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0044_keyed_then_never_waits_holding_a_key"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="todo",
            index=models.Index(
                models.F("endpoint"),
                models.F("key"),
                name="todos_key_claimed",
                condition=models.Q(state="claimed") & ~models.Q(key=""),
            ),
        ),
        migrations.RunSQL(schema.function("switchboard_waits_follow"), migrations.RunSQL.noop),
        migrations.DeleteModel(name="KeyClaims"),
    ]
