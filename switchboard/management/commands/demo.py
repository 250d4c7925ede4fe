"""``switchboard demo``: simulated agents working a team's queues over the HTTP API.

The logic lives in ``switchboard.demo``; this command parses options and turns SIGINT and
SIGTERM into a clean stop (agents hand back what they hold).
"""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from switchboard import demo


class Command(BaseCommand):
    help = (
        "Run simulated agents against a running Switchboard over the HTTP API, so the Board "
        "has something to show: most complete, some fail, some die mid-lease, some use fences "
        "and claimant labels. `switchboard up` starts it on an empty database."
    )

    def add_arguments(self, parser) -> None:
        defaults = demo.Options()
        parser.add_argument("--url", default=defaults.url, help=f"the server [{defaults.url}]")
        parser.add_argument(
            "--team",
            default=defaults.team,
            metavar="SLUG",
            help=f"the team the demo endpoints live in, created if missing [{defaults.team}]",
        )
        parser.add_argument(
            "--agents",
            type=int,
            default=defaults.agents,
            help=f"worker threads [{defaults.agents}]",
        )
        parser.add_argument(
            "--todos", type=int, default=defaults.todos, help=f"todos seeded [{defaults.todos}]"
        )
        parser.add_argument(
            "--duration",
            type=float,
            default=defaults.duration,
            metavar="SECONDS",
            help="stop after this long [0: until Ctrl-C]",
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="seed the random choices [unseeded]"
        )
        parser.add_argument(
            "--lease",
            type=int,
            default=defaults.lease,
            metavar="SECONDS",
            help=f"lease asked by every claim; dead workers lapse after it [{defaults.lease}]",
        )
        parser.add_argument(
            "--pace",
            type=float,
            default=defaults.pace,
            metavar="SECONDS",
            help=f"mean seconds of work per todo; a new todo every 1.5 x pace [{defaults.pace}]",
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
            url=options["url"],
            team=options["team"],
            agents=options["agents"],
            todos=options["todos"],
            duration=options["duration"],
            seed=options["seed"],
            lease=options["lease"],
            pace=options["pace"],
            members=tuple(options["member"]),
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
