"""Test settings: pick the PostgreSQL to test against before the base settings read it.

Order: DATABASE_URL if set; a testcontainers PostgreSQL when
SWITCHBOARD_TEST_DB=container (needs Docker); else an embedded PostgreSQL from the pgserver
wheel in a temporary folder, deleted when the test run ends.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("SWITCHBOARD_DEV", "1")
# Outside a checkout, and with no SWITCHBOARD_DATA_DIR, Switchboard keeps its data in the
# user's data folder (switchboard/embedded.py, data_dir): under the tests (and the commands
# they start), a throwaway one, never the real home's.
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="switchboard-test-home-")
atexit.register(shutil.rmtree, os.environ["XDG_DATA_HOME"], ignore_errors=True)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


if not os.environ.get("DATABASE_URL"):
    if os.environ.get("SWITCHBOARD_TEST_DB") == "container":
        from testcontainers.postgres import PostgresContainer

        _container = PostgresContainer("postgres:16-alpine", driver=None)
        _container.start()
        os.environ["DATABASE_URL"] = _container.get_connection_url()
    else:
        from switchboard import embedded

        _tmp = Path(tempfile.mkdtemp(prefix="switchboard-test-pg-"))
        # Registered before the server's own clean-up, so run after it: the folder goes too
        # once pgserver has deleted the cluster inside it (kept if anything is still there).
        atexit.register(_remove_if_empty, _tmp)
        os.environ["DATABASE_URL"] = embedded.start(_tmp / "pgdata", cleanup_mode="delete")
        # A throwaway cluster, deleted when the run ends: no commit waits for the disk (the
        # tests commit tens of thousands of times; durability across a lost machine is not
        # what they test, and a killed process still leaves its writes in the OS's cache).
        embedded.psql(
            "ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET synchronous_commit = off;"
            " ALTER SYSTEM SET full_page_writes = off; SELECT pg_reload_conf();"
        )

from switchboard.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The live server answers each request on a thread of its own; a connection kept open there
# (CONN_MAX_AGE) would outlive the test and keep the test database from being dropped.
DATABASES["default"]["CONN_MAX_AGE"] = 0  # noqa: F405
# No pool in tests: pytest-django's per-test transactions want plain connections.
DATABASES["default"]["OPTIONS"].pop("pool", None)  # noqa: F405
# Tests serve static files from the finders; there is no collectstatic output to scan.
WHITENOISE_AUTOREFRESH = True
WHITENOISE_USE_FINDERS = True
# The browser tests catch what the Content Security Policy refuses: enforce it here even when
# the shell running the tests has DEBUG=1 (which only reports it).
SECURE_CSP = SECURE_CSP or SECURE_CSP_REPORT_ONLY  # noqa: F405
SECURE_CSP_REPORT_ONLY = {}
