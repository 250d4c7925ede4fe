"""The ``switchboard`` command: Django's management commands under the project's name.

``switchboard up`` is what ``make run`` runs; ``serve``, ``sweep``, ``adduser``, ``vend``,
``schedule`` and ``demo`` (and ``relay``) live in ``switchboard/management/commands`` and work
as ``python manage.py <command>`` too.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        # Reading settings here (not lazily inside Django) turns a missing SECRET_KEY or a
        # bad environment variable into one clear line instead of a traceback.
        settings.INSTALLED_APPS  # noqa: B018
    except ImproperlyConfigured as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        sys.exit(2)
    execute_from_command_line(["switchboard", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
