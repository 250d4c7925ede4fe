"""The bench's database, always its own ``switchboard_bench`` (on ``DATABASE_URL``'s server, or
a throwaway embedded PostgreSQL); statements on Django's connection; which code was measured;
local processes (spawned with a log; their CPU and memory, from /proc); named-query files."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BENCH_DB = "switchboard_bench"
_TICK = os.sysconf("SC_CLK_TCK")


def prepare_environment() -> dict:
    """Pick the server, (re)create the bench database and export DATABASE_URL naming it,
    once, in the parent, before Django: every process spawned later inherits it."""
    os.environ.update(SWITCHBOARD_DEV="1", DJANGO_SETTINGS_MODULE="switchboard.settings")
    RESULTS.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    from switchboard import dburl

    url = os.environ.get("DATABASE_URL", "").strip()
    if embedded := not url:
        from switchboard import embedded as emb

        tmp = Path(tempfile.mkdtemp(prefix="switchboard-bench-"))
        # Registered before the server starts, so it runs after pgserver's own exit hook
        # (which stops the server and deletes pgdata): the temp folder goes too.
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        url = emb.start(tmp / "pgdata", cleanup_mode="delete")
    settings = dburl.parse(url)
    recreate(BENCH_DB, settings)
    bench_url = dburl.build(settings, name=BENCH_DB)
    if (extra := settings["OPTIONS"]) and not settings["HOST"].startswith("/"):
        bench_url += "?" + "&".join(f"{k}={quote(str(v))}" for k, v in extra.items())
    os.environ["DATABASE_URL"] = bench_url
    return {"embedded": embedded, "database": BENCH_DB}


def conninfo(dbname: str | None = None, settings: dict | None = None) -> str:
    """A libpq connection string for ``dbname`` (default: the bench's) on the bench's server
    (or the server of Django-style ``settings``)."""
    from psycopg.conninfo import make_conninfo

    from switchboard import dburl

    settings = settings or dburl.parse(os.environ["DATABASE_URL"])
    kwargs = {
        k.lower(): settings[k] for k in ("USER", "PASSWORD", "HOST", "PORT") if settings.get(k)
    }
    options = settings.get("OPTIONS") or {}
    return make_conninfo(dbname=dbname or settings["NAME"], **kwargs, **options)


def connect(dbname: str | None = None):
    import psycopg

    return psycopg.connect(conninfo(dbname), autocommit=True)


def recreate(name: str, settings: dict | None = None, *, drop_only: bool = False) -> None:
    """Drop a bench database and make it anew (or only drop it: on a developer's server at
    the end; the embedded one is deleted whole)."""
    import psycopg

    try:
        with psycopg.connect(conninfo("postgres", settings), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            conn.execute("SELECT 1" if drop_only else f"CREATE DATABASE {name}")
    except Exception as exc:  # noqa: BLE001 - best effort at exit
        if not drop_only:
            raise
        print(f"note: could not drop {name}: {exc}", file=sys.stderr)


def setup_django() -> None:
    """django.setup() in this process (parent or worker); DATABASE_URL names the bench's."""
    assert os.environ["DATABASE_URL"].split("?")[0].endswith("/" + BENCH_DB)
    import django

    django.setup()


def named(path: Path) -> dict[str, str]:
    """A named-query file's statements (``-- name: <name>`` begins each, as procrastinate's),
    without their comment lines (a ``%`` there would read as a placeholder)."""
    parts = re.split(r"^-- name: (\w+)\n", path.read_text(), flags=re.M)
    return {
        name: "\n".join(line for line in body.strip().splitlines() if not line.startswith("--"))
        for name, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def rows(statement: str, params=None) -> list[tuple]:
    """Run one statement on Django's connection; its rows (none if it returns none)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def one(statement: str, params=None):
    """The first value of a statement's first row, if any."""
    return (rows(statement, params) or [(None,)])[0][0]


def wal_lsn() -> int:
    """The server's WAL position in bytes."""
    return one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")


def server_facts() -> dict:
    names = ("server_version", "shared_buffers", "synchronous_commit", "fsync", "jit")
    return {name: one(f"SHOW {name}") for name in names}


def git_state() -> dict:
    """HEAD, and the product's files changed but not committed (others may be editing)."""

    def git(*cmd: str) -> str:
        try:
            return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True).stdout
        except OSError:
            return ""

    status = git("status", "--porcelain", "--", "queues", "switchboard", "agents", "board")
    return {"head": git("rev-parse", "HEAD").strip() or "?", "dirty": len(status.splitlines())}


def code_line(git: dict) -> str:
    """'code 1a2b3c4d5e + 2 uncommitted files of the product'."""
    dirty = f" + {git['dirty']} uncommitted file(s) of the product" if git.get("dirty") else ""
    return f"code {git.get('head', '?')[:10]}{dirty}"


class Spawned:
    """``switchboard <args>`` (this tree's code) as a subprocess, ``env`` on the bench's, its
    output in ``log_path``; ended by its pid (SIGTERM: gunicorn's master stops its workers)."""

    def __init__(self, log_path: Path, *args: str, **env: str):
        here = Path(sys.executable).parent / "switchboard"
        program = str(here if here.exists() else ROOT / ".venv" / "bin" / "switchboard")
        # This tree's code: a venv's editable install may point at another checkout.
        env = {"SWITCHBOARD_DEV": "1", "LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT), **env}
        self.log_path, self._log = log_path, open(log_path, "wb")  # noqa: SIM115 - in stop()
        out = {"stdin": subprocess.DEVNULL, "stdout": self._log, "stderr": subprocess.STDOUT}
        self.proc = subprocess.Popen([program, *args], cwd=ROOT, env=os.environ | env, **out)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def pids(self) -> list[int]:
        return [self.proc.pid, *children(self.proc.pid)]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def cpu_of(pids) -> dict[int, float]:
    """utime + stime in seconds of each local process still there."""
    return {pid: (int(s[11]) + int(s[12])) / _TICK for pid in pids if (s := _stat(pid))}


def rss_mib(pids) -> float:
    """Resident memory of the local processes still there, in MiB."""
    pages = sum(int(s[21]) for pid in pids if (s := _stat(pid)))
    return round(pages * os.sysconf("SC_PAGE_SIZE") / 2**20, 1)


def cpu_delta(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """CPU spent between two snapshots; a process that appeared in between counts whole."""
    if before is None or after is None:
        return None
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


def children(pid: int) -> list[int]:
    procs = (int(e) for e in os.listdir("/proc") if e.isdigit())
    return [p for p in procs if (s := _stat(p)) and int(s[1]) == pid]


def postmaster_pid() -> int | None:
    """The local server's postmaster (the parent of this session's backend), or None."""
    if (s := _stat(one("SELECT pg_backend_pid()"))) is None:
        return None  # a server on another machine
    with open(f"/proc/{int(s[1])}/cmdline", "rb") as fh:
        return int(s[1]) if b"postgres" in fh.read() else None


def server_cpu(postmaster: int | None) -> dict[int, float] | None:
    """CPU of every process of the server: backends of every database, WAL writer,
    checkpointer, autovacuum (the one measure that treats two databases' systems alike)."""
    return None if postmaster is None else cpu_of([postmaster, *children(postmaster)])
