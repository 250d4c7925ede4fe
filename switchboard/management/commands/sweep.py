"""``switchboard sweep``: the sweeper loop alone; ``--once`` runs one pass and exits."""

from __future__ import annotations

import signal
import threading
from dataclasses import asdict

from django.conf import settings
from django.core.management.base import BaseCommand

from switchboard.queues import sweeper


class Command(BaseCommand):
    help = "Reap lapsed leases, requeue due retries and apply retention, every interval."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="run one pass, print it, exit")
        parser.add_argument(
            "--interval",
            type=float,
            default=None,
            help="seconds between passes [SWITCHBOARD_SWEEP_INTERVAL_SECONDS]",
        )

    def handle(self, *args, once: bool, interval: float | None, **options) -> None:
        if once:
            report = sweeper.sweep_once()
            for name, count in asdict(report).items():
                self.stdout.write(f"{name}: {count}")
            return

        stop = threading.Event()
        # The loop runs in a thread so the signal handler (which runs on the main thread)
        # only sets the event and never contends for a lock the loop holds.
        loop = threading.Thread(
            target=sweeper.run_forever,
            args=(interval or settings.SWITCHBOARD_SWEEP_INTERVAL_SECONDS, stop),
            name="sweeper",
        )
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        loop.start()
        while loop.is_alive():
            loop.join(timeout=0.5)
