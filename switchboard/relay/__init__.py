"""``switchboard relay``: run a command as a fresh process for every attempt an endpoint
claims, the way Harness's relay attempts do (docs/decisions/0039-attempt-history.md, "Relay attempts").

The relay is a client program: it talks to Switchboard over HTTP through
``switchboard.client`` and imports nothing of Django, so it runs on a machine without the
server (``python -m switchboard.relay`` needs no settings and no database at all). Per todo:

1. it claims with ``require_fence`` and a claimant label, long-polling while the queue is
   empty, up to ``--concurrency`` attempts at once;
2. it writes the attempt's folder: ``context.json`` and ``context.md`` (the todo and its
   ``prior_attempts``, with the questions they asked and their answers, under the
   untrusted-data notice), and names in the environment where the command may write its
   result, summary, artifact and question (``config.ENVIRONMENT``);
3. it starts the command in a process group of its own and heartbeats for it; a heartbeat
   answered ``conflict`` (a person released or canceled it, the sweeper reaped it, another
   worker took it over) stops the command (SIGTERM, ``--grace`` seconds, SIGKILL) and the
   relay reports nothing, since that attempt is no longer its to report;
4. it reports by the command's exit status (``config.EXIT_CODES``): complete with the result
   file's JSON and a summary (the summary file, else the last lines of output), fail, fail as
   not retryable, release, or ask a person (release with the question file's question: the
   todo waits for an answer, which the next attempt's context holds).

SIGINT or SIGTERM stops the commands the same way and releases what the relay holds; a
second signal stops them without the grace period. The endpoint token comes only from
``SWITCHBOARD_TOKEN`` (an argument would show in ``ps``); the relay re-executes itself without
it at once (``hand_off_token``: ``/proc/<pid>/environ`` would show it to the command), it is
not passed to the command, and neither the token nor a lease token is ever printed. What a
command prints is relayed with its control characters escaped.

One module a part, each importing only modules listed before it:

- ``handoff``: the token's re-execution onto an inherited pipe;
- ``config``: the options, their checks (``Config``), the exit statuses and the help;
- ``child``: the command's process, its output relayed with control characters escaped;
- ``context``: the attempt's folder, ``context.json`` and ``context.md``, what the command left;
- ``attempt``: one claimed todo: its command, its heartbeats, its report;
- ``remote``: ``--a2a``: one claimed todo sent to a remote A2A agent instead of a command;
- ``runner``: ``Relay``, the slots that claim and run attempts until stopped;
- ``__main__``: ``python -m switchboard.relay``.
"""

# What the ``switchboard relay`` command and the tests use.
from switchboard.relay.config import (
    DESCRIPTION,
    RELAY_USAGE,
    Config,
    UsageError,
    add_arguments,
    config_from,
    epilog,
)
from switchboard.relay.handoff import hand_off_token
from switchboard.relay.runner import Relay

__all__ = [
    "DESCRIPTION",
    "RELAY_USAGE",
    "Config",
    "Relay",
    "UsageError",
    "add_arguments",
    "config_from",
    "epilog",
    "hand_off_token",
]
