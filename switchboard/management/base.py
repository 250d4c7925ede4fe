"""What the short administrative commands share."""

from __future__ import annotations

from django.core.management.base import BaseCommand


class RowCommand(BaseCommand):
    """A command that reads or writes a few rows and exits (adduser, vend, schedule): no
    system checks at each run, as Django's own createsuperuser and shell. They import the
    whole URLconf, about 0.1 s of the command's time; ``switchboard check``, serve, up and
    sweep run them."""

    requires_system_checks: list[str] = []
