"""``switchboard serve``: the web server alone (gunicorn with uvicorn workers serving the ASGI
application; switchboard/gunicorn_conf.py)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from gunicorn.app.base import Application

import switchboard

CONFIG_FILE = Path(switchboard.__file__).resolve().parent / "gunicorn_conf.py"


class Command(BaseCommand):
    help = "Serve the Board and the API with gunicorn (settings: switchboard/gunicorn_conf.py)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="address to bind [127.0.0.1]")
        parser.add_argument("--port", type=int, default=8000, help="port to bind [8000]")

    def handle(self, *args, host: str, port: int, **options) -> None:
        _require_collected_static()
        if notice := _require_a_pooler_that_keeps_prepared_statements():
            self.stderr.write(notice)
        if notice := trusted_proxy_notice():
            self.stderr.write(notice)
        # gunicorn forks its workers from this process: no connection (or pooled connection)
        # may cross the fork.
        connections.close_all()
        for conn in connections.all(initialized_only=True):
            if conn.settings_dict["OPTIONS"].get("pool"):
                conn.close_pool()
        # Gunicorn runs in this process (not exec'd), so an embedded PostgreSQL this process
        # started is released on exit.
        _Gunicorn(bind=_bind(host, port)).run()


def _require_collected_static() -> None:
    """Production serves hashed static names from a manifest that ``collectstatic`` writes;
    without it every page would be a 500. Refuse to start, saying what to run."""
    storage = settings.STORAGES["staticfiles"]["BACKEND"]
    if "Manifest" not in storage:
        return  # development and tests serve files by their plain names
    manifest = Path(settings.STATIC_ROOT) / "staticfiles.json"
    if not manifest.exists():
        raise CommandError(
            f"No collected static files in {settings.STATIC_ROOT} (no staticfiles.json). Run "
            "`switchboard collectstatic --noinput` after each upgrade, then serve again."
        )


def _require_a_pooler_that_keeps_prepared_statements() -> str | None:
    """Refuse to start, saying which setting to change, behind a pooler that loses prepared
    statements (queues/db/pooler.py): every claim would fail with a 503. A database that is
    away is not a reason not to start (the server answers 503 until it is back): said."""
    if not settings.SWITCHBOARD_PREPARED_STATEMENTS:
        return None
    import psycopg

    from switchboard.queues.db.pooler import prepared_statements_survive

    try:
        problem = prepared_statements_survive()
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"The database could not be checked for a pooler at start-up: {first}"
    if problem:
        raise CommandError(f"Not serving: {problem}.")
    return None


def trusted_proxy_notice() -> str | None:
    """What start-up says when sign-ins count a proxy's header as the client's address, and
    from which peers: a header anyone could write must not be believed from anyone."""
    header = settings.SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER
    if not header:
        return None
    from switchboard.board.auth import trusted_proxies

    peers = ", ".join(str(network) for network in trusted_proxies()) or "no peer"
    return (
        f"Sign-ins are counted by the {header} header's last entry for connections from"
        f" {peers} (SWITCHBOARD_SIGNIN_TRUSTED_PROXIES); from any other peer, by the"
        " connection's own address."
    )


def _bind(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Gunicorn(Application):
    def __init__(self, *, bind: str) -> None:
        self._bind = bind
        super().__init__(prog="switchboard serve")

    def load_config(self) -> None:
        self.load_config_from_file(str(CONFIG_FILE))
        self.cfg.set("bind", [self._bind])

    def load(self):
        from gunicorn.util import import_app

        # gunicorn_conf.py's wsgi_app: the ASGI application, or the WSGI one.
        return import_app(self.cfg.wsgi_app)
