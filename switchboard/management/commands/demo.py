"""``switchboard demo``: simulated agents working a team's queues over the HTTP API.

The logic lives in ``switchboard.demo``; this command parses options and turns SIGINT and
SIGTERM into a clean stop (agents hand back what they hold).
"""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from switchboard import demo

# The options that are demo.Options' fields of the same name (--member fills ``members``).
_OPTIONS = ("url", "team", "agents", "todos", "duration", "seed", "lease", "pace")


class Command(BaseCommand):
    help = (
        "Run simulated agents against a running Switchboard over the HTTP API, so the Board "
        "has something to show: most complete, some fail, some die mid-lease, some use fences "
        "and claimant labels. `switchboard up` starts it on an empty database."
    )

    def add_arguments(self, parser) -> None:
        defaults = demo.Options()

        def option(name: str, help: str, **kwargs) -> None:
            """``--name``, defaulting to ``demo.Options``' field of that name (``{}`` in
            ``help`` says which)."""
            default = getattr(defaults, name)
            parser.add_argument(f"--{name}", default=default, help=help.format(default), **kwargs)

        option("url", "the server [{}]")
        option(
            "team",
            "the team the demo endpoints live in, created if missing [{}]",
            metavar="SLUG",
        )
        option("agents", "worker threads [{}]", type=int)
        option("todos", "todos seeded [{}]", type=int)
        option("duration", "stop after this long [0: until Ctrl-C]", type=float, metavar="SECONDS")
        option("seed", "seed the random choices [unseeded]", type=int)
        option(
            "lease",
            "lease asked by every claim; dead workers lapse after it [{}]",
            type=int,
            metavar="SECONDS",
        )
        option(
            "pace",
            "mean seconds of work per todo; a new todo every 1.5 x pace [{}]",
            type=float,
            metavar="SECONDS",
        )
        parser.add_argument(
            "--member",
            action="append",
            default=[],
            metavar="NAME",
            help="also make this user a member of the team (repeatable); superusers are made "
            "owners when the demo creates the team",
        )

    def handle(self, *args, **options) -> None:
        settings = demo.Options(
            **{name: options[name] for name in _OPTIONS}, members=tuple(options["member"])
        )
        stop = threading.Event()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                previous[signum] = signal.signal(signum, lambda *_: stop.set())
        try:
            demo.run(settings, stop=stop, say=self._say)
        except demo.DemoError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
