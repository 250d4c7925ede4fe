"""Processes for the crash tests: each child in its own process group with its output in a
log file, killed as a group, and every wait bounded by a deadline that fails with the logs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# The console script installed beside this interpreter (pyproject: [project.scripts]).
SWITCHBOARD = str(Path(sys.executable).with_name("switchboard"))
AGENT = str(Path(__file__).with_name("agent.py"))
_NOTABLE = (" WARNING ", " ERROR ", " CRITICAL ", "Traceback", "Error:", " switchboard.database ")


class Proc:
    """A child process leading its own process group (a session), so that killing it also
    kills what it started (gunicorn's workers)."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.log = log
        with log.open("w") as out:
            self.popen = subprocess.Popen(
                args,
                env=env,
                cwd=log.parent,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pid = self.popen.pid

    def __repr__(self) -> str:
        return f"Proc({self.name}, pid={self.pid})"

    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def events(self) -> list[dict]:
        """The JSON lines the agent script printed (other lines are ignored)."""
        found = []
        for line in self.output().splitlines():
            if line.startswith("{"):
                try:
                    found.append(json.loads(line))
                except ValueError:
                    continue  # a line cut short by SIGKILL
        return found

    def kill_group(self, sig: int = signal.SIGKILL) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the group, and see the leader die of it."""
        self.kill_group()
        assert self.popen.wait(timeout=10) == -9

    def stop(self, grace: float = 10) -> int:
        """SIGTERM the leader (gunicorn and the sweeper stop gracefully on it), then
        SIGKILL whatever is left of the group."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        self.kill_group(signal.SIGKILL)
        return self.popen.wait(timeout=10)


class Procs:
    """Every child a test starts; all of them are killed when the test ends, pass or fail."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.started: list[Proc] = []

    def start(self, name: str, args: list[str], env: dict[str, str]) -> Proc:
        proc = Proc(name, args, env, self.root / f"{name}.log")
        self.started.append(proc)
        return proc

    def switchboard(self, name: str, *args: str, env: dict[str, str]) -> Proc:
        return self.start(name, [SWITCHBOARD, *args], env)

    def agent(self, name: str, *args: str, env: dict[str, str]) -> Proc:
        return self.start(name, [sys.executable, "-u", AGENT, *args], env)

    def serve(self, env: dict[str, str], *, workers: int = 2) -> tuple[Proc, str]:
        """``switchboard serve`` on a free port; returns it and its base URL once it answers."""
        port = free_port()
        env = {**env, "SWITCHBOARD_WEB_WORKERS": str(workers)}
        server = self.switchboard("serve", "serve", "--port", str(port), env=env)
        base = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: answers_200(f"{base}/login/"),
            seconds=60,
            what=f"{base}/login/ to answer 200",
            logs=self.logs,
            watch=[server],
        )
        return server, base

    def logs(self) -> str:
        parts = []
        for proc in self.started:
            text = proc.output()
            if len(text) > 6000:
                tail = text[-6000:]
                # The tail is mostly access-log lines: keep every warning and error before it
                # (the breaker's "database unavailable", the pool's reconnection failures).
                notable = [
                    line
                    for line in text[:-6000].splitlines()
                    if any(mark in line for mark in _NOTABLE)
                ]
                text = "\n".join(["[…notable lines before the tail:]", *notable[-200:], "[…]"])
                text += "\n" + tail
            state = "running" if proc.alive() else f"exited {proc.popen.returncode}"
            parts.append(f"----- {proc.name} (pid {proc.pid}, {state}) -----\n{text}")
        return "\n".join(parts)

    def tracebacks(self) -> list[str]:
        """Every traceback any started process printed (a chained one as two), each with the
        line before it and its exception line: what "no traceback" shows when it fails."""
        found = []
        for proc in self.started:
            lines = proc.output().splitlines()
            for at, line in enumerate(lines):
                if line.startswith("Traceback"):
                    end = at + 1
                    while end < len(lines) and lines[end].startswith(" "):
                        end += 1
                    found.append(f"{proc.name}:\n" + "\n".join(lines[max(at - 1, 0) : end + 1]))
        return found

    def close(self) -> None:
        for proc in self.started:
            proc.kill_group(signal.SIGKILL)
        for proc in self.started:
            try:
                proc.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def wait_until(
    predicate: Callable[[], Any],
    *,
    seconds: float,
    what: str,
    logs: Callable[[], str],
    watch: list[Proc] = (),
    every: float = 0.05,
) -> Any:
    """Poll ``predicate`` until it returns something truthy (returned); fail with the logs
    when ``seconds`` pass first, or as soon as a watched process exits."""
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        for proc in watch:
            if not proc.alive():
                pytest.fail(
                    f"{proc.name} exited ({proc.popen.returncode}) while waiting for {what}\n"
                    f"{logs()}"
                )
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds}s waiting for {what}\n{logs()}")
        time.sleep(every)


def blocked_by(observer, holder) -> int | None:
    """The backend waiting for a lock ``holder`` (a connection) holds, if one is."""
    row = observer.execute(
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
        [holder.info.backend_pid],
    ).fetchone()
    return row[0] if row else None


def kill_blocked(proc: Proc, holder, observer, *, what: str, logs: Callable[[], str]) -> None:
    """Wait (45 s at the most) until ``proc`` waits on a lock ``holder`` holds, SIGKILL it
    there, release the lock, and wait until its database session is gone (PostgreSQL rolls
    back what it had begun: the orphaned statement runs on, then finds its client gone)."""
    backend = wait_until(
        lambda: blocked_by(observer, holder), seconds=45, what=what, logs=logs, watch=[proc]
    )
    proc.kill()
    holder.rollback()
    wait_until(
        lambda: (
            not observer.execute(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend]
            ).fetchone()
        ),
        seconds=15,
        what=f"the killed {proc.name}'s session (backend {backend}) to end",
        logs=logs,
    )


def ignore_transport(call: Callable[[], Any]) -> None:
    """A request that dies with the server: whatever the client says then is not the point."""
    from switchboard.client import SwitchboardError

    try:
        call()
    except (SwitchboardError, OSError):
        pass


def until_quiet(
    processes: Callable[[], list],
    *,
    seconds: float,
    what: str,
    ready: Callable[[], bool] = lambda: True,
) -> None:
    """Until ``processes`` (psutil processes: a server and its workers) have used under 20 ms
    of CPU in each of two quarter seconds in a row, with ``ready()`` true at each (say, all
    the connections there): every request sent them has been read and answered or parked (a
    parked long-poll costs nothing). Beside a busy neighbour that takes longer than on a quiet
    machine, which is why a test waits for it instead of a fixed time (a fixed 1.5 s once
    measured the first request beside 500 waiters still being read)."""
    import psutil

    def used() -> float:
        total = 0.0
        for each in processes():
            try:
                times = each.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    deadline = time.monotonic() + seconds
    before, quiet = used(), 0
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = used()
        quiet = quiet + 1 if now - before < 0.02 and ready() else 0
        if quiet >= 2:
            return
        before = now
    raise AssertionError(f"{what} within {seconds} s")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers_200(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def env_without(env: dict[str, str], *names: str) -> dict[str, str]:
    return {key: value for key, value in env.items() if key not in names}
