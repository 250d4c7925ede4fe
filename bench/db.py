"""The bench's database: always its own ``switchboard_bench``, never a developer's data.

With ``DATABASE_URL`` set, the bench (re)creates ``switchboard_bench`` on that server; without
it, a throwaway embedded PostgreSQL is started in a temporary folder (deleted at exit). Either
way ``DATABASE_URL`` names ``switchboard_bench`` before Django is set up, so the worker
processes spawned later inherit it. Also here: which code was measured (``git_state``) and
the CPU of local processes from /proc.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BENCH_DB = "switchboard_bench"
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _django_environment() -> None:
    os.environ["SWITCHBOARD_DEV"] = "1"
    os.environ["DJANGO_SETTINGS_MODULE"] = "switchboard.settings"
    os.environ.setdefault("LOG_LEVEL", "WARNING")


def prepare_environment() -> dict:
    """Pick the server, create the bench database, export DATABASE_URL (once, in the
    parent, before Django). Returns facts for the ledger."""
    _django_environment()
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
    recreate(settings, "postgres" if settings["NAME"] == BENCH_DB else settings["NAME"])
    bench_url = dburl.build(settings, name=BENCH_DB)
    # dburl.build drops query options other than a socket host; keep them.
    extra = settings["OPTIONS"]
    if extra and not settings["HOST"].startswith("/"):
        bench_url += "?" + "&".join(f"{k}={quote(str(v))}" for k, v in extra.items())
    os.environ["DATABASE_URL"] = bench_url
    return {"embedded": embedded, "database": BENCH_DB}


def server_settings() -> dict:
    from switchboard import dburl

    return dburl.parse(os.environ["DATABASE_URL"])


def conninfo(dbname: str | None = None, settings: dict | None = None) -> str:
    """A libpq connection string for ``dbname`` (default: the bench's) on the bench's server
    (or the server of Django-style ``settings``)."""
    from psycopg.conninfo import make_conninfo

    settings = settings or server_settings()
    kwargs = {"dbname": dbname or settings["NAME"]}
    for key in ("USER", "PASSWORD", "HOST", "PORT"):
        if settings.get(key):
            kwargs[key.lower()] = settings[key]
    kwargs.update(settings.get("OPTIONS") or {})
    return make_conninfo(**kwargs)


def connect(dbname: str | None = None):
    import psycopg

    return psycopg.connect(conninfo(dbname), autocommit=True)


def recreate(settings: dict, admin_db: str, name: str = BENCH_DB) -> None:
    import psycopg

    with psycopg.connect(conninfo(admin_db, settings), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")


def drop_database(name: str = BENCH_DB) -> None:
    """Remove a bench database (on a developer's server; the embedded one is deleted)."""
    try:
        with connect("postgres") as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    except Exception as exc:  # noqa: BLE001 - best effort at exit
        print(f"note: could not drop {name}: {exc}", file=sys.stderr)


def setup_django() -> None:
    """django.setup() in this process (parent or worker); DATABASE_URL must be exported."""
    _django_environment()
    assert os.environ.get("DATABASE_URL", "").split("?")[0].endswith("/" + BENCH_DB), (
        "the bench only ever runs against its own database"
    )
    import django

    django.setup()


def migrate() -> None:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with_cursor(BARE_DDL)


def with_cursor(statement: str, params=None):
    """Run one statement on Django's connection; its first row, if it returns rows."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone() if cursor.description else None


def wal_lsn() -> int:
    """The server's WAL position in bytes."""
    return with_cursor("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")[0]


# The bare loop's table (no history), and the calibration loop's: the bare table plus an
# attempts table written by hand-written SQL, the shape the 0.84-0.92 refers to.
BARE_DDL = """
CREATE TABLE IF NOT EXISTS bench_bare_jobs (
    id bigserial PRIMARY KEY, endpoint_id bigint NOT NULL, priority smallint NOT NULL DEFAULT 0,
    state text NOT NULL, lease_expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(), result jsonb);
CREATE INDEX IF NOT EXISTS bench_bare_jobs_pending
    ON bench_bare_jobs (endpoint_id, priority DESC, created_at, id) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS bench_hand_jobs (
    id bigserial PRIMARY KEY, endpoint_id bigint NOT NULL, priority smallint NOT NULL DEFAULT 0,
    state text NOT NULL, attempt int NOT NULL DEFAULT 0, lease_expires_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(), result jsonb);
CREATE INDEX IF NOT EXISTS bench_hand_jobs_pending
    ON bench_hand_jobs (endpoint_id, priority DESC, created_at, id) WHERE state = 'pending';
CREATE TABLE IF NOT EXISTS bench_hand_attempts (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL REFERENCES bench_hand_jobs (id) ON DELETE CASCADE,
    seq int NOT NULL, claimed_at timestamptz NOT NULL DEFAULT now(), ended_at timestamptz,
    outcome text NOT NULL DEFAULT '', result jsonb, UNIQUE (job_id, seq));
"""


def server_facts() -> dict:
    names = ("server_version", "shared_buffers", "synchronous_commit", "fsync", "jit")
    return {name: with_cursor(f"SHOW {name}")[0] for name in names}


def git_state(files: tuple[str, ...] = ("queues/sql/claim.py", "queues/sql/close.py")) -> dict:
    """Which code was measured: HEAD, files changed under queues/ and switchboard/ but not
    committed (others may be editing them), and short digests of ``files``."""

    def git(*cmd: str) -> str:
        try:
            run = subprocess.run(
                ["git", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=10
            )
            return run.stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    status = git("status", "--porcelain", "--", "queues", "switchboard", "agents", "board")
    return {
        "head": git("rev-parse", "HEAD").strip() or "?",
        "dirty": [line[3:] for line in status.splitlines() if len(line) > 3],
        "sha256_12": {
            rel: hashlib.sha256((ROOT / rel).read_bytes()).hexdigest()[:12]
            for rel in files
            if (ROOT / rel).exists()
        },
    }


def code_line(git: dict) -> str:
    """'code 1a2b3c4d5e + uncommitted changes in agents/ (2 files)'."""
    by_top: dict[str, int] = {}
    for path in git.get("dirty") or []:
        top = path.split("/", 1)[0] + "/"
        by_top[top] = by_top.get(top, 0) + 1
    dirty = ", ".join(f"{t} ({n} file{'s' if n > 1 else ''})" for t, n in by_top.items())
    return f"code {git.get('head', '?')[:10]}" + (
        f" + uncommitted changes in {dirty}" if dirty else ""
    )


# --- CPU of local processes, from /proc ------------------------------------------------------


def proc_cpu(pid: int) -> float | None:
    """utime + stime of a local process in seconds, or None (gone, or not on this machine)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICK
    except (OSError, IndexError, ValueError):
        return None


def is_postgres(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"postgres" in fh.read()
    except OSError:
        return False


def children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    if int(fh.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def cpu_of(pids) -> dict[int, float]:
    return {pid: v for pid in pids if (v := proc_cpu(pid)) is not None}


def cpu_delta(before: dict[int, float] | None, after: dict[int, float] | None) -> float | None:
    """CPU spent between two snapshots; a process that appeared in between counts whole."""
    if before is None or after is None:
        return None
    return sum(v - before.get(pid, 0.0) for pid, v in after.items())


def postmaster_pid() -> int | None:
    """The local server's postmaster (the parent of this session's backend), or None."""
    backend = with_cursor("SELECT pg_backend_pid()")[0]
    try:
        with open(f"/proc/{backend}/stat", "rb") as fh:
            ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return ppid if is_postgres(ppid) else None


def server_cpu(postmaster: int | None) -> dict[int, float] | None:
    """CPU of every process of the server: backends of every database, WAL writer,
    checkpointer, autovacuum (the one measure that treats two databases' systems alike)."""
    return None if postmaster is None else cpu_of([postmaster, *children(postmaster)])
