"""The bench's database: a dedicated ``switchboard_bench`` database, never a developer's data.

With ``DATABASE_URL`` set, the bench creates (drops and re-creates) a database named
``switchboard_bench`` on that server and points at it. Without it, a throwaway embedded
PostgreSQL is started in a temporary folder (deleted when the bench exits) and the same
database is created there. Either way ``DATABASE_URL`` in this process's environment names
``switchboard_bench`` before Django is set up, so the worker processes (spawned later) inherit
it and attach to the same database.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
BENCH_DB = "switchboard_bench"


def _ensure_path() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def prepare_environment() -> dict:
    """Pick the server, create the bench database, export DATABASE_URL. Returns facts for the
    ledger (which server, whether it is embedded). Call once, in the parent, before Django."""
    _ensure_path()
    os.environ["SWITCHBOARD_DEV"] = "1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "switchboard.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    from switchboard import dburl

    url = os.environ.get("DATABASE_URL", "").strip()
    embedded = not url
    if embedded:
        from switchboard import embedded as emb

        tmp = Path(tempfile.mkdtemp(prefix="switchboard-bench-"))
        # Registered before the server starts, so it runs after pgserver's own exit hook
        # (which stops the server and deletes pgdata): the temp folder goes too.
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        url = emb.start(tmp / "pgdata", cleanup_mode="delete")

    settings = dburl.parse(url)
    admin_db = "postgres" if settings["NAME"] == BENCH_DB else settings["NAME"]
    _recreate(settings, admin_db)
    bench_url = dburl.build(settings, name=BENCH_DB)
    # dburl.build drops query options other than a socket host; keep them.
    extra = {k: v for k, v in settings["OPTIONS"].items()}
    if extra and not settings["HOST"].startswith("/"):
        bench_url += "?" + "&".join(f"{k}={quote(str(v))}" for k, v in extra.items())
    os.environ["DATABASE_URL"] = bench_url
    return {
        "embedded": embedded,
        "database": BENCH_DB,
        "host": settings["HOST"] if not settings["HOST"].startswith("/") else "unix socket",
    }


def conninfo(settings: dict, dbname: str) -> str:
    """A libpq connection string for ``dbname`` on the server of Django-style ``settings``
    (``switchboard.dburl.parse``'s dict)."""
    from psycopg.conninfo import make_conninfo

    kwargs = {"dbname": dbname}
    for key, name in (
        ("USER", "user"),
        ("PASSWORD", "password"),
        ("HOST", "host"),
        ("PORT", "port"),
    ):
        if settings.get(key):
            kwargs[name] = settings[key]
    kwargs.update(settings.get("OPTIONS") or {})
    return make_conninfo(**kwargs)


def _connect(settings: dict, dbname: str):
    import psycopg

    return psycopg.connect(conninfo(settings, dbname), autocommit=True)


def _recreate(settings: dict, admin_db: str) -> None:
    with _connect(settings, admin_db) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


def drop_bench_database() -> None:
    """Remove the bench database (for a developer's server; the embedded one is deleted)."""
    from switchboard import dburl

    settings = dburl.parse(os.environ["DATABASE_URL"])
    try:
        with _connect(settings, "postgres") as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
    except Exception as exc:  # noqa: BLE001 - best effort at exit
        print(f"note: could not drop {BENCH_DB}: {exc}", file=sys.stderr)


def setup_django() -> None:
    """django.setup() in this process (parent or worker); DATABASE_URL must be exported."""
    _ensure_path()
    os.environ["SWITCHBOARD_DEV"] = "1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "switchboard.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    assert os.environ.get("DATABASE_URL", "").split("?")[0].endswith("/" + BENCH_DB), (
        "the bench only ever runs against its own database"
    )
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


BARE_DDL = """
CREATE TABLE IF NOT EXISTS bench_bare_jobs (
    id bigserial PRIMARY KEY,
    endpoint_id bigint NOT NULL,
    priority smallint NOT NULL DEFAULT 0,
    state text NOT NULL,
    lease_expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    result jsonb
);
CREATE INDEX IF NOT EXISTS bench_bare_jobs_pending
    ON bench_bare_jobs (endpoint_id, priority DESC, created_at, id) WHERE state = 'pending';

-- The calibration loop: the bare table plus an attempts table written by hand-written SQL
-- (one row per claim, closed by the complete), the shape the issue's 0.84-0.92 refers to.
CREATE TABLE IF NOT EXISTS bench_hand_jobs (
    id bigserial PRIMARY KEY,
    endpoint_id bigint NOT NULL,
    priority smallint NOT NULL DEFAULT 0,
    state text NOT NULL,
    attempt int NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    result jsonb
);
CREATE INDEX IF NOT EXISTS bench_hand_jobs_pending
    ON bench_hand_jobs (endpoint_id, priority DESC, created_at, id) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS bench_hand_attempts (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL REFERENCES bench_hand_jobs (id) ON DELETE CASCADE,
    seq int NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,
    outcome text NOT NULL DEFAULT '',
    result jsonb,
    UNIQUE (job_id, seq)
);
"""


def create_bench_tables() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(BARE_DDL)


def server_facts() -> dict:
    from django.db import connection

    names = (
        "server_version",
        "shared_buffers",
        "synchronous_commit",
        "fsync",
        "plan_cache_mode",
        "max_connections",
        "jit",
    )
    facts = {}
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(f"SHOW {name}")
            facts[name] = cursor.fetchone()[0]
    facts["django_cursor"] = (
        type(connection.connection.cursor()).__name__ if connection.connection else None
    )
    facts["server_side_binding"] = bool(
        connection.settings_dict.get("OPTIONS", {}).get("server_side_binding")
    )
    return facts
