"""The ``switchboard`` command: Django's management commands under the project's name.

``switchboard up`` is what ``make run`` runs; ``serve``, ``sweep``, ``adduser``, ``vend``,
``schedule`` and ``demo`` live in ``switchboard/management/commands`` and work as ``python
manage.py <command>`` too. ``switchboard relay`` is the relay's own program
(``switchboard.relay``, as ``python -m switchboard.relay``), run without Django; ``python
manage.py relay`` hands its arguments to the same program.
"""

from __future__ import annotations

import os
import sys

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def version() -> str:
    """The installed distribution's version ("unknown" in a checkout never installed)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("switchboard")
    except PackageNotFoundError:
        return "unknown"


def _up_on_this_machine(args: list[str]) -> bool:
    """``switchboard up`` on loopback with neither SECRET_KEY nor SWITCHBOARD_DEV set: a first
    run on a laptop (what ``make run`` is, with SWITCHBOARD_DEV=1), so it runs as one. A host
    other than loopback, or SWITCHBOARD_DEV=0 said outright, still needs a SECRET_KEY."""
    if not args or args[0] != "up" or "SWITCHBOARD_DEV" in os.environ:
        return False
    if os.environ.get("SECRET_KEY") or os.environ.get("DEBUG"):
        return False
    host = "127.0.0.1"
    for n, arg in enumerate(args):
        if arg == "--host" and n + 1 < len(args):
            host = args[n + 1]
        elif arg.startswith("--host="):
            host = arg.partition("=")[2]
    return host in LOOPBACK


def _help_only(args: list[str]) -> bool:
    """``switchboard``, ``switchboard help [command]``, or any ``-h``/``--help``: a request
    that prints and reads nothing else."""
    return not args or args[0] == "help" or bool({"-h", "--help"} & set(args))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["--version"], ["-V"]):
        print(f"switchboard {version()}")
        return
    if args[:1] == ["relay"]:
        # A client program: no settings, no database, no Django (an agent's machine has no
        # SECRET_KEY to give it), started twice a relay (the token hand-off re-executes it).
        from switchboard.relay.__main__ import main as relay

        sys.exit(relay(args[1:], prog="switchboard relay"))
    if args[:1] == ["worker"]:  # in the user's own Django project, with its settings
        from switchboard.tasks.worker import main as worker

        sys.exit(worker(args[1:]))
    if _help_only(args):
        # Help needs neither a key nor a database: placeholders, for this process only, rather
        # than refuse without a SECRET_KEY or start the embedded PostgreSQL (an initdb, on a
        # first run) to print it.
        import secrets

        os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(48))
        os.environ.setdefault("DATABASE_URL", "postgresql://localhost/switchboard")
    elif _up_on_this_machine(args):
        os.environ["SWITCHBOARD_DEV"] = "1"
        print(
            "switchboard up: no SECRET_KEY, on this machine only: running as a laptop "
            "(SWITCHBOARD_DEV=1: plain http on loopback, a dev-only key).",
            file=sys.stderr,
        )
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
    from django.db import OperationalError

    try:
        execute_from_command_line(["switchboard", *args])
    except OperationalError as exc:
        # A database it cannot reach (down, a wrong DATABASE_URL, a refused password): one line
        # naming where it looked, not a traceback through Django's connection handling.
        print(f"switchboard: the database at {_database_place()} failed: {exc}", file=sys.stderr)
        sys.exit(1)


def _database_place() -> str:
    """Where the default database is, as a person would say it: host (or socket folder),
    port and name; never the user or the password."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    host = db.get("HOST") or "the local socket"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"{host}{port}, database {db.get('NAME')!r}"


if __name__ == "__main__":
    main()
