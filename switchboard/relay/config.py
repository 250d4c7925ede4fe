"""What a relay is asked to do: ``switchboard relay``'s options and their checks (``Config``),
the exit statuses its command and the relay itself speak, and the help that says so."""

from __future__ import annotations

import argparse
import os
import shutil
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from switchboard.client import Client
from switchboard.relay.handoff import read_token

# What the command's exit status asks the relay to do (sysexits.h names where there is one).
EXIT_COMPLETE = 0
EXIT_NOT_RETRYABLE = 65  # EX_DATAERR: the todo itself is wrong; dead-letter it now
EXIT_RELEASE = 75  # EX_TEMPFAIL: not now (a usage limit, a shutdown); no verdict
# Ask a person (the question in the attempt's question file): the first status past
# sysexits.h's range (64-78), so no conventional error status is taken for a question; a
# shell's own are 1, 2, 126, 127 and 128 + a signal's number.
EXIT_ASK = 79
# Split the todo (issue 44): make the children file's todos its children and wait for them.
EXIT_SPLIT = 80
EXIT_CODES = {
    EXIT_COMPLETE: "complete (with the result file's JSON, if written)",
    EXIT_NOT_RETRYABLE: "fail, not retryable: the todo is dead-lettered at once",
    EXIT_RELEASE: "release: no verdict, the failure budget untouched",
    EXIT_ASK: "ask a person the question file's question: the todo waits for an answer",
    EXIT_SPLIT: "split: the children file's todos become its children, and it waits for them",
}

CHILDREN_MAX = 100  # todos one children file may make
CHILD_FIELDS = ("title", "body", "to", "key", "priority", "max_attempts")

# The relay's own exit statuses.
RELAY_OK = 0  # stopped by a signal, --once or --max-todos
RELAY_ERROR = 1  # the server refused the token, or became unusable
RELAY_USAGE = 2  # a bad option, no token, a command that does not exist
RELAY_REFUSED = 3  # the server is not a Switchboard with attempt history and fences

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_CLAIMANT = "{host}/{pid}/{attempt}"
CLAIMANT_FIELDS = ("host", "pid", "attempt", "slot")

# The variables the command is started with (its own environment otherwise, minus
# SWITCHBOARD_TOKEN).
ENVIRONMENT = {
    "SWITCHBOARD_TODO_ID": "the todo's id",
    "SWITCHBOARD_ATTEMPT_SEQ": "this attempt's seq (the durable attempt id)",
    "SWITCHBOARD_ROUND": "the todo's round (a person's rerun starts a new one)",
    "SWITCHBOARD_TRY": "this attempt's try within its round (1, 2, …)",
    "SWITCHBOARD_CLAIMANT": "the claimant label this attempt was claimed with",
    "SWITCHBOARD_ATTEMPT_DIR": "the attempt's folder (holds the files below)",
    "SWITCHBOARD_CONTEXT_FILE": "context.json: the todo and its prior attempts",
    "SWITCHBOARD_CONTEXT_MARKDOWN": "context.md: the same, short, for a model to read",
    "SWITCHBOARD_RESULT_FILE": "write the result here as JSON (optional)",
    "SWITCHBOARD_SUMMARY_FILE": "write a summary here (optional; else the last lines of output)",
    "SWITCHBOARD_ARTIFACT_FILE": "write an mcp:// handle or https:// URL here (optional)",
    "SWITCHBOARD_QUESTION_FILE": f"to ask a person, write the question here as JSON and exit "
    f"{EXIT_ASK}",
    "SWITCHBOARD_QUESTION_TEXT_FILE": "... or write it here as plain text",
    "SWITCHBOARD_CHILDREN_FILE": f"to split the todo, write its children here as JSON and exit "
    f"{EXIT_SPLIT}",
}

DESCRIPTION = textwrap.fill(
    "Run COMMAND as a fresh process for every attempt this endpoint claims: claims with a "
    "fence and a claimant label, writes the todo and its prior attempts to a context file, "
    "heartbeats while COMMAND runs and reports by its exit status. The endpoint token comes "
    "from SWITCHBOARD_TOKEN (never an argument: ps shows arguments).",
    width=80,
)


