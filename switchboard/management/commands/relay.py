"""``python manage.py relay [options] -- COMMAND [ARGS…]``: the relay's own program
(``switchboard.relay``, what ``switchboard relay`` and ``python -m switchboard.relay`` run),
reached through Django's command list. It touches no database and runs no system checks; its
arguments, help and exit codes are the program's, untouched by Django's parser.
"""

from __future__ import annotations

import os
import sys

from django.core.management.base import BaseCommand

from switchboard.relay import DESCRIPTION
from switchboard.relay.__main__ import main


class Command(BaseCommand):
    help = DESCRIPTION
    requires_system_checks: list[str] = []

    def run_from_argv(self, argv: list[str]) -> None:
        sys.exit(main(argv[2:], prog=f"{os.path.basename(argv[0])} {argv[1]}"))

    def print_help(self, prog_name: str, subcommand: str) -> None:  # manage.py help relay
        main(["--help"], prog=f"{prog_name} {subcommand}")
