"""``python -m switchboard.relay``: the relay without Django (no settings, no database)."""

from __future__ import annotations

import argparse
import os
import sys

from switchboard.relay.config import (
    DESCRIPTION,
    RELAY_USAGE,
    UsageError,
    add_arguments,
    config_from,
    epilog,
)
from switchboard.relay.handoff import hand_off_token
from switchboard.relay.runner import Relay


def main(argv: list[str] | None = None, *, prog: str = "python -m switchboard.relay") -> int:
    parser = argparse.ArgumentParser(
        prog=prog,
        description=DESCRIPTION,
        epilog=epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    options = vars(parser.parse_args(argv))
    hand_off_token()
    try:
        config = config_from(options, os.environ)
    except UsageError as exc:
        print(f"relay: {exc}", file=sys.stderr)
        return RELAY_USAGE
    return Relay(config).run()


if __name__ == "__main__":
    sys.exit(main())
