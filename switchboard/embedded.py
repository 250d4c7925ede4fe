"""The embedded PostgreSQL: started from the ``pgserver`` wheel when no DATABASE_URL is set.

The data folder is kept between runs. pgserver counts the processes holding a handle on one
data folder and stops the server cleanly (``pg_ctl stop``) when the last of them exits; child
processes that only receive ``DATABASE_URL`` (gunicorn workers, the sweeper) hold no handle.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from pathlib import Path

log = logging.getLogger(__name__)

_server = None


def data_dir() -> Path:
    """Where Switchboard keeps its data (the embedded PostgreSQL, the first sign-in, the
    collected static files): ``SWITCHBOARD_DATA_DIR`` when set; ``./var`` in a checkout of
    the repository (``make run``'s, as the README says); else the user's data folder,
    ``$XDG_DATA_HOME/switchboard`` (``~/.local/share/switchboard``), or
    ``~/Library/Application Support/switchboard`` on macOS and ``%LOCALAPPDATA%\\switchboard``
    on Windows: an installed ``switchboard up`` finds the same data from any folder."""
    chosen = os.environ.get("SWITCHBOARD_DATA_DIR")
    if chosen:
        return Path(chosen).resolve()
    if Path("manage.py").is_file() and Path("switchboard", "settings.py").is_file():
        return Path("var").resolve()
    return user_data_dir()


def user_data_dir() -> Path:
    """The per-user data folder of the platform's convention (see ``data_dir``)."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "switchboard"
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
        return Path(base) / "switchboard"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "switchboard"


def start(pgdata: Path | None = None, *, cleanup_mode: str = "stop") -> str:
    """Start (or attach to) the embedded server and return its URL."""
    global _server
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    pgdata = pgdata or data_dir() / "pgdata"
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _forget_dead_handles(pgdata)
    _server = pgserver.get_server(pgdata, cleanup_mode=cleanup_mode)
    # pgserver's URI uses the 'postgres' database; ours is 'switchboard'.
    exists = _server.psql("SELECT 1 FROM pg_database WHERE datname = 'switchboard';")
    if "(1 row)" not in exists:
        _server.psql("CREATE DATABASE switchboard;")
    return _server.get_uri("switchboard")


def psql(command: str) -> str:
    """Run ``command`` through psql on the embedded server this process started."""
    assert _server is not None, "start() first"
    return _server.psql(command)


def is_held() -> bool:
    """Whether this process holds a handle on the embedded server."""
    return _server is not None


def stop() -> None:
    """Release this process's handle now (the server stops if it was the last)."""
    global _server
    if _server is not None:
        _server._cleanup()
        _server = None


def _forget_dead_handles(pgdata: Path) -> None:
    """Drop the pids of processes that died without releasing their handle (SIGKILL, a
    crash). pgserver never prunes them, so one stale pid would keep every later run from
    stopping the server on exit."""
    import psutil
    from pgserver.postgres_server import PostgresServer
    from pgserver.utils import DiskList

    handles = DiskList(pgdata.resolve() / ".handle_pids.json")
    with PostgresServer._lock:
        pids = handles.get()
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            log.info("forgetting embedded PostgreSQL handles of exited processes")
            handles.put(alive)
