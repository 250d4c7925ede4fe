"""Gunicorn settings for ``switchboard serve``.

Threads, not processes, carry the concurrency: a request mostly waits on PostgreSQL (or, for a
claim_next long-poll, on the doorbell), and the threads of a worker share its connection pool
(SWITCHBOARD_DB_POOL_SIZE). 32 threads a worker leave room for 16 long-polls per worker
without starving other requests. Four workers on two cores, because a keep-alive connection
stays with the worker that accepted it: with two, all of a few busy clients sometimes landed
on one worker, held to one core by the GIL (bench/: 234-250 instead of 336 todos/s at 4
clients; with four workers the worst of 15 drains was 322). Also usable
directly: ``gunicorn -c switchboard/gunicorn_conf.py`` (binds SWITCHBOARD_BIND then).
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


wsgi_app = "switchboard.wsgi:application"
bind = [os.environ.get("SWITCHBOARD_BIND", "127.0.0.1:8000")]  # `serve --host/--port` override
worker_class = "gthread"
workers = _whole("SWITCHBOARD_WEB_WORKERS", 4)
threads = _whole("SWITCHBOARD_WEB_THREADS", 32)
# The worker heartbeat (a gthread worker beats while its threads serve), not a request limit;
# above the longest long-poll (claim_next waits at most 30 s).
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
accesslog = "-"
errorlog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'
# Gunicorn ≥ 25 opens a control socket at one fixed path per user: two servers on one machine
# (a test run beside `make run`) would take it from each other. Nothing here uses it.
control_socket_disable = True
