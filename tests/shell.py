"""The `switchboard` command as a user's shell runs it: the console script installed beside
this interpreter (pyproject: [project.scripts]) and the environment it runs in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from django.db import connection

from switchboard import dburl

SWITCHBOARD = str(Path(sys.executable).with_name("switchboard"))


def shell_env() -> dict[str, str]:
    """The environment of a user's shell pointed at the test database: committed rows only
    are visible to the subprocess, so the tests that use it run outside a test transaction."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DJANGO_SETTINGS_MODULE", "SWITCHBOARD_PASSWORD", "SECRET_KEY", "DEBUG"}
    }
    env["DATABASE_URL"] = dburl.build(connection.settings_dict)
    env["SWITCHBOARD_DEV"] = "1"
    return env
