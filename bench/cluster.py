"""Three nodes behind one address (section ``cluster``): ``switchboard serve`` x 3 behind HAProxy
with the shipped deploy/haproxy.cfg, their pools through PgBouncer in transaction mode
(deploy/pgbouncer.ini filled in; the doorbell's LISTEN direct), on a PostgreSQL primary with a
synchronous standby; all on loopback in a temporary folder, each process leading a process
group of its own, all ended whatever happens.

1. wake-up: N waiters (one asyncio process as in bench/fleet.py, each from its own loopback
   address, which the nodes log by X-Forwarded-For) long-poll claim_next through HAProxy;
   todos created one at a time on node a, b, c in turn: how soon a waiter has each, on which node.
2. kill -9 of node b's process group while they wait; todos created right after; b restarts.
3. SIGTERM to node c (a drain: its waiters get todo:null at once and poll again elsewhere).
4. failover: the nodes direct on a multi-host URL (PgBouncer follows no primary), a writer
   through HAProxy; the primary killed, the standby promoted DETECT_S later: time to the first
   200, and acknowledged writes the new primary lacks.
"""

from __future__ import annotations

import asyncio
import glob
import http.client
import json
import multiprocessing as mp
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from contextlib import suppress
from pathlib import Path

from bench import db, fleet, httpbench
from bench.ledger import latency
from bench.table import f2, log, pp, table

NODES = "abc"
ENDPOINTS = 10
WAIT_SECONDS = fleet.WAIT_SECONDS
WAKE_P95_MS = fleet.TARGET["wake_p95_ms"]  # the fleet's bar, now across nodes
DETECT_S = 1.0  # the primary's death to `pg_ctl promote`: a watchdog's detection, fixed
GAP_S = 0.5  # between todos created one at a time
RETRY_S = 1.0  # a waiter's pause after an error
RISE_S = 3.0  # HAProxy takes a node back after 2 good checks 1 s apart (deploy/haproxy.cfg)
PG_USER = os.environ.get("SWITCHBOARD_PGBOUNCER_USER", "pgserver")  # PostgreSQL's, under root
CLAIMED_FOR = re.compile(r'^([\d.]+):\d+ - "POST /api/v1/claim_next \S+" 200', re.M)

OPTIONS = [  # flag, type, default, --quick's, help
    ("--cluster-waiters", int, 3000, 600, "long-polls through HAProxy"),
    ("--cluster-wakes", int, 30, 12, "todos created one at a time, in each of three steps"),
]


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what: str, predicate, seconds: float = 60.0, proc=None) -> float:
    """Seconds until ``predicate()`` holds; RuntimeError naming ``what`` when ``seconds`` pass
    first or ``proc`` exits."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > seconds or (proc is not None and proc.poll() is not None):
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - started


def request(port: int, path: str, body: dict | None = None, token: str = "") -> tuple[int, dict]:
    """One request on a fresh connection (POST when there is a body): the status (0: no
    answer) and a 200's JSON."""
    link = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        link.request("GET" if body is None else "POST", path, json.dumps(body), headers)
        response = link.getresponse()
        data = response.read()
        return response.status, json.loads(data) if response.status == 200 and body else {}
    except (OSError, http.client.HTTPException, ValueError):
        return 0, {}
    finally:
        link.close()


def healthy(port: int) -> bool:
    return request(port, "/healthz")[0] == 200


def held(port: int) -> int:
    """Established connections to ``port`` (HAProxy's to a node: the long-polls it holds)."""
    with open("/proc/net/tcp") as fh:
        rows = [line.split() for line in fh][1:]
    return sum(1 for r in rows if r[3] == "01" and int(r[1].split(":")[1], 16) == port)


