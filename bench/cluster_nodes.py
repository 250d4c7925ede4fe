"""The cluster section's processes (bench/cluster.py): a PostgreSQL primary with a synchronous
standby, PgBouncer from deploy/pgbouncer.ini, three ``switchboard serve`` nodes and HAProxy from
deploy/haproxy.cfg, on loopback in a temporary folder, each leading a process group of its
own; and the small helpers the steps share."""

from __future__ import annotations

import glob
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

from bench import db, fleet
from bench.httpbench import free_port, healthy, switchboard_command, wait_until

NODES = "abc"
PG_USER = os.environ.get("SWITCHBOARD_PGBOUNCER_USER", "pgserver")  # PostgreSQL's, under root
CLAIMED_FOR = re.compile(r'^([\d.]+):\d+ - "POST /api/v1/claim_next \S+" 200', re.M)


def tools() -> dict[str, str] | str:
    """The programs the section runs, or what is missing."""
    found = {p: shutil.which(p) or shutil.which(f"/usr/sbin/{p}") for p in ("haproxy", "pgbouncer")}
    pg = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    with suppress(ImportError):
        import pgserver  # its bundled PostgreSQL, when Debian's is not there

        pg = pg or [str(Path(pgserver.__file__).parent / "pginstall" / "bin")]
    found["postgres"] = pg[-1] if pg else None
    if missing := [name for name, path in found.items() if not path]:
        return f"{', '.join(missing)} not installed (apt-get install haproxy pgbouncer)"
    if os.geteuid() == 0 and PG_USER not in {user.pw_name for user in pwd.getpwall()}:
        return f"running as root, and there is no user {PG_USER} to run PostgreSQL as"
    return {name: str(path) for name, path in found.items()}


def held(port: int) -> int:
    """Established connections to ``port`` (HAProxy's to a node: the long-polls it holds)."""
    with open("/proc/net/tcp") as fh:
        rows = [line.split() for line in fh][1:]
    return sum(1 for r in rows if r[3] == "01" and int(r[1].split(":")[1], 16) == port)


