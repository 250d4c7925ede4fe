"""Gunicorn settings for ``switchboard serve``: the one place the web server is configured.

Gunicorn runs uvicorn workers serving the ASGI application (switchboard/asgi.py), the one
front door: the agents' verbs, MCP and /metrics answer on the event loop and a waiting
long-poll holds no thread, so one process holds thousands of waiting agents; the Board's and
admin's sync views run in threads. Workers default to one per core (each is one event loop:
more than the cores only adds processes to switch between). Also usable directly:
``gunicorn -c switchboard/gunicorn_conf.py`` (binds SWITCHBOARD_BIND then).
"""

import os


def _whole(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        raise SystemExit(f"{name} must be a whole number, not {raw!r}") from None
    if value < 1:
        raise SystemExit(f"{name} must be at least 1, not {value}")
    return value


if os.environ.get("SWITCHBOARD_SERVER", "asgi").strip().lower() not in ("", "asgi"):
    # The threaded (WSGI) server of earlier releases is retired: refused, not ignored.
    raise SystemExit("SWITCHBOARD_SERVER is retired: switchboard serve is ASGI only; unset it.")
bind = [os.environ.get("SWITCHBOARD_BIND", "127.0.0.1:8000")]  # `serve --host/--port` override
wsgi_app = "switchboard.asgi:application"
worker_class = "switchboard.workers.Worker"
workers = _whole("SWITCHBOARD_WEB_WORKERS", max(2, os.cpu_count() or 2))
# The worker heartbeat, not a request limit; above the longest long-poll (claim_next waits at
# most 30 s).
timeout = 60
# Seconds an idle keep-alive connection stays open. Behind a load balancer that reuses its
# connections to the backends, make it longer than the balancer's idle timeout, or the
# balancer now and then sends a request down a connection gunicorn has just closed (a 502).
keepalive = _whole("SWITCHBOARD_WEB_KEEPALIVE", 5)
# Who may say a request came over https (X-Forwarded-Proto and friends): gunicorn's own
# FORWARDED_ALLOW_IPS, the proxy's addresses or networks, comma-separated [127.0.0.1,::1].
# Django's SECURE_PROXY_SSL_HEADER (SWITCHBOARD_PROXY_SSL_HEADER) is the other way: it trusts
# the header whoever sent it, so the proxy must be the only way in (docs/deploy.md).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")
# Stop promptly on SIGTERM: `switchboard up` waits for the web server before stopping
# the embedded PostgreSQL.
graceful_timeout = 10
# The access log, a line a request, on stdout. `switchboard up` turns it off in development
# (it gives its children SWITCHBOARD_ACCESS_LOG=0 unless told otherwise); 0 turns it off
# anywhere.
accesslog = None if os.environ.get("SWITCHBOARD_ACCESS_LOG", "").strip() == "0" else "-"
errorlog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'
# Gunicorn ≥ 25 opens a control socket at one fixed path per user: two servers on one machine
# (a test run beside `make run`) would take it from each other. Nothing here uses it.
control_socket_disable = True