def prepare_database(tokens: str) -> None:
    """In a child whose DATABASE_URL is the cluster's primary: migrate, then ENDPOINTS
    endpoints on a user's team, their tokens written to ``tokens`` as JSON."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from queues import endpoints

    call_command("migrate", verbosity=0)
    team = get_user_model().objects.create_user(username="bench", password="bench-only").teams.get()
    made = [endpoints.vend(team, f"cluster-{i}", verbs="all")[1] for i in range(ENDPOINTS)]
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
        """SIGKILL to ``name``'s process group, or another signal to its leader alone (gunicorn
        drains on SIGTERM); seconds until the leader exited. What it leaves is killed, and a
        killed postmaster's shared memory removed."""
        proc, started = self.procs[name], time.monotonic()
        pidfile = self.dir / name / "postmaster.pid"
        shm = pidfile.read_text().split("\n")[6].split()[-1] if pidfile.exists() else None
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
        proc.wait(timeout=60)
        took = time.monotonic() - started
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if shm and sig == signal.SIGKILL:
            subprocess.run(["ipcrm", "-m", shm], capture_output=True)
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
        script = f"from bench import cluster; cluster.prepare_database({str(tokens)!r})"
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
            serve = [httpbench.switchboard_command(), "serve", "--host", "127.0.0.1", "--port"]
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

    def versions(self) -> dict[str, str]:
        out = {}
        for name, path in {**self.tools, "postgres": f"{self.tools['postgres']}/postgres"}.items():
            said = subprocess.run([path, "-v" if name == "haproxy" else "-V"], capture_output=True)
            out[name] = (re.findall(r"\d+\.[\d.]+\d", said.stdout.decode()) or ["?"])[0]
        return out

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


# --- the waiters: one process, asyncio, raw HTTP/1.1 -----------------------------------------


async def _post(reader, writer, token: str, verb: str, body: dict) -> tuple[int, dict]:
    data = json.dumps(body).encode()
    writer.write(
        f"POST /api/v1/{verb} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower().split("\r\n")
    length = next((int(x.split(":")[1]) for x in head if x.startswith("content-length:")), 0)
    payload, status = await reader.readexactly(length), int(head[0].split()[1])
    return status, json.loads(payload) if status == 200 else {}


async def _poll(reader, writer, token: str, me: str, state: dict) -> str | None:
    """Long-polls on one connection: the error that ends it, or None when HAProxy closed it
    before answering a poll after the first (switchboard.client asks again on a new connection
    then, and so does this)."""
    polls = 0
    while True:
        asked, polls = time.monotonic(), polls + 1
        try:
            status, body = await _post(
                reader, writer, token, "claim_next", {"wait_seconds": WAIT_SECONDS}
            )
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            if polls > 1 and not getattr(exc, "partial", b""):
                state["retried"].append(time.monotonic())
                return None
            raise
        if status != 200:
            return str(status)
        if todo := body.get("todo"):
            state["wakes"].append((todo["id"], time.monotonic(), me))
            ids = {"todo_id": todo["id"], "attempt_seq": body["attempt_seq"]}
            if (status := (await _post(reader, writer, token, "complete", ids))[0]) != 200:
                return f"complete {status}"
        elif time.monotonic() - asked < WAIT_SECONDS - 2:
            state["early"].append(time.monotonic())  # answered before its wait ran out: a drain


async def _agent(i: int, port: int, token: str, state: dict) -> None:
    """A waiter from its own address, 127.1.x.y, that connects again after an error (RETRY_S
    later) as an agent would."""
    me = f"127.1.{i // 250}.{i % 250 + 1}"
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(me, 0))
        except OSError as exc:
            error: str | None = f"connect {type(exc).__name__}"
        else:
            state["connected"].append(time.monotonic())
            try:
                error = await _poll(reader, writer, token, me, state)
            except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                error = type(exc).__name__
            finally:
                writer.close()
        if error:
            state["errors"].append((time.monotonic(), error))
            await asyncio.sleep(RETRY_S)


async def _fleet(conn, port: int, tokens: list[str], n: int) -> dict:
    state: dict = {"connected": [], "wakes": [], "errors": [], "early": [], "retried": []}
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(_agent(i, port, tokens[i % len(tokens)], state)))
        if i % 100 == 99:
            await asyncio.sleep(100 / fleet.RAMP_PER_S)
    while len(state["connected"]) < n:
        await asyncio.sleep(0.05)
    conn.send(("parked",))
    await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # ("stop",)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return state


def waiters_main(conn, port: int, tokens: list[str], n: int) -> None:
    """The waiter process: ("parked",) once all n connected; ("stop",) -> ("done", state)."""
    fleet.raise_open_files()
    conn.send(("done", asyncio.run(_fleet(conn, port, tokens, n))))


# --- the steps -------------------------------------------------------------------------------


