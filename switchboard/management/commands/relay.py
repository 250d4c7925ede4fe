"""``switchboard relay [options] -- COMMAND [ARGS…]``: a fresh process per claimed attempt.

The runner is ``switchboard.relay`` (a plain client program); this command only gives it the
``switchboard`` name. It touches no database and runs no system checks.
"""

from __future__ import annotations

import argparse
import os
import sys

from django.core.management.base import BaseCommand, DjangoHelpFormatter

from switchboard import relay


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's option order, with the exit codes and environment laid out as written."""


class Command(BaseCommand):
    help = relay.DESCRIPTION
    requires_system_checks: list[str] = []

    def create_parser(self, prog_name: str, subcommand: str, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.formatter_class = _HelpFormatter
        parser.epilog = relay.epilog()
        return parser

    def add_arguments(self, parser) -> None:
        relay.add_arguments(parser)

    def handle(self, *args, **options) -> None:
        relay.hand_off_token()  # re-executes this command without the token in its environment
        try:
            config = relay.config_from(options, os.environ)
        except relay.UsageError as exc:
            self.stderr.write(f"relay: {exc}")
            sys.exit(relay.RELAY_USAGE)
        status = relay.Relay(config, stdout=sys.stdout, stderr=sys.stderr).run()
        if status:
            sys.exit(status)
