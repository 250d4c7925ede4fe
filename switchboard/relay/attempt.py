"""One claimed todo, from claim to report: its folder and its command, the heartbeats while
the command runs (a ``conflict`` stops it and reports nothing), and the close its exit status
asks for, tried again while the server cannot take it (the client's ``Job`` does: with the
same attempt, for up to ``Backoff.close_seconds``, or until a second signal hurries the
relay)."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TextIO

from switchboard.client import Client, Job, SwitchboardError
from switchboard.relay.child import Child, describe_status, signal_group
from switchboard.relay.config import (
    EXIT_ASK,
    EXIT_COMPLETE,
    EXIT_NOT_RETRYABLE,
    EXIT_RELEASE,
    EXIT_SPLIT,
    Config,
)
from switchboard.relay.context import AttemptFolder


class Runner(Protocol):
    """What an attempt uses of the relay that claimed it (``runner.Relay``)."""

    config: Config
    client: Client
    limits: dict[str, int]
    stopping: threading.Event  # claim no more; stop commands; release
    hurry: threading.Event  # a second signal: no grace period, no waiting
    stdout: TextIO
    stderr: TextIO

    @property
    def workdir(self) -> Path: ...

    def say(self, message: str) -> None: ...

    def emit(self, stream: TextIO, line: str) -> None: ...

    def fatal(self, message: str) -> None: ...


class Attempt:
    """One claimed todo: its folder, its process, its heartbeats and its report."""

    def __init__(
        self, relay: Runner, claimed: dict, *, claimant: str, then: Callable | None = None
    ) -> None:
        self.relay = relay
        self.config = relay.config
        self.claimed = claimed
        # ``then``: the report claims the slot's next todo too (runner._NextClaim).
        self.job = Job(relay.client, claimed, then=then, give_up=relay.hurry)
        self.todo: dict = claimed["todo"]
        self.seq: int = claimed["attempt_seq"]
        self.claimant = claimant

    def say(self, message: str) -> None:
        self.relay.say(f"todo {self.todo['id']} attempt {self.seq}: {message}")

    def run(self) -> None:
        prior = self.claimed.get("prior_attempts") or []
        died = sum(1 for attempt in prior if attempt.get("died"))
        self.say(
            f"claimed as {self.claimant} (round {self.todo.get('round')}, try "
            f"{self.todo.get('attempt')}; {len(prior)} earlier attempt(s) listed, {died} died)"
        )
        try:
            # A fresh folder of its own, whatever the workdir holds.
            folder = AttemptFolder.make(
                self.relay.workdir, todo_id=self.todo["id"], seq=self.seq, say=self.say
            )
            folder.write_context(self.claimed, claimant=self.claimant)
            child = self._start(folder)
        except OSError as exc:
            # Not the todo's fault: hand it back untouched and stop, or the relay would
            # spend every todo's budget on its own broken set-up.
            self.release(f"the relay could not start its command: {exc}")
            self.relay.fatal(f"cannot run {self.config.command[0]}: {exc}")
            return
        try:
            ending = self._supervise(child.process)
        finally:
            child.drain()
        if ending == "exited":
            self._report_exit(child.process.returncode, folder=folder, child=child)
        elif ending == "stopped":
            self.release("the relay was stopped while the command ran; released")
        if self.config.workdir is None:
            shutil.rmtree(folder.path, ignore_errors=True)

    def _start(self, folder: AttemptFolder) -> Child:
        child = Child(
            self.config.command,
            env=folder.environment(self.todo, seq=self.seq, claimant=self.claimant),
            body=self.todo.get("body", "") if self.config.stdin else None,
        )
        self.say(f"started {self.config.command[0]} (pid {child.process.pid})")
        child.pump(
            prefix=f"[todo {self.todo['id']}] ",
            emit=self.relay.emit,
            stdout=self.relay.stdout,
            stderr=self.relay.stderr,
        )
        return child

    # --- while the command runs ------------------------------------------------------------

    def _supervise(self, process: subprocess.Popen) -> str:
        """Wait for the command while heartbeating: "exited", "stopped" (the relay is
        stopping; released by the caller) or "lost" (fenced out: report nothing)."""
        interval = self.config.heartbeat_seconds
        next_beat = time.monotonic() + interval
        while process.poll() is None:
            if self.relay.stopping.is_set():
                self._stop(process, keep_alive=True)
                return "stopped"
            if time.monotonic() >= next_beat:
                beat = self._heartbeat()
                if beat == "lost":
                    self._stop(process, keep_alive=False)
                    return "lost"
                next_beat = time.monotonic() + (interval if beat == "ok" else min(interval, 1))
            self.relay.stopping.wait(0.05)
        if self.relay.stopping.is_set():
            # The command ended as the relay was told to stop: most likely the same signal
            # (systemd's default KillMode signals every process of the unit), so its exit
            # status is no verdict on the todo.
            return "stopped"
        return "exited"

    def _heartbeat(self) -> str:
        try:
            self.job.heartbeat(lease_seconds=self.config.lease_seconds)
            return "ok"
        except SwitchboardError as exc:
            if exc.code in ("conflict", "not_found"):
                self.say(
                    f"heartbeat answered {exc.code}: this attempt was ended elsewhere (released"
                    " or canceled by a person, reaped, or taken over); stopping the command and"
                    " reporting nothing"
                )
                return "lost"
            if exc.code in ("unauthorized", "forbidden"):
                self.relay.fatal(f"heartbeat answered {exc.code}: {exc.message}")
                self.say(f"heartbeat answered {exc.code}; stopping the command")
                return "lost"
            self.say(f"heartbeat answered {exc.code}; trying again")
        except OSError as exc:
            self.say(f"heartbeat failed ({type(exc).__name__}); trying again")
        return "retry"

    def _stop(self, process: subprocess.Popen, *, keep_alive: bool) -> None:
        """SIGTERM to the command's process group, ``--grace`` seconds (heartbeating if the
        attempt is still ours), then SIGKILL."""
        signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + self.config.grace_seconds
        next_beat = time.monotonic() + self.config.heartbeat_seconds
        while process.poll() is None and time.monotonic() < deadline:
            if self.relay.hurry.is_set():
                break
            if keep_alive and time.monotonic() >= next_beat:
                keep_alive = self._heartbeat() != "lost"
                next_beat = time.monotonic() + self.config.heartbeat_seconds
            time.sleep(0.05)
        if process.poll() is None:
            self.say(f"the command outlived its grace period; SIGKILL to pid {process.pid}")
        # Also any of its children still in the group (the group outlives its leader only
        # while a member is left, so its id names nobody else).
        signal_group(process, signal.SIGKILL)
        process.wait()
        self.say(f"the command was stopped ({describe_status(process.returncode)})")

    # --- reporting ------------------------------------------------------------------------

    def _report_exit(self, status: int, *, folder: AttemptFolder, child: Child) -> None:
        cap = self.relay.limits["summary_bytes"]
        summary = folder.summary()
        artifact = folder.artifact()
        if status == EXIT_RELEASE:
            self.say(f"exited {status}: releasing")
            self._close(
                "release", summary=summary or child.summary(status, cap=cap), artifact=artifact
            )
            return
        if status == EXIT_ASK:
            asked, problem = folder.question()
            if asked is not None:
                self.say(f"exited {status}: asking a person")
                summary = summary or child.summary(None, cap=cap)
                self._close("release", **asked, summary=summary, artifact=artifact)
                return
            # The command broke its contract (as one that exits 0 with a result file that is
            # not JSON): the attempt fails, retried, its summary saying why, for people to see.
            self.say(f"exited {status} to ask a person, but {problem}: failing")
            summary = f"exited {status} to ask a person, but {problem}"
            self._close("fail", summary=summary, artifact=artifact)
            return
        if status == EXIT_SPLIT:
            self._split(folder, summary=summary or child.summary(None, cap=cap), status=status)
            return
        present, result, problem = folder.result(self.relay.limits)
        if status == EXIT_COMPLETE and problem is None:
            self.say("exited 0: completing")
            arguments: dict[str, Any] = {"summary": summary or child.summary(None, cap=cap)}
            if present:
                arguments["result"] = result
            self._close("complete", **arguments, artifact=artifact)
            return
        retryable = status != EXIT_NOT_RETRYABLE
        if problem is not None and status == EXIT_COMPLETE:
            summary = f"exited 0, but {problem}"
        arguments = {"summary": summary or child.summary(status, cap=cap), "retryable": retryable}
        if present:
            arguments["result"] = result
        self.say(f"{describe_status(status)}: failing" + ("" if retryable else " (not retryable)"))
        self._close("fail", **arguments, artifact=artifact)

    def _split(self, folder: AttemptFolder, *, summary: str | None, status: int) -> None:
        """The command split its todo (issue 44): each todo of its children file is made a
        child of it (each with an idempotency key of this attempt's, so a retried create
        makes no second child), then the todo is released until they have all ended. A
        children file the relay cannot read, or a child the server refuses, fails the
        attempt saying why (the children made before it stay, and end with the todo if it
        is canceled)."""
        children, problem = folder.children()
        if children is None:
            self.say(f"exited {status} to split, but {problem}: failing")
            self._close("fail", summary=f"exited {status} to split, but {problem}")
            return
        todo_id, seq = self.job.todo["id"], self.job.attempt_seq
        for n, child in enumerate(children):
            key = f"relay-child-{todo_id}-{seq}-{n}"
            try:
                self.relay.client.create_todo(parent=todo_id, idempotency_key=key, **child)
            except SwitchboardError as exc:
                if exc.code in ("conflict", "not_found"):
                    self.say(
                        f"a child's create answered {exc.code}: the attempt was ended elsewhere"
                    )
                    return
                why = f"exited {status} to split, but the server refused child {n}: {exc.message}"
                self.say(why + ": failing")
                self._close("fail", summary=why)
                return
        self.say(f"exited {status}: split into {len(children)} children, waiting for them")
        self._close("release", wait_for_children=True, summary=summary)

    def release(self, summary: str) -> None:
        self._close("release", summary=summary)

    def _close(self, verb: str, **arguments: Any) -> None:
        """Report, the job trying again through an outage (each wait said by the client's
        log, which the relay prints); when it gives up, the lease lapses."""
        arguments = {k: v for k, v in arguments.items() if v is not None}
        while True:
            try:
                ended = getattr(self.job, verb)(**arguments)
                break
            except SwitchboardError as exc:
                if exc.code in ("conflict", "not_found"):
                    self.say(f"{verb} answered {exc.code}: the attempt was ended elsewhere")
                    return
                if exc.code in ("unauthorized", "forbidden"):
                    self.relay.fatal(f"{verb} answered {exc.code}: {exc.message}")
                    return
                if exc.code == "invalid" and "question" in arguments:
                    # A question the server will not take (choices and a form both, a form
                    # that is not flat, a server that does not ask): fail saying so.
                    self.say(f"{verb} answered invalid ({exc.message}); failing instead")
                    verb = "fail"
                    arguments = {
                        "summary": f"the relay could not ask the command's question: {exc.message}",
                    }
                    continue
                if (
                    exc.code == "invalid"
                    and verb != "release"
                    and ("result" in arguments or "artifact" in arguments)
                ):
                    # Something the command wrote (a result nested too deep, say) that the
                    # server will not store: fail the attempt saying so, without it.
                    self.say(f"{verb} answered invalid ({exc.message}); failing without it")
                    verb = "fail"
                    arguments = {
                        "summary": f"the relay could not report this attempt: {exc.message}",
                    }
                    continue
                problem = f"{exc.status} {exc.code}: {exc.message}"
            except OSError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            self.say(f"{verb} failed ({problem}); giving up: the lease will lapse")
            return
        todo = ended.get("todo") or {}
        self.say(
            f"{verb}: {ended.get('outcome')}, {ended.get('disposition')}"
            f" (todo is {todo.get('state')})"
        )