def create(c: Cluster, nodes: str, count: int, tokens: list[str]) -> list[dict]:
    """``count`` todos, one every GAP_S, each created directly on the next of ``nodes``; with
    each, for whom each node answered claim_next meanwhile."""
    made = []
    for i in range(count):
        node, marks, asked = nodes[i % len(nodes)], c.marks(), time.monotonic()
        body = {"title": f"wake {i}"}
        status, out = request(c.ports[node], "/api/v1/create_todo", body, tokens[i % ENDPOINTS])
        answered = time.monotonic()
        time.sleep(GAP_S)
        todo_id = (out.get("todo") or {}).get("id")
        made.append(dict(id=todo_id, node=node, asked=asked, answered=answered, status=status))
        made[-1]["pollers"] = c.pollers(marks)
    return made


def outcome(made: list[dict], state: dict, since: float, until: float) -> dict:
    """What the waiters got of ``made``, and what they met between ``since`` and ``until``."""
    woke = {todo_id: (t, me) for todo_id, t, me in state["wakes"]}
    got = [(m, *woke[m["id"]]) for m in made if m["id"] in woke]
    on = [next((n for n, who in m["pollers"].items() if me in who), None) for m, _, me in got]
    errors = Counter(kind for t, kind in state["errors"] if since <= t <= until)
    errors.update(f"create {m['status']}" for m in made if m["status"] != 200)
    counts = {
        k: sum(1 for t in state[k] if since <= t <= until)
        for k in ("connected", "retried", "early")
    }
    return {
        "created": len(made),
        "claimed": len(got),
        "wake": latency([t - m["asked"] for m, t, _ in got]),
        "create": latency([m["answered"] - m["asked"] for m in made]),
        "cross_node": sum(1 for (m, _, _), n in zip(got, on, strict=True) if n and n != m["node"]),
        "seen_node": sum(1 for n in on if n),
        "errors": dict(errors),
        **counts,
    }