def prepare_database(tokens: str) -> None:
    """In a child whose DATABASE_URL is the cluster's primary: migrate, then the fleet's
    endpoints on a user's team, their tokens written to ``tokens`` as JSON."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from switchboard.queues import endpoints

    call_command("migrate", verbosity=0)
    team = get_user_model().objects.create_user(username="bench", password="bench-only").teams.get()
    made = [endpoints.vend(team, f"cluster-{i}", verbs="all")[1] for i in range(fleet.ENDPOINTS)]
    Path(tokens).write_text(json.dumps(made))


class Cluster:
    """The section's processes, each leading its own process group with its output in a log in
    one temporary folder; ``close`` ends them all, keeps the logs in
    bench/results/cluster-<stamp>/ and removes the folder."""

    def __init__(self, found: dict[str, str], stamp: str):
        self.tools, self.stamp = found, stamp
        self.procs: dict[str, subprocess.Popen] = {}
        self.dir = Path(tempfile.mkdtemp(prefix="switchboard-cluster-"))
        self.ports = {n: free_port() for n in ("primary", "standby", "pgbouncer", "proxy", *NODES)}
        self.as_pg: dict = {}  # Popen's user and group for PostgreSQL and PgBouncer, under root
        self.pooled: dict[str, str] = {}  # the nodes' settings through PgBouncer
        if os.geteuid() == 0:
            user = pwd.getpwnam(PG_USER)
            self.as_pg = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
            os.chown(self.dir, user.pw_uid, user.pw_gid)

    def start(self, name: str, args: list, env: dict | None = None, as_pg: bool = False):
        with open(self.dir / f"{name}.log", "ab") as out:
            self.procs[name] = subprocess.Popen(
                [str(a) for a in args],
                cwd=self.dir if as_pg else db.ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
                **(self.as_pg if as_pg else {}),
            )
        return self.procs[name]

    def run(self, name: str, *args, env: dict | None = None, as_pg: bool = True) -> None:
        """A program to its end, its output in its log."""
        if self.start(name, list(args), env, as_pg).wait(timeout=300):
            raise RuntimeError(f"{name} failed; its log is in bench/results/cluster-{self.stamp}/")

    def stop(self, name: str, sig: int = signal.SIGKILL) -> float:
        """SIGKILL to node ``name``'s process group, or another signal to its leader alone
        (gunicorn drains on SIGTERM); seconds until the leader exited. What it leaves is
        killed."""
        proc, started = self.procs[name], time.monotonic()
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
        proc.wait(timeout=60)
        took = time.monotonic() - started
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        return took

    def close(self) -> None:
        """PostgreSQL shut down at once (which frees its shared memory), the rest killed."""
        for name, proc in self.procs.items():
            with suppress(ProcessLookupError):
                if name in ("primary", "standby"):
                    proc.send_signal(signal.SIGQUIT)
                else:
                    os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs.values():
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        (keep := db.RESULTS / f"cluster-{self.stamp}").mkdir(parents=True, exist_ok=True)
        for path in self.dir.glob("*.log"):
            shutil.copy(path, keep / path.name)
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, name: str) -> str:
        return f"postgresql://switchboard@127.0.0.1:{self.ports[name]}/switchboard"

    def sql(self, name: str, statement: str, params=None, dbname: str = "postgres") -> list:
        import psycopg

        conninfo = f"host=127.0.0.1 port={self.ports[name]} user=switchboard dbname={dbname}"
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=3) as conn:
            cursor = conn.execute(statement, params)
            return cursor.fetchall() if cursor.description else []

    def answers(self, name: str, dbname: str = "postgres") -> bool:
        import psycopg

        with suppress(psycopg.Error):
            return self.sql(name, "SELECT 1", dbname=dbname) == [(1,)]
        return False

    def postgres(self, name: str, *settings: str) -> None:
        where = ["-D", self.dir / name, "-p", self.ports[name], "-c", "listen_addresses=127.0.0.1"]
        args = [f"{self.tools['postgres']}/postgres", *where, "-c", "unix_socket_directories="]
        proc = self.start(name, [*args, *settings], as_pg=True)
        wait_until(f"{name} to take connections", lambda: self.answers(name), proc=proc)

    def database(self) -> list[str]:
        """The primary and its synchronous standby (pg_basebackup -R), the database migrated;
        the endpoints' tokens."""
        pg, primary = self.tools["postgres"], ["-h", "127.0.0.1", "-p", self.ports["primary"]]
        self.run("initdb", f"{pg}/initdb", "-D", self.dir / "primary", "-U", "switchboard")
        self.postgres("primary", "-c", "synchronous_standby_names=*")
        copy = ["-U", "switchboard", "-D", self.dir / "standby", "-R", "-c", "fast"]
        self.run("pg_basebackup", f"{pg}/pg_basebackup", *primary, *copy)
        self.postgres("standby")
        sync = "SELECT sync_state FROM pg_stat_replication"
        wait_until("a synchronous standby", lambda: self.sql("primary", sync) == [("sync",)])
        self.sql("primary", "CREATE DATABASE switchboard")
        tokens, env = self.dir / "tokens.json", {**os.environ, "DATABASE_URL": self.url("primary")}
        script = f"from bench import cluster_nodes; cluster_nodes.prepare_database({str(tokens)!r})"
        self.run("migrate", sys.executable, "-c", script, env=env, as_pg=False)
        return json.loads(tokens.read_text())

    def pgbouncer(self) -> str:
        """PgBouncer from the shipped file, in front of the primary, trusting loopback as the
        primary does; its URL."""
        ini = (db.ROOT / "deploy" / "pgbouncer.ini").read_text()
        for shipped, ours in (
            ("port=5432 dbname=switchboard", f"port={self.ports['primary']} dbname=switchboard"),
            ("listen_port = 6432", f"listen_port = {self.ports['pgbouncer']}"),
            ("auth_type = scram-sha-256", "auth_type = trust"),
            ("auth_file = /etc/pgbouncer/userlist.txt", f"auth_file = {self.dir}/users.txt"),
        ):
            if shipped not in ini:
                raise RuntimeError(f"deploy/pgbouncer.ini no longer says {shipped!r}")
            ini = ini.replace(shipped, ours)
        (self.dir / "users.txt").write_text('"switchboard" ""\n')
        (self.dir / "pgbouncer.ini").write_text(ini + "unix_socket_dir =\n")
        args = [self.tools["pgbouncer"], self.dir / "pgbouncer.ini"]
        proc = self.start("pgbouncer", args, as_pg=True)
        wait_until("PgBouncer", lambda: self.answers("pgbouncer", "switchboard"), proc=proc)
        return self.url("pgbouncer")

    def nodes(self, names: str, **env: str) -> float:
        """``switchboard serve`` with one worker as each named node; seconds until all are
        healthy."""
        started = time.monotonic()
        full = {**os.environ, "SWITCHBOARD_WEB_WORKERS": "1", "LOG_LEVEL": "WARNING", **env}
        for n in names:
            serve = [switchboard_command(), "serve", "--host", "127.0.0.1", "--port"]
            self.start(f"node-{n}", [*serve, self.ports[n]], full)
        for n in names:
            port, proc = self.ports[n], self.procs[f"node-{n}"]
            wait_until(f"node {n} to answer /healthz", lambda p=port: healthy(p), proc=proc)
        return time.monotonic() - started

    def haproxy(self) -> None:
        env = {**os.environ, "SWITCHBOARD_PROXY_BIND": f"127.0.0.1:{self.ports['proxy']}"}
        env |= {f"SWITCHBOARD_NODE_{n.upper()}": f"127.0.0.1:{self.ports[n]}" for n in NODES}
        args = [self.tools["haproxy"], "-db", "-f", db.ROOT / "deploy" / "haproxy.cfg"]
        proc = self.start("haproxy", args, env)
        wait_until("HAProxy", lambda: healthy(self.ports["proxy"]), proc=proc)

    def marks(self) -> dict[str, int]:
        return {n: (self.dir / f"node-{n}.log").stat().st_size for n in NODES}

    def pollers(self, marks: dict[str, int]) -> dict[str, list[str]]:
        """Per node, the addresses whose claim_next it answered since ``marks``."""
        out = {}
        for n in NODES:
            with open(self.dir / f"node-{n}.log", "rb") as fh:
                fh.seek(marks[n])
                out[n] = CLAIMED_FOR.findall(fh.read().decode(errors="replace"))
        return out
