"""``python -m switchboard``: the same as the ``switchboard`` console script."""

from switchboard.cli import main

main()
