"""Fixtures for the crash tests: child processes that are always killed, the environment that
points them at the test database, raw connections, and a PostgreSQL of the test's own that
it may stop and start."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from switchboard import dburl
from tests.crash.harness import Procs

_NOT_INHERITED = {
    "DJANGO_SETTINGS_MODULE",
    "DATABASE_URL",
    "SECRET_KEY",
    "DEBUG",
    "SWITCHBOARD_PASSWORD",
    "SWITCHBOARD_DB_POOL_SIZE",  # production's default pool, whatever the caller's shell says
    "SWITCHBOARD_DB_POOL_TIMEOUT_SECONDS",
    "SWITCHBOARD_SWEEP_INTERVAL_SECONDS",
    "SWITCHBOARD_RETENTION_DAYS",
    "SWITCHBOARD_RETENTION_MAX_TERMINAL",
    "SWITCHBOARD_CLAIMS_PER_MINUTE",
}


def base_env() -> dict[str, str]:
    """A user's shell for the `switchboard` command, minus what each test sets itself."""
    env = {k: v for k, v in os.environ.items() if k not in _NOT_INHERITED}
    env["SWITCHBOARD_DEV"] = "1"
    env["LOG_LEVEL"] = "INFO"
    # A web worker's event loop blocked for a second says where (switchboard/watchdog.py).
    env["SWITCHBOARD_LOOP_WATCHDOG_SECONDS"] = "1"
    return env


@pytest.fixture
def procs(tmp_path):
    """Start children with ``procs.start``/``serve``/``agent``; all are SIGKILLed (as process
    groups) when the test ends, whatever happened."""
    registry = Procs(tmp_path)
    try:
        yield registry
    finally:
        registry.close()


@pytest.fixture
def test_db_url(transactional_db) -> str:
    """The test database as a URL for subprocesses (these tests commit: no test transaction)."""
    return dburl.build(connection.settings_dict)


@pytest.fixture
def crash_env(test_db_url) -> dict[str, str]:
    return {**base_env(), "DATABASE_URL": test_db_url}


@pytest.fixture
def raw_db(test_db_url):
    """Open extra psycopg connections to the test database (a lock holder, an observer);
    closed when the test ends so nothing keeps the database from being flushed."""
    opened: list[psycopg.Connection] = []

    def open_connection(*, autocommit: bool = True) -> psycopg.Connection:
        conn = psycopg.connect(test_db_url, autocommit=autocommit)
        opened.append(conn)
        return conn

    try:
        yield open_connection
    finally:
        for conn in opened:
            conn.close()


class DedicatedPostgres:
    """An embedded PostgreSQL (the pgserver wheel) in a temporary folder, for one test: it
    can be stopped and started again on the same data folder and socket, so a URL handed
    to a web process stays valid across the restart."""

    def __init__(self, root: Path) -> None:
        os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver
            from pgserver._commands import pg_ctl

        self._pg_ctl = pg_ctl
        self.root = root
        self.server = pgserver.get_server(root / "pgdata", cleanup_mode="delete")
        self.server.psql("CREATE DATABASE switchboard;")
        self.url = self.server.get_uri("switchboard")
        self.socket_dir = self.server.get_postmaster_info().socket_dir
        self.pgdata = self.server.pgdata
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """Fast shutdown: sessions are terminated, open transactions rolled back;
        ``immediate``: every process quits at once, as in a crash (recovery at the start)."""
        self._ctl(["-w", "-m", mode, "stop"])
        self.running = False

    def start(self) -> None:
        """Start again on the same data folder and the same socket directory (pgserver's
        own start-up arguments: no TCP, a Unix socket only)."""
        self._ctl(
            [
                "-w",
                "-o",
                '-h ""',
                "-o",
                f"-k {self.socket_dir}",
                "-l",
                str(self.pgdata / "log"),
                "start",
            ]
        )
        self.running = True

    def _ctl(self, args: list[str]) -> None:
        self._pg_ctl(args, pgdata=self.pgdata, user=self.server.system_user, timeout=60)

    def log(self) -> str:
        path = self.pgdata / "log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def close(self) -> None:
        try:
            self._ctl(["-w", "-m", "immediate", "stop"])
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass  # already stopped
        # pgserver's cleanup would stop the postmaster it started, long gone after a
        # restart; it only needs to drop our handle and, in "delete" mode, the folder.
        self.server._postmaster_info = None
        self.server._cleanup()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def dedicated_postgres():
    """One per test module: its tests share it (and a web process attached to it)."""
    # Not under pytest's tmp_path: pgserver runs PostgreSQL as its own system user when we
    # are root, and the socket path must stay short.
    root = Path(tempfile.mkdtemp(prefix="switchboard-crash-pg-"))
    pg = None
    try:
        pg = DedicatedPostgres(root)
        yield pg
    finally:
        if pg is not None:
            pg.close()
        shutil.rmtree(root, ignore_errors=True)
