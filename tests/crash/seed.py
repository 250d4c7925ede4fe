"""Prepare a fresh database for a crash test: migrate it, add a user (their personal team)
and vend an endpoint in it. Prints only the endpoint token. Reads DATABASE_URL.

    DATABASE_URL=… python tests/crash/seed.py AGENT_ID
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from switchboard.queues import endpoints  # noqa: E402

if __name__ == "__main__":
    call_command("migrate", verbosity=0, interactive=False)
    # A password only when asked (CRASH_PASSWORD): the Board tests sign in as this user.
    password = os.environ.get("CRASH_PASSWORD") or None
    user = get_user_model().objects.create_user(username="crash", password=password)
    _endpoint, token = endpoints.vend(user.teams.get(), sys.argv[1], verbs="all")
    print(token)