def waiting(c: Cluster, tokens: list[str], n: int, wakes: int) -> dict:
    """Steps 1-3, with ``n`` waiters through HAProxy."""
    spawn = mp.get_context("spawn")
    parent, child = spawn.Pipe()
    where = (child, c.ports["proxy"], tokens, n)
    proc = spawn.Process(target=waiters_main, args=where, daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(n / fleet.RAMP_PER_S + 60):
            raise RuntimeError("the waiters did not all connect")
        parent.recv()
        time.sleep(3)  # the nodes take the last polls in
        spread, t1 = {x: held(c.ports[x]) for x in NODES}, time.monotonic()
        first = create(c, NODES, wakes, tokens)
        t2, kill = time.monotonic(), {"held": held(c.ports["b"]), "restart_s": 0.0}
        c.stop("node-b")
        after_kill = create(c, "ac", wakes, tokens)
        kill["restart_s"] = round(c.nodes("b", **c.pooled), 2)
        time.sleep(RISE_S)
        t3, drain = time.monotonic(), {"held": held(c.ports["c"]), "drain_s": 0.0}
        drain["drain_s"] = round(c.stop("node-c", signal.SIGTERM), 2)
        after_drain = create(c, "ab", wakes, tokens)
        parent.send(("stop",))
        state, t4 = parent.recv()[1], time.monotonic()
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()  # our own child, by its handle
    return {
        "spread": spread,
        "wake": outcome(first, state, t1, t2),
        "kill": {**kill, **outcome(after_kill, state, t2, t3)},
        "drain": {**drain, **outcome(after_drain, state, t3, t4)},
    }


def writer(port: int, token: str, stop: threading.Event, out: dict) -> None:
    """Create, claim, complete, one after another through HAProxy until ``stop``; every call
    (asked, answered, status), every acknowledged create and completion."""

    def ask(verb: str, body: dict) -> dict | None:
        asked = time.monotonic()
        status, answer = request(port, f"/api/v1/{verb}", body, token)
        out["calls"].append((asked, time.monotonic(), status))
        if status != 200:
            time.sleep(0.05)  # a client's pause before it tries again
        return answer if status == 200 else None

    while not stop.is_set():
        if made := ask("create_todo", {"title": "failover"}):
            out["created"].append(todo_id := made["todo"]["id"])
            if claimed := ask("claim", {"todo_id": todo_id}):
                if ask("complete", {"todo_id": todo_id, "attempt_seq": claimed["attempt_seq"]}):
                    out["completed"].append(todo_id)


def failover(c: Cluster, token: str) -> dict:
    """Step 4: the nodes direct on both servers' addresses; the primary killed, the standby
    promoted DETECT_S later."""
    for n in "ab":
        c.stop(f"node-{n}")
    hosts = f"127.0.0.1:{c.ports['primary']},127.0.0.1:{c.ports['standby']}"
    query = "target_session_attrs=read-write&connect_timeout=2"
    c.nodes(NODES, DATABASE_URL=f"postgresql://switchboard@{hosts}/switchboard?{query}")
    time.sleep(RISE_S)
    out: dict[str, list] = {"calls": [], "created": [], "completed": []}
    stop = threading.Event()
    thread = threading.Thread(target=writer, args=(c.ports["proxy"], token, stop, out), daemon=True)
    thread.start()

    def after(ok: bool) -> list[float]:  # when the calls asked after the kill were answered
        return [a for s, a, status in out["calls"] if s > killed and (status == 200) == ok]

    try:
        wait_until("the writer's first completion", lambda: out["completed"], 30)
        time.sleep(2)
        killed = time.monotonic()
        c.stop("primary")
        time.sleep(DETECT_S)
        promoted = time.monotonic()
        c.run("promote", f"{c.tools['postgres']}/pg_ctl", "promote", "-w", "-D", c.dir / "standby")
        promote_s = time.monotonic() - promoted
        healthy_s = promote_s + wait_until("node a healthy", lambda: healthy(c.ports["a"]))
        wait_until("a 200 through HAProxy", lambda: after(True))
        time.sleep(5)
    finally:
        stop.set()
        thread.join(timeout=15)
    done = "SELECT id, state FROM todos WHERE id = ANY(%s)"
    rows = dict(c.sql("standby", done, (out["created"],), "switchboard"))
    return {
        "detect_s": DETECT_S,
        "promote_s": round(promote_s, 2),
        "node_healthy_s": round(healthy_s, 2),
        "kill_to_200_s": round(min(after(True)) - killed, 2),
        "promote_to_200_s": round(min(after(True)) - promoted, 2),
        "last_error_s": round(max(after(False), default=killed) - killed, 2),
        "acked_creates": len(out["created"]),
        "acked_completions": len(out["completed"]),
        "missing_creates": sum(1 for i in out["created"] if i not in rows),
        "missing_completions": sum(1 for i in out["completed"] if rows.get(i) != "done"),
        "errors": dict(Counter(str(status) for _, _, status in out["calls"] if status != 200)),
    }


def run_section(ctx) -> None:
    args, started = ctx.args, time.monotonic()
    if isinstance(found := tools(), str):
        log(f"cluster: {found}; section skipped")
        return
    if 2 * args.cluster_waiters + 200 > fleet.raise_open_files():  # HAProxy's, inherited
        log(f"cluster: {args.cluster_waiters} waiters do not fit the open-files limit; skipped")
        return
    c = Cluster(found, ctx.stamp)
    note: dict = {"waiters": args.cluster_waiters, "versions": c.versions()}
    try:
        tokens = c.database()
        c.pooled = {
            "DATABASE_URL": c.pgbouncer(),
            "SWITCHBOARD_LISTEN_DATABASE_URL": c.url("primary"),
            "SWITCHBOARD_PREPARED_STATEMENTS": "0",
            "SWITCHBOARD_PAGE_TIMEOUT_SECONDS": "0",
        }
        c.nodes(NODES, **c.pooled)
        c.haproxy()
        log(f"cluster: databases, PgBouncer, nodes and HAProxy up; {args.cluster_waiters} waiters")
        note |= waiting(c, tokens, args.cluster_waiters, args.cluster_wakes)
        log(f"cluster: wake-up p95 {note['wake']['wake']['p95_ms']} ms; kill -9, drain; failover")
        note["failover"] = failover(c, tokens[0])
    except Exception as exc:  # noqa: BLE001 - recorded; the processes end all the same
        note["failed"] = f"{type(exc).__name__}: {exc}"
        log(f"cluster: failed: {traceback.format_exc()}")
    finally:
        c.close()
    note |= {"cpus": os.cpu_count(), "git": db.git_state()}
    ctx.ledger.notes["cluster"] = note | {"duration_s": round(time.monotonic() - started, 1)}
    (db.RESULTS / f"cluster-{ctx.stamp}.txt").write_text(render(ctx.ledger.notes["cluster"]) + "\n")


def met(note: dict) -> bool:
    """Every todo claimed in every step, wake-up p95 under the fleet's bar, and not one waiter
    seeing the drain as an error."""
    steps = [note.get(k) for k in ("wake", "kill", "drain")]
    return (
        all(s and s["claimed"] == s["created"] > 0 for s in steps)
        and (note["wake"]["wake"]["p95_ms"] or float("inf")) < WAKE_P95_MS
        and not note["drain"]["errors"]
    )


def lost(note: dict) -> int:
    """Acknowledged writes the new primary lacks (the failover's bar: none)."""
    return note["failover"]["missing_creates"] + note["failover"]["missing_completions"]


def said(errors: dict) -> str:
    return ", ".join(f"{kind} {n:,}" for kind, n in sorted(errors.items())) or "0"


def row(step: str, s: dict, polls: str) -> list:
    wake, made = f"{pp(s['wake'])}/{f2(s['wake']['max_ms'])}", f"{s['claimed']}/{s['created']}"
    seen = [f2(s["create"]["p50_ms"]), f"{s['cross_node']}/{s['seen_node']}", s["connected"]]
    return [step, polls, made, wake, *seen, s["early"], s["retried"], said(s["errors"])]


def render(note: dict) -> str:
    v, verdict = note["versions"], ("NOT MET", "MET")
    out = [
        f"Three nodes behind one address: switchboard serve x 3 (1 worker each) behind HAProxy "
        f"{v['haproxy']} (deploy/haproxy.cfg), pools through PgBouncer {v['pgbouncer']} "
        f"(deploy/pgbouncer.ini, transaction mode; LISTEN direct), PostgreSQL {v['postgres']} "
        f"with a synchronous standby; {note['waiters']:,} waiters (claim_next, wait_seconds "
        f"{WAIT_SECONDS}) over {ENDPOINTS} endpoints through HAProxy; all on loopback, "
        f"{note['cpus']} CPUs; {db.code_line(note['git'])}",
        "",
    ]
    if w := note.get("wake"):
        k, d, spread = note["kill"], note["drain"], "/".join(map(str, note["spread"].values()))
        rows = [
            row("wake-up: todos on a, b, c in turn", w, f"a/b/c {spread}"),
            row("kill -9 node b; todos on a, c", k, f"b {k['held']}"),
            row("SIGTERM node c; todos on a, b", d, f"c {d['held']}"),
        ]
        headers = "step|polls held|claimed|wake-up p50/p95/max ms|create p50 ms|by another node's waiter|reconnected|todo:null early|asked again|errors"
        out += table(headers.split("|"), rows)
        out.append(
            f"Node b answered again {k['restart_s']:.1f} s after its restart began; node c exited "
            f"{d['drain_s']:.2f} s after SIGTERM. Bar: every todo claimed in every step, wake-up "
            f"p95 < {WAKE_P95_MS:.0f} ms, no error from the drain => {verdict[met(note)]}"
        )
    if fo := note.get("failover"):
        out.append(
            f"Failover, the nodes direct on both servers (multi-host URL), a writer through HAProxy: "
            f"the primary killed, `pg_ctl promote` {fo['detect_s']:.1f} s later (took "
            f"{fo['promote_s']:.2f} s); node a healthy {fo['node_healthy_s']:.2f} s after promote; "
            f"first 200 {fo['kill_to_200_s']:.2f} s after the kill ({fo['promote_to_200_s']:.2f} s "
            f"after promote), last error at {fo['last_error_s']:.2f} s; errors "
            f"{said(fo['errors'])}; acked {fo['acked_creates']} creates and "
            f"{fo['acked_completions']} completions, missing on the new primary "
            f"{fo['missing_creates']} and {fo['missing_completions']} => {verdict[not lost(note)]}"
        )
    if "failed" in note:
        out.append(f"FAILED: {note['failed']}")
    out.append(f"section took {note['duration_s']:.0f} s; logs in bench/results/cluster-<stamp>/")
    return "\n".join(out)
