"""``switchboard serve`` with proposed server-side changes applied, for the bench only.

    SWITCHBOARD_BENCH_SERVER_VARIANT=auth-sql+no-access-log \\
        .venv/bin/python -m bench.serve_variant --host 127.0.0.1 --port 8001

bench/httpbench.py starts this instead of ``switchboard serve`` for ``--http-whatif``. The
patches are applied in gunicorn's master before it forks its workers (the workers load the
WSGI app after the fork, from modules already imported and patched here), so nothing in
queues/ or switchboard/ is edited. Variants (join with ``+``):

  auth-sql       the endpoint lookup by token digest as one prepared statement
                 (queues.sql.fetch) building the Endpoint with ``from_db``, instead of
                 ``Endpoint.objects.filter(token_hash=...).first()`` (ORM compile per request);
                 queues.endpoints.authenticate does this itself since b1cde17, so on that
                 code the variant changes nothing (a control)
  auth-cache     the endpoint looked up once per token and process, then reused for
                 AUTH_CACHE_SECONDS (an upper bound of what auth can save; revocation and
                 rotation would take up to that long to bite)
  no-access-log  gunicorn's access log off (accesslog = None)
  reuse-port     gunicorn's reuse_port: each worker listens on its own SO_REUSEPORT socket
                 and the kernel spreads new connections over them by a hash, instead of
                 the workers racing to accept from one shared socket
  workers-4      4 gthread workers x 16 threads instead of 2 x 32 (same threads in all;
                 through the environment switchboard/gunicorn_conf.py reads): a keep-alive
                 connection stays with the worker that accepted it, so with 2 workers a few
                 clients can all land on one of them, which then runs on one core (GIL)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

AUTH_CACHE_SECONDS = 5.0


def _auth_sql() -> None:
    from agents import http as api
    from queues import endpoints, sql, tokens
    from queues.models import Endpoint

    fields = Endpoint._meta.concrete_fields
    names = [f.attname for f in fields]
    statement = (
        "SELECT "
        + ", ".join(f'"{f.column}"' for f in fields)
        + f' FROM "{Endpoint._meta.db_table}" WHERE "token_hash" = %(token_hash)s'
    )
    converters = [(i, f.from_db_value) for i, f in enumerate(fields) if hasattr(f, "from_db_value")]

    def authenticate(token):
        if not token or not isinstance(token, str) or len(token) > 200:
            return None
        rows = sql.fetch(statement, {"token_hash": tokens.digest(token)})
        if not rows:
            return None
        row = list(rows[0])
        for i, convert in converters:
            row[i] = convert(row[i], None, None)
        return Endpoint.from_db("default", names, row)

    endpoints.authenticate = authenticate
    api.authenticate = authenticate  # api imported the name


def _auth_cache() -> None:
    from agents import http as api
    from queues import endpoints

    original = api.authenticate
    cache: dict[str, tuple[float, object]] = {}

    def authenticate(token):
        now = time.monotonic()
        hit = cache.get(token) if isinstance(token, str) else None
        if hit is not None and hit[0] > now:
            return hit[1]
        endpoint = original(token)
        if endpoint is not None:
            cache[token] = (now + AUTH_CACHE_SECONDS, endpoint)
        return endpoint

    endpoints.authenticate = authenticate
    api.authenticate = authenticate


def _no_access_log() -> None:
    from switchboard.management.commands import serve

    original = serve._Gunicorn.load_config

    def load_config(self) -> None:
        original(self)
        self.cfg.set("accesslog", None)

    serve._Gunicorn.load_config = load_config


def _reuse_port() -> None:
    from switchboard.management.commands import serve

    original = serve._Gunicorn.load_config

    def load_config(self) -> None:
        original(self)
        self.cfg.set("reuse_port", True)

    serve._Gunicorn.load_config = load_config


def _workers_4() -> None:
    os.environ["SWITCHBOARD_WEB_WORKERS"] = "4"
    os.environ["SWITCHBOARD_WEB_THREADS"] = "16"


VARIANTS = {
    "auth-sql": _auth_sql,
    "auth-cache": _auth_cache,
    "no-access-log": _no_access_log,
    "reuse-port": _reuse_port,
    "workers-4": _workers_4,
}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings")
    names = [v for v in os.environ.get("SWITCHBOARD_BENCH_SERVER_VARIANT", "").split("+") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown server variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    import django

    django.setup()
    for name in names:
        VARIANTS[name]()
    from switchboard.cli import main as switchboard

    switchboard(["serve", *sys.argv[1:]])


if __name__ == "__main__":
    main()
