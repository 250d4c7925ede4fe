"""A primary failover under Patroni (issue 41, item 6): three PostgreSQL 15 members managed by
Patroni with one etcd, `switchboard serve` on the multi-host URL with
``target_session_attrs=read-write`` (no other setting), a producer, a `Client.work()` loop and
200 idle long-polls; then the leader's node dies (its Patroni and its postmaster killed -9)
and Patroni promotes a standby after its ttl. The work loop finishes every todo and never
raises, no long-poll is cut, every acknowledged create is found and completed exactly once,
and the web workers hold no more sessions on the new primary than their pools.

Opt-in (``SWITCHBOARD_CRASH_PATRONI=1``, which ``make soak`` sets): it takes about a minute,
most of it Patroni's own (bootstrap, basebackups, the ttl). ``make test`` runs the same
promises against one PostgreSQL restarted (tests/crash/test_database_restart.py's fleet,
tests/crash/test_client_failover.py). Needs Debian's ``patroni``, ``etcd-server`` and
PostgreSQL 15 (``apt-get install patroni etcd-server postgresql-15``); docs/deploy.md's
recipe is this test's configuration.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest

from switchboard.client import Backoff, Client, SwitchboardError
from tests import loopback
from tests.crash.conftest import base_env
from tests.crash.harness import SWITCHBOARD, Procs, free_port, wait_until

pytestmark = [pytest.mark.slow]

PG_BIN = Path("/usr/lib/postgresql/15/bin")
SEED = str(Path(__file__).with_name("seed.py"))
MEMBERS = 3
IDLE_POLLS = 200
TODOS = 60  # made by the producer, a few a second, across the failover
TTL_SECONDS = 20  # Patroni's least: a dead leader's key expires after this


def _skip_unless_patroni() -> None:
    if os.environ.get("SWITCHBOARD_CRASH_PATRONI") != "1":
        pytest.skip(
            "a Patroni failover takes a minute: SWITCHBOARD_CRASH_PATRONI=1 (make soak) runs"
            " it; make test runs the single-PostgreSQL restart of the same promises"
        )
    for program in ("patroni", "etcd"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed (apt-get install patroni etcd-server)")
    if not (PG_BIN / "postgres").exists():
        pytest.skip("PostgreSQL 15's binaries are not in /usr/lib/postgresql/15/bin")


def _as_postgres(args: list[str]) -> list[str]:
    """PostgreSQL will not run as root: Patroni (and its postmaster) run as ``postgres``."""
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


MEMBER_YML = """\
scope: switchboard-test
namespace: /service/
name: {name}
restapi: {{listen: 127.0.0.1:{rest}, connect_address: 127.0.0.1:{rest}}}
etcd3: {{hosts: 127.0.0.1:{etcd}}}
bootstrap:
  dcs:
    ttl: {ttl}
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters: {{max_connections: 200, wal_log_hints: "on", wal_keep_size: 64MB}}
  initdb: [{{encoding: UTF8}}]
  pg_hba:
  - local all all trust
  - host replication replicator 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{port}
  connect_address: 127.0.0.1:{port}
  data_dir: {folder}/data
  bin_dir: {bin}
  pgpass: {folder}/pgpass
  authentication:
    replication: {{username: replicator, password: replicator}}
    superuser: {{username: postgres, password: postgres}}
    rewind: {{username: rewinder, password: rewinder}}
  parameters: {{unix_socket_directories: '{folder}', shared_buffers: 32MB}}