def epilog() -> str:
    codes = "\n".join(f"  {code:<5} {meaning}" for code, meaning in EXIT_CODES.items())
    width = max(map(len, ENVIRONMENT))
    env = "\n".join(f"  {name:<{width}} {meaning}" for name, meaning in ENVIRONMENT.items())
    return (
        f"COMMAND's exit status:\n{codes}\n  other fail (retried with backoff, dead-lettered at"
        " the cap)\n\n"
        "If a heartbeat answers conflict (a person released or canceled the todo, the sweeper\n"
        "reaped it, another worker took it over), COMMAND is stopped (SIGTERM, --grace,\n"
        "SIGKILL) and nothing is reported. SIGINT/SIGTERM to the relay stops COMMAND the same\n"
        "way and releases the todo; a second signal skips the grace period.\n\n"
        f'To ask a person, COMMAND writes question.json ({{"text": ..., and optionally\n'
        '"choices": [...] or "answer_schema": {...}, "answer_within_seconds": N,\n'
        '"on_no_answer": "requeue" or "dead_letter"}) or question.txt (the text alone) in its\n'
        f"folder and exits {EXIT_ASK}. The todo waits until a person or its requester answers\n"
        "(no try spent); the next attempt's context file holds the question and the answer.\n"
        f"Exiting {EXIT_ASK} without a readable question file fails the attempt, saying why.\n\n"
        f"To split the todo, COMMAND writes children.json (a list of 1 to {CHILDREN_MAX} objects,\n"
        '{"title": ..., and optionally "body", "to", "key", "priority", "max_attempts"}) and\n'
        f"exits {EXIT_SPLIT}: the relay makes each a child of the todo and releases it until they\n"
        "have all ended; its next attempt's context file lists how each ended.\n\n"
        f"COMMAND's environment (beside its own, minus SWITCHBOARD_TOKEN):\n{env}\n\n"
        "The relay exits 0 when stopped or done (--once, --max-todos), 1 when the server\n"
        "refuses the token, 2 on a usage error, 3 when the server lacks attempt history.\n"
        "See docs/relay.md."
    )


class UsageError(Exception):
    """A bad option or environment: said in one line, exit status 2."""


@dataclass(frozen=True, kw_only=True)
class Config:
    url: str
    token: str
    command: tuple[str, ...]
    concurrency: int = 1
    lease_seconds: int = 60
    heartbeat_seconds: float = 20.0
    grace_seconds: float = 10.0
    claimant: str = DEFAULT_CLAIMANT
    wait_seconds: float = 10.0
    retry_cap_seconds: float = 30.0
    stdin: bool = False
    once: bool = False
    max_todos: int | None = None
    workdir: Path | None = None
    # A remote A2A agent works each todo instead of a command (relay/remote.py).
    a2a: str | None = None
    a2a_to: str | None = None
    a2a_token: str = ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        default=None,
        help=f"the Switchboard to work [SWITCHBOARD_URL, else {DEFAULT_URL}]",
    )
    parser.add_argument(
        "--concurrency", type=int, default=1, help="attempts run at once [1]", metavar="N"
    )
    parser.add_argument(
        "--lease",
        type=int,
        default=60,
        help="lease seconds each claim and heartbeat asks for; a dead relay's todo is "
        "reaped this long after its last heartbeat [60]",
        metavar="SECONDS",
    )
    parser.add_argument(
        "--heartbeat",
        type=float,
        default=None,
        help="seconds between heartbeats [a third of --lease]",
        metavar="SECONDS",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=10.0,
        help="seconds COMMAND has to exit after SIGTERM before SIGKILL [10]",
        metavar="SECONDS",
    )
    parser.add_argument(
        "--claimant",
        default=DEFAULT_CLAIMANT,
        help="claimant label template; fields {host}, {pid} (the relay's), {attempt} "
        "(this relay's count of claims: 1, 2, …) and {slot} [%(default)s]",
        metavar="TEMPLATE",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=None,
        help="seconds an idle claim long-polls (the server caps it at 30); on SIGTERM the "
        "relay waits this long at most for idle claims to return [10; 0 with --once]",
        metavar="SECONDS",
    )
    parser.add_argument(
        "--retry-cap",
        type=float,
        default=30.0,
        help="the longest wait before a claim or a report is tried again while the server "
        "is away (waits start at 0.5 s, double, and are jittered) [30]",
        metavar="SECONDS",
    )
    parser.add_argument(
        "--stdin", action="store_true", help="also give COMMAND the todo's body on stdin"
    )
    parser.add_argument(
        "--once",
        action="store_true",
        help="work what is claimable now and exit when a claim finds nothing (for cron)",
    )
    parser.add_argument(
        "--max-todos",
        type=int,
        default=None,
        help="exit after claiming this many todos",
        metavar="N",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where each attempt's folder is written and kept [a temporary folder, deleted]",
        metavar="DIR",
    )
    parser.add_argument(
        "--a2a",
        default=None,
        help="send each todo to this A2A agent (its base URL, or its JSON-RPC URL) instead of "
        "running a command; its token from SWITCHBOARD_A2A_TOKEN (docs/relay.md)",
        metavar="URL",
    )
    parser.add_argument(
        "--a2a-to",
        default=None,
        help="metadata.to of each message (a Switchboard's endpoint, when the agent is one)",
        metavar="AGENT",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="the command to run per attempt, after --",
        metavar="-- COMMAND [ARGS...]",
    )


