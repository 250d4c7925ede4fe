"""The endpoint token's way into the relay: read from ``SWITCHBOARD_TOKEN``, then carried
across a re-execution on an inherited pipe, so that no environment the relay's command can read
(``/proc/<pid>/environ``) ever held it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

# The token reaches the relay in SWITCHBOARD_TOKEN; the relay re-executes itself at once without
# it, the token on an inherited pipe named by this variable (hand_off_token).
TOKEN_FD_VARIABLE = "SWITCHBOARD_RELAY_TOKEN_FD"
# Never passed on to the command.
HIDDEN_VARIABLES = frozenset({"SWITCHBOARD_TOKEN", TOKEN_FD_VARIABLE})


def hand_off_token() -> None:
    """Re-execute this relay without SWITCHBOARD_TOKEN in its environment, the token passed
    on an inherited pipe (read once by ``read_token``, then closed).

    A process's environment as it was started stays readable in ``/proc/<pid>/environ`` by
    every process of the same user for the process's whole life (deleting the variable from
    ``os.environ`` does not change it), so the relay's command, run as the same user, could
    read the endpoint token from its parent. After the re-exec the relay's environment never
    held the token. What the relay's memory holds is out of reach of its command where
    ptrace is limited to descendants (Yama's default); docs/relay.md says what is not."""
    token = os.environ.get("SWITCHBOARD_TOKEN")
    if token is None or TOKEN_FD_VARIABLE in os.environ:
        return
    read_end, write_end = os.pipe()
    os.write(write_end, token.encode())  # a few dozen bytes: within the pipe's buffer
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {k: v for k, v in os.environ.items() if k != "SWITCHBOARD_TOKEN"}
    env[TOKEN_FD_VARIABLE] = str(read_end)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def read_token(environ: Mapping[str, str]) -> str:
    """The endpoint token: from the pipe hand_off_token left, else SWITCHBOARD_TOKEN."""
    fd = environ.get(TOKEN_FD_VARIABLE, "")
    if fd.isdigit():
        chunks = []
        try:
            while chunk := os.read(int(fd), 4096):
                chunks.append(chunk)
            os.close(int(fd))
        except OSError:
            chunks = []
        os.environ.pop(TOKEN_FD_VARIABLE, None)
        return b"".join(chunks).decode("utf-8", errors="replace").strip()
    return environ.get("SWITCHBOARD_TOKEN", "").strip()