"""


class Cluster:
    def __init__(self, root: Path, procs: Procs) -> None:
        self.root, self.procs = root, procs
        self.etcd_port, self.etcd_peer = free_port(), free_port()
        self.members = [
            {"name": f"pg{n}", "port": free_port(), "rest": free_port()}
            for n in range(1, MEMBERS + 1)
        ]
        self.patronis: dict[str, object] = {}

    def start(self) -> None:
        etcd_dir = self.root / "etcd"
        self.procs.start(
            "etcd",
            [
                "etcd",
                "--name=e1",
                f"--data-dir={etcd_dir}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer}",
                f"--initial-cluster=e1=http://127.0.0.1:{self.etcd_peer}",
                "--listen-metrics-urls=http://127.0.0.1:0",
            ],
            {**os.environ, "ETCDCTL_API": "3"},
        )
        for member in self.members:
            self.start_member(member)

    def start_member(self, member: dict) -> None:
        folder = self.root / member["name"]
        folder.mkdir(exist_ok=True)
        yml = folder / "patroni.yml"
        yml.write_text(
            MEMBER_YML.format(
                **member, etcd=self.etcd_port, ttl=TTL_SECONDS, folder=folder, bin=PG_BIN
            )
        )
        if os.geteuid() == 0:
            shutil.chown(folder, "postgres", "postgres")
            folder.chmod(0o700)
        self.patronis[member["name"]] = self.procs.start(
            member["name"], _as_postgres(["patroni", str(yml)]), {**os.environ}
        )

    def state(self, member: dict) -> dict | None:
        try:
            return loopback.get(f"http://127.0.0.1:{member['rest']}/patroni", timeout=2).json()
        except (httpx.HTTPError, ValueError):
            return None

    def leader(self) -> dict | None:
        for member in self.members:
            found = self.state(member)
            if found and found.get("role") == "master" and found.get("state") == "running":
                return member
        return None

    def streaming(self) -> int:
        """Standbys running and replicating."""
        count = 0
        for member in self.members:
            found = self.state(member)
            if found and found.get("role") == "replica" and found.get("state") == "running":
                count += 1
        return count

    def url(self, database: str = "switchboard") -> str:
        hosts = ",".join(f"127.0.0.1:{m['port']}" for m in self.members)
        return (
            f"postgresql://postgres:postgres@{hosts}/{database}"
            "?target_session_attrs=read-write&connect_timeout=3"
        )

    def kill_node(self, member: dict) -> None:
        """The node dies: its Patroni (with runuser before it, its whole process group) and
        its postmaster, at once."""
        patroni = self.patronis[member["name"]]
        pid_file = self.root / member["name"] / "data" / "postmaster.pid"
        postmaster = int(pid_file.read_text().split()[0])
        try:
            os.killpg(patroni.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.kill(postmaster, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def cluster():
    _skip_unless_patroni()
    root = Path(tempfile.mkdtemp(prefix="switchboard-patroni-"))
    root.chmod(0o755)
    procs = Procs(root)
    try:
        found = Cluster(root, procs)
        found.start()
        wait_until(
            lambda: found.leader() and found.streaming() == MEMBERS - 1,
            seconds=120,
            what="a Patroni leader and its standbys",
            logs=procs.logs,
        )
        yield found
    finally:
        procs.close()
        subprocess.run(["pkill", "-9", "-f", str(root)], check=False)
        shutil.rmtree(root, ignore_errors=True)


def test_agents_ride_through_a_patroni_failover(cluster, tmp_path):
    leader = cluster.leader()
    with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
        conn.execute("CREATE DATABASE switchboard")
    env = {**base_env(), "DATABASE_URL": cluster.url()}
    seeded = subprocess.run(
        [sys.executable, SEED, "worker"], env=env, capture_output=True, text=True, timeout=120
    )
    assert seeded.returncode == 0, seeded.stderr
    token = seeded.stdout.strip()
    idle_token = subprocess.run(
        [SWITCHBOARD, "vend", "idle", "--team", "crash"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    procs = Procs(tmp_path)
    try:
        server, base = procs.serve(env, workers=2)
        master = psutil.Process(server.pid)
        workers = {child.pid for child in master.children()}
        acknowledged: list[int] = []
        made: list[str] = []
        done: list[tuple[int, int]] = []
        raised: list[BaseException] = []
        stop = threading.Event()

        def producer() -> None:
            client = Client(base, token, timeout=30)
            for n in range(TODOS):
                key = f"failover-{n}"
                made.append(key)
                while not stop.is_set():
                    try:
                        acknowledged.append(
                            client.create_todo(title=key, idempotency_key=key)["todo"]["id"]
                        )
                        break
                    except (SwitchboardError, OSError):
                        time.sleep(1)  # the same key again: written once whatever happened
                time.sleep(0.5)

        def worker() -> None:
            client = Client(base, token, timeout=30, backoff=Backoff(cap_seconds=2.0))
            try:
                for job in client.work(wait_seconds=10, stop=stop, lease_seconds=120):
                    with job:
                        job.complete(summary="done")
                        done.append((job.todo["id"], job.attempt_seq))
            except BaseException as error:  # the loop must never end this way
                raised.append(error)

        polls = Counter()
        cut: list[str] = []

        async def idle_fleet() -> None:
            limits = httpx.Limits(max_connections=IDLE_POLLS + 10)
            async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:

                async def poll() -> None:
                    while not stop.is_set():
                        try:
                            answer = await client.post(
                                "/api/v1/claim_next",
                                json={"wait_seconds": 25},
                                headers={"Authorization": f"Bearer {idle_token}"},
                            )
                        except httpx.TransportError as exc:
                            cut.append(repr(exc))
                            await asyncio.sleep(1)
                            continue
                        polls[answer.status_code] += 1
                        if answer.status_code == 503:
                            await asyncio.sleep(float(answer.headers["retry-after"]))

                tasks = [asyncio.ensure_future(poll()) for _ in range(IDLE_POLLS)]
                while not stop.is_set():
                    await asyncio.sleep(0.2)
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

        threads = [
            threading.Thread(target=producer, daemon=True),
            threading.Thread(target=worker, daemon=True),
            threading.Thread(target=lambda: asyncio.run(idle_fleet()), daemon=True),
        ]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(done) >= 10, seconds=60, what="10 todos done", logs=procs.logs)
        killed_at = time.monotonic()
        cluster.kill_node(leader)
        new_leader = wait_until(
            lambda: (found := cluster.leader()) not in (None, leader) and found,
            seconds=TTL_SECONDS + 60,
            what="Patroni to promote a standby",
            logs=procs.logs,
        )
        promoted = time.monotonic() - killed_at
        wait_until(
            lambda: len(acknowledged) == TODOS and len(done) >= TODOS,
            seconds=120,
            what="every todo made and done",
            logs=procs.logs,
        )
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        sessions = _sessions(cluster, new_leader)
        said = procs.logs()
        assert raised == [], raised
        assert cut == [], cut[:5]
        assert {child.pid for child in master.children()} == workers, said
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT t.id, t.state, count(a.*) FILTER (WHERE a.outcome = 'completed'),"
                " count(a.*) FILTER (WHERE a.ended_at IS NULL)"
                " FROM todos t LEFT JOIN todo_attempts a ON a.todo_id = t.id"
                " WHERE t.title LIKE 'failover-%%' GROUP BY t.id, t.state"
            ).fetchall()
        assert len(rows) == TODOS and sorted(r[0] for r in rows) == sorted(set(acknowledged))
        assert all(
            state == "done" and completed == 1 and open_ == 0 for _, state, completed, open_ in rows
        ), rows
        # Two workers' pools (8 async, 8 sync) and a LISTEN each, and the seed's nothing.
        assert sessions <= 2 * 17, sessions
        print(
            f"\npatroni: promoted {promoted:.1f} s after the node died; idle polls answered"
            f" {dict(polls)}; sessions on the new primary {sessions}; todos {len(rows)}"
        )
    finally:
        procs.close()


def _sessions(cluster: Cluster, member: dict) -> int:
    url = f"postgresql://postgres:postgres@127.0.0.1:{member['port']}/switchboard"
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = 'switchboard'"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        ).fetchone()[0]
