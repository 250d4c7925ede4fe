"""Full-text search over todos and attempt summaries (issue 15)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0014_event_kinds"),
    ]

    operations = []
