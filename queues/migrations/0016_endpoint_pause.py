"""Pausing an endpoint and taking a todo over (issue 15)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0015_search"),
    ]

    operations = []
