"""An attempt's command as a child process: started in a process group of its own, given the
todo's body on stdin when asked, its output relayed line by line with control characters
escaped (the last lines kept for a summary), and signalled as a group."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import IO, TextIO

from switchboard.relay.config import EXIT_COMPLETE

# How much of the command's output a summary may be built from.
TAIL_LINES = 40

# C0 controls but tab, DEL and C1: what a terminal acts on (cursor moves, colours, titles,
# OSC 52 clipboard writes). Shown as \x.. escapes in what the relay prints.
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0A, 0x20), 0x7F]}
_CONTROLS.update({c: f"\\u{c:04x}" for c in range(0x80, 0xA0)})


def visible(line: str) -> str:
    """A command's output line as the relay prints it: control characters escaped, so a
    command (or the todo text it echoes) cannot drive the operator's terminal."""
    return line.translate(_CONTROLS)


def describe_status(status: int) -> str:
    """A process's exit status in words: ``exited 1``, ``killed by SIGKILL``."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited {status}"


def signal_group(process: subprocess.Popen, signum: int) -> None:
    """``signum`` to the process group ``process`` leads, if any of it is left."""
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class Child:
    """One attempt's command: ``process`` once made; ``pump`` starts relaying its output."""

    def __init__(self, command: Sequence[str], *, env: Mapping[str, str], body: str | None) -> None:
        """Start ``command``, with ``body`` on its stdin when it is not None (else none)."""
        self.body = body
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if body is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            # Its own process group: a terminal's Ctrl-C reaches only the relay (which then
            # stops the command on purpose), and stopping it reaches the command's children.
            process_group=0,
        )
        self._threads: list[threading.Thread] = []

    def pump(
        self,
        *,
        prefix: str,
        emit: Callable[[TextIO, str], None],
        stdout: TextIO,
        stderr: TextIO,
    ) -> None:
        """Relay the command's stdout and stderr to ``stdout`` and ``stderr`` (each line
        after ``prefix``, escaped) and feed it the body, each in a thread of its own."""
        assert self.process.stdout is not None and self.process.stderr is not None
        self._threads = [
            threading.Thread(
                target=self._relay, args=(self.process.stdout, stdout, prefix, emit), daemon=True
            ),
            threading.Thread(
                target=self._relay, args=(self.process.stderr, stderr, prefix, emit), daemon=True
            ),
        ]
        if self.body is not None:
            self._threads.append(
                threading.Thread(
                    target=self._feed, args=(self.process.stdin, self.body), daemon=True
                )
            )
        for thread in self._threads:
            thread.start()

    def drain(self) -> None:
        """Wait a little for the last of the output."""
        # A background grandchild may hold the pipes open after the command exits.
        for thread in self._threads:
            thread.join(timeout=2)

    def summary(self, status: int | None, *, cap: int) -> str | None:
        """The last lines of output that fit in ``cap`` bytes, under a line saying how the
        command exited (none when it exited 0 or ``status`` is None)."""
        head = "" if status in (None, EXIT_COMPLETE) else f"{describe_status(status)}; "
        lines = [line for line in self.tail if line.strip()]
        if not lines:
            return f"{head}no output".strip("; ") if head else None
        head += "last output:\n" if head else ""
        kept: list[str] = []
        size = len(head.encode())
        for line in reversed(lines):
            cost = len(line.encode()) + 1
            if size + cost > cap:
                if not kept:  # one long line: its end
                    room = cap - size - 4
                    kept.append("…" + line.encode()[-room:].decode("utf-8", errors="ignore"))
                break
            kept.append(line)
            size += cost
        return head + "\n".join(reversed(kept))

    @staticmethod
    def _feed(stdin: IO[bytes], body: str) -> None:
        try:
            stdin.write(body.encode("utf-8"))
        except OSError:
            pass  # the command did not read it all; that is its business
        finally:
            try:
                stdin.close()
            except OSError:
                pass

    def _relay(
        self,
        stream: IO[bytes],
        sink: TextIO,
        prefix: str,
        emit: Callable[[TextIO, str], None],
    ) -> None:
        with stream:
            for raw in iter(lambda: stream.readline(65536), b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                self.tail.append(line)
                emit(sink, prefix + visible(line))
