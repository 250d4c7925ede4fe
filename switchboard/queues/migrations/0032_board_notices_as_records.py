"""The Board's notices say a record, not a string read by position: ``switchboard_board``
carries a BoardNotice as JSON (queues/notify/channels.py: ``team``, ``what`` — ``new``,
``ended``, ``changed``, ``endpoint`` or ``event`` — ``endpoint``, ``todo``), where it carried
``team:endpoint:todo:flag`` with one-letter flags. Both functions are loaded from
queues/schema/functions.sql (docs/ledger.md, "The schema in one place")."""

from django.db import migrations

from switchboard.queues import schema


class Migration(migrations.Migration):
    dependencies = [("queues", "0031_board_streams")]

    operations = [
        migrations.RunSQL(schema.function("switchboard_board_todos"), migrations.RunSQL.noop),
        migrations.RunSQL(schema.function("switchboard_board_changed"), migrations.RunSQL.noop),
    ]
