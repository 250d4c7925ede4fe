"""Cheaper attempt history (issue 13)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0016_endpoint_pause"),
    ]

    operations = []