def config_from(options: Mapping[str, Any], environ: Mapping[str, str]) -> Config:
    """A Config from parsed options and the environment, or UsageError."""
    command = list(options.get("command") or [])
    if command and command[0] == "--":
        command = command[1:]
    a2a = options.get("a2a")
    if a2a is not None:
        if command:
            raise UsageError("--a2a works each todo itself: name no command with it")
        if not a2a.startswith(("http://", "https://")):
            raise UsageError(f"--a2a {a2a!r}: an http(s) URL")
    elif not command:
        raise UsageError("name the command to run per attempt: switchboard relay -- COMMAND")
    elif os.sep not in command[0] and shutil.which(command[0]) is None:
        raise UsageError(f"command not found: {command[0]}")
    token = read_token(environ)
    if not token:
        raise UsageError(
            "set SWITCHBOARD_TOKEN to the endpoint's token (it is never an argument, "
            "which ps would show)"
        )
    url = options.get("url") or environ.get("SWITCHBOARD_URL") or DEFAULT_URL
    concurrency = options.get("concurrency") or 1
    lease = options.get("lease") or 60
    once = bool(options.get("once"))
    wait = options.get("wait")
    wait = (0.0 if once else 10.0) if wait is None else wait
    heartbeat = options.get("heartbeat")
    heartbeat = lease / 3 if heartbeat is None else heartbeat
    grace = options.get("grace")
    grace = 10.0 if grace is None else grace
    max_todos = options.get("max_todos")
    retry_cap = options.get("retry_cap")
    retry_cap = 30.0 if retry_cap is None else retry_cap
    claimant = options.get("claimant") or DEFAULT_CLAIMANT
    if concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    if not 1 <= lease <= 86400:
        raise UsageError("--lease must be 1 to 86400 seconds")
    if not 0 < heartbeat < lease:
        raise UsageError("--heartbeat must be more than 0 and less than --lease")
    if grace < 0 or wait < 0:
        raise UsageError("--grace and --wait cannot be negative")
    if max_todos is not None and max_todos < 1:
        raise UsageError("--max-todos must be at least 1")
    if not 0 < retry_cap <= 3600:
        raise UsageError("--retry-cap must be more than 0 and at most 3600 seconds")
    try:
        claimant.format(**dict.fromkeys(CLAIMANT_FIELDS, "x"))
    except (KeyError, IndexError, ValueError) as exc:
        raise UsageError(
            f"--claimant {claimant!r}: use only the fields "
            + ", ".join("{" + name + "}" for name in CLAIMANT_FIELDS)
        ) from exc
    try:
        Client(url, token)
    except ValueError as exc:
        raise UsageError(f"--url {url!r}: {exc}") from exc
    workdir = options.get("workdir")
    return Config(
        url=url,
        token=token,
        command=tuple(command),
        concurrency=concurrency,
        lease_seconds=lease,
        heartbeat_seconds=heartbeat,
        grace_seconds=grace,
        claimant=claimant,
        wait_seconds=wait,
        retry_cap_seconds=retry_cap,
        stdin=bool(options.get("stdin")),
        once=once,
        max_todos=max_todos,
        workdir=Path(workdir).resolve() if workdir else None,
        a2a=a2a,
        a2a_to=options.get("a2a_to"),
        a2a_token=environ.get("SWITCHBOARD_A2A_TOKEN", ""),
    )
