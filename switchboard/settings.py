"""Settings, read from the environment with safe defaults (see README, "Settings")."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from switchboard import dburl, embedded
from switchboard.queues import tracing
from switchboard.queues.db.pool_checks import check_pooled

BASE_DIR = Path(__file__).resolve().parent.parent
# The package itself: its templates and static files travel inside it (an installed wheel
# serves the Board from any folder).
PACKAGE_DIR = Path(__file__).resolve().parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw.strip() else default
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a whole number, not {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


DEBUG = env_bool("DEBUG", False)
# Local development (`make run`, `make test`, the benchmarks): plain http on 127.0.0.1, so no
# redirect to https, no secure-only cookies and no HSTS, and a dev-only key when none is set.
SWITCHBOARD_DEV = DEBUG or env_bool("SWITCHBOARD_DEV", False)
_DEV_KEY = "django-insecure-switchboard-dev-only-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if SWITCHBOARD_DEV:
        SECRET_KEY = _DEV_KEY
    else:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. To try Switchboard on this machine, set SWITCHBOARD_DEV=1 "
            "(export SWITCHBOARD_DEV=1: plain http on localhost, a dev-only key). In production, "
            "set SECRET_KEY to 50 or more random characters (docs/deploy.md)."
        )
# Django's own rule for a key (the check framework's security.W009), refused at start-up in
# production rather than left to a warning nobody reads.
elif not SWITCHBOARD_DEV and (
    len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure-")
):
    raise ImproperlyConfigured(
        "SECRET_KEY is too weak: use 50 or more random characters, e.g. the output of "
        "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`."
    )

ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get(
        "ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]" if DEBUG or SECRET_KEY == _DEV_KEY else ""
    ).split(",")
    if h.strip()
]
# Full origins (`https://switchboard.example.com`), only needed when the proxy in front does
# not pass the Host the browser used.
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "switchboard.queues.apps.SwitchboardAdminConfig",  # django.contrib.admin, with queue health
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    # The apps live inside the switchboard package (an installed Switchboard claims no
    # generic top-level name such as `agents`, the OpenAI Agents SDK's); their labels, and so
    # their tables, permissions and migrations, are still queues, agents and board.
    "switchboard.queues",
    "switchboard.agents",
    "switchboard.board",
    "switchboard",  # the project: its management commands (up, serve, sweep, demo, …)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After WhiteNoise (static files need no database), before anything that reads it.
    "switchboard.unavailable.DatabaseUnavailableMiddleware",
    # After WhiteNoise: static files answer before it and carry no policy of their own.
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]
# Tracing on (SWITCHBOARD_OTEL=1): each Board action's ids on its request's span (docs/tracing.md).
# Only then: off, no request passes through it.
if tracing.ON:
    MIDDLEWARE.append("switchboard.board.traced.ActionSpans")

ROOT_URLCONF = "switchboard.urls"
WSGI_APPLICATION = "switchboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [PACKAGE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "switchboard.board.scope.context",
                "switchboard.board.demo_strip.context",
            ],
        },
    },
]


def _database_url() -> str:
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        return url
    # No DATABASE_URL: the embedded PostgreSQL in SWITCHBOARD_DATA_DIR, started on demand.
    from switchboard import embedded

    url = embedded.start()
    os.environ["DATABASE_URL"] = url  # children (gunicorn, sweeper) attach, not start
    return url


DATABASES = {"default": dburl.parse(_database_url())}
# The doorbell's LISTEN (one connection per web process) to this database instead, when set:
# a direct connection past a pooler in transaction mode, which drops notifications (PgBouncer:
# docs/deploy.md). The same database as DATABASE_URL, reached without the pooler.
_listen_url = os.environ.get("SWITCHBOARD_LISTEN_DATABASE_URL", "").strip()
SWITCHBOARD_LISTEN_DATABASE = dburl.parse(_listen_url) if _listen_url else None
# A connection pool per process (psycopg_pool through Django): a request borrows a connection
# for its queries and gives it back when it ends, so a claim_next long-poll that waits holds
# none, and many gunicorn threads share a few connections. 0 turns pooling off and keeps a
# persistent connection per thread instead (SWITCHBOARD_CONN_MAX_AGE seconds).
SWITCHBOARD_DB_POOL_SIZE = env_int("SWITCHBOARD_DB_POOL_SIZE", 8, minimum=0)
# How long a request waits for a pooled connection before it is told the database is
# unavailable (503), on both pools.
SWITCHBOARD_DB_POOL_TIMEOUT_SECONDS = env_int("SWITCHBOARD_DB_POOL_TIMEOUT_SECONDS", 10, minimum=1)
if SWITCHBOARD_DB_POOL_SIZE:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": SWITCHBOARD_DB_POOL_SIZE,
        "timeout": SWITCHBOARD_DB_POOL_TIMEOUT_SECONDS,
        # After a database restart, a new connection is tried every quarter second
        # (queues/db/pool_checks.py) for up to 5 s, instead of psycopg_pool's doubling backoff
        # (1, 2, 4 … 32 s, for up to 300 s), which left the web process answering 503 long
        # after PostgreSQL was back (tests/crash/test_database_restart.py; docs/benchmarks.md,
        # "The crash tests").
        "reconnect_timeout": 5,
        # Checked as lent; a broken one has the pool check all its idle ones at once
        # (queues/db/pool_checks.py: after a restart they are all dead).
        "check": check_pooled,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
else:
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("SWITCHBOARD_CONN_MAX_AGE", 60, minimum=0)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "board-home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# Agent request bodies over 1 MiB are `invalid` before anything is read into the database.
DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024

STATIC_URL = "static/"
# collectstatic's output: beside the data (an installed package's own folder is no place to
# write), unless SWITCHBOARD_STATIC_ROOT says where.
STATIC_ROOT = Path(os.environ.get("SWITCHBOARD_STATIC_ROOT") or embedded.data_dir() / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Production: `collectstatic` writes content-hashed, pre-compressed copies (gzip, and
    # brotli when installed) and WhiteNoise serves them with a far-future cache lifetime.
    # Development keeps plain names, so an edited CSS file shows without collecting again.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if SWITCHBOARD_DEV
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

# --- HTTPS and security headers (docs/deploy.md) -------------------------------------------
# Production is https only: plain http is redirected, cookies are sent over https alone and
# browsers are told (HSTS) to use nothing else. Behind a proxy that terminates TLS, the proxy
# says so in a header (SWITCHBOARD_PROXY_SSL_HEADER), else every request looks like http and
# the redirect loops.


def _proxy_ssl_header(raw: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto: https` (the value defaults to https) as Django's (META key, value)."""
    name, _, value = raw.partition(":")
    name, value = name.strip(), value.strip() or "https"
    if not name:
        if raw.strip():
            raise ImproperlyConfigured(
                "SWITCHBOARD_PROXY_SSL_HEADER must look like 'X-Forwarded-Proto: https', "
                f"not {raw!r}"
            )
        return None
    return "HTTP_" + name.upper().replace("-", "_"), value


SECURE_PROXY_SSL_HEADER = _proxy_ssl_header(os.environ.get("SWITCHBOARD_PROXY_SSL_HEADER", ""))
SECURE_SSL_REDIRECT = env_bool("SWITCHBOARD_SSL_REDIRECT", not SWITCHBOARD_DEV)
# A load balancer's health check often speaks plain http to the backend.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = not SWITCHBOARD_DEV
CSRF_COOKIE_SECURE = not SWITCHBOARD_DEV
SESSION_COOKIE_HTTPONLY = True
# An hour by default: long enough to matter, short enough that a host which has to drop https
# is free again soon. Raise it (a year: 31536000) once https is settled. SecurityMiddleware
# sends it on https responses only.
SECURE_HSTS_SECONDS = env_int("SWITCHBOARD_HSTS_SECONDS", 0 if SWITCHBOARD_DEV else 3600, minimum=0)
# Covers the names below Switchboard's own host (`*.switchboard.example.com`), not its
# siblings; turn it off when Switchboard is served from a domain's apex.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SWITCHBOARD_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("SWITCHBOARD_HSTS_PRELOAD", False)
if not SECURE_HSTS_PRELOAD:
    # Preloading is the domain owner's decision for the whole registrable domain and hard to
    # undo; the check that asks for it (security.W021) is silenced until someone opts in.
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Content Security Policy (Django's own middleware): the Board's scripts and styles are files
# under /static/ (htmx with allowEval off and includeIndicatorStyles off, board.js, board.css);
# no inline script, style element or style attribute anywhere. The nonce is only in style-src
# and only reaches the header of a response that rendered it: Django admin's changelist
# without actions and the CSRF failure page carry one nonced <style> element. Admin's scripts
# are all files from 'self'.
_CSP_POLICY = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.NONCE],
    "img-src": [CSP.SELF],
    "connect-src": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}
# With DEBUG, Django's error pages (inline style and script, no nonce) must still render, so
# the policy is reported in the browser's console, not enforced.
SECURE_CSP = {} if DEBUG else _CSP_POLICY
SECURE_CSP_REPORT_ONLY = _CSP_POLICY if DEBUG else {}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # The process id: a web host runs several workers, and each has its own pools and breaker.
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "pgserver": {"level": "WARNING"},
        # psycopg_pool logs each failed reconnection try (four a second per pool while the
        # database is away: queues.db.pool_checks); switchboard.database says when it went,
        # how probes fail (every 5 s) and when it came back.
        "psycopg.pool": {"level": "ERROR"},
    },
}

# --- Switchboard -------------------------------------------------------------------------
SWITCHBOARD_LEASE_SECONDS = env_int("SWITCHBOARD_LEASE_SECONDS", 300, minimum=1)
SWITCHBOARD_OWNER_LEASE_SECONDS = env_int("SWITCHBOARD_OWNER_LEASE_SECONDS", 1800, minimum=1)
SWITCHBOARD_MAX_ATTEMPTS = env_int("SWITCHBOARD_MAX_ATTEMPTS", 5, minimum=1)
SWITCHBOARD_RETRY_BASE_SECONDS = env_int("SWITCHBOARD_RETRY_BASE_SECONDS", 10, minimum=0)
SWITCHBOARD_RETRY_MAX_SECONDS = env_int("SWITCHBOARD_RETRY_MAX_SECONDS", 3600, minimum=0)
# Tracing (SWITCHBOARD_OTEL=1, docs/tracing.md): where a trace id opens in your tracing UI,
# with {trace_id} in it (https://jaeger.example/trace/{trace_id}); the drawer then links an
# attempt's trace. Unset: the id is shown as text.
SWITCHBOARD_TRACE_URL = os.environ.get("SWITCHBOARD_TRACE_URL", "").strip()
if SWITCHBOARD_TRACE_URL and (
    not SWITCHBOARD_TRACE_URL.startswith(("https://", "http://"))
    or "{trace_id}" not in SWITCHBOARD_TRACE_URL
):
    raise ImproperlyConfigured(
        "SWITCHBOARD_TRACE_URL must be an http(s) address with {trace_id} in it, e.g. "
        "https://jaeger.example/trace/{trace_id}."
    )
SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO = env_int(
    "SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO", 50, minimum=1
)
SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT = env_bool("SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT")
SWITCHBOARD_RETENTION_DAYS = env_int("SWITCHBOARD_RETENTION_DAYS", 30, minimum=0)
SWITCHBOARD_RETENTION_MAX_TERMINAL = env_int(
    "SWITCHBOARD_RETENTION_MAX_TERMINAL", 100_000, minimum=0
)
SWITCHBOARD_SWEEP_INTERVAL_SECONDS = env_int("SWITCHBOARD_SWEEP_INTERVAL_SECONDS", 5, minimum=1)
SWITCHBOARD_CLAIMS_PER_MINUTE = env_int("SWITCHBOARD_CLAIMS_PER_MINUTE", 0, minimum=0)
SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = env_bool("SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE")
# Long-polls (claim_next with wait_seconds) a web process holds at once, per endpoint and in
# all; past either, a long-poll is refused at once (rate_limited / unavailable, Retry-After).
SWITCHBOARD_WAITERS_PER_ENDPOINT = env_int("SWITCHBOARD_WAITERS_PER_ENDPOINT", 1000, minimum=1)
SWITCHBOARD_WAITERS_PER_PROCESS = env_int("SWITCHBOARD_WAITERS_PER_PROCESS", 10000, minimum=1)
# A request body must arrive within this many seconds of its headers, or the client is dropped
# (408): a slow or silent client costs a socket, never a worker.
SWITCHBOARD_BODY_TIMEOUT_SECONDS = env_int("SWITCHBOARD_BODY_TIMEOUT_SECONDS", 10, minimum=1)
# A request's line and headers must arrive within this of the connection opening (its first
# request) or of their first byte (later ones on a kept connection), else 408 and the
# connection closes; a new connection that sends nothing is closed (switchboard/workers.py).
SWITCHBOARD_HEADER_TIMEOUT_SECONDS = env_int("SWITCHBOARD_HEADER_TIMEOUT_SECONDS", 10, minimum=1)
# A request's line and headers together may take this many bytes and this many header lines,
# else 431 and the connection closes (switchboard/workers.py): counted as they arrive, so a
# connection holds at most this much of a request's head. The minimums leave room for a
# browser's ordinary request with its cookies.
SWITCHBOARD_MAX_HEADER_BYTES = env_int("SWITCHBOARD_MAX_HEADER_BYTES", 65536, minimum=4096)
SWITCHBOARD_MAX_HEADERS = env_int("SWITCHBOARD_MAX_HEADERS", 100, minimum=20)
# A web worker's event loop blocked for longer than this many seconds has its stack logged
# (switchboard/watchdog.py): every long-poll and verb of the worker waits while it is; 0 = off.
SWITCHBOARD_LOOP_WATCHDOG_SECONDS = env_int("SWITCHBOARD_LOOP_WATCHDOG_SECONDS", 5, minimum=0)
# Board searches (queues.selectors.search_time_bound): seconds their statements may run (what
# the lexeme cap misses cannot hold a connection and a core for longer), and how many one
# person may have running at once across every web process (more would let one person hold
# that many connections for that long each). Every Board and admin page: its statements'
# bound (switchboard.unavailable; 0 = none).
SWITCHBOARD_SEARCH_TIMEOUT_SECONDS = env_int("SWITCHBOARD_SEARCH_TIMEOUT_SECONDS", 3, minimum=1)
SWITCHBOARD_SEARCHES_PER_USER = env_int("SWITCHBOARD_SEARCHES_PER_USER", 3, minimum=1)
# The Board's live streams one person may hold open, counted across every web process
# (board/live.py): a tab holds one; past this a page is answered 429 and reads itself on a
# timer instead.
SWITCHBOARD_BOARD_STREAMS_PER_USER = env_int("SWITCHBOARD_BOARD_STREAMS_PER_USER", 24, minimum=1)
SWITCHBOARD_PAGE_TIMEOUT_SECONDS = env_int("SWITCHBOARD_PAGE_TIMEOUT_SECONDS", 10, minimum=0)
# An endpoint is stalled (the Board says so in words and colour, docs/board.md) when claimable
# work has waited this many seconds and none of its agents claimed, heartbeat or ended a try
# in that time; `agent-id=seconds,...` sets an endpoint's own (by agent id, in every team).
# 60 to 3600: the overview reads the last hour.
SWITCHBOARD_STALL_SECONDS = env_int("SWITCHBOARD_STALL_SECONDS", 300, minimum=60)


def _stall_overrides(raw: str) -> dict[str, int]:
    found = {}
    for part in filter(None, (p.strip() for p in raw.split(","))):
        agent_id, _, seconds = part.partition("=")
        if not agent_id.strip() or not seconds.strip().isdigit() or int(seconds) < 60:
            raise ImproperlyConfigured(
                "SWITCHBOARD_STALL_SECONDS_BY_ENDPOINT is agent-id=seconds pairs, comma-"
                f"separated, each at least 60, not {part!r}"
            )
        found[agent_id.strip()] = int(seconds)
    return found


SWITCHBOARD_STALL_SECONDS_BY_ENDPOINT = _stall_overrides(
    os.environ.get("SWITCHBOARD_STALL_SECONDS_BY_ENDPOINT", "")
)
SWITCHBOARD_METRICS_TOKEN = os.environ.get("SWITCHBOARD_METRICS_TOKEN", "")
# The hot statements of queues/sql/ run as server-side prepared statements (planned once
# per connection). Turn off behind a pooler that cannot keep them (pgbouncer < 1.21 in
# transaction mode).
SWITCHBOARD_PREPARED_STATEMENTS = env_bool("SWITCHBOARD_PREPARED_STATEMENTS", True)
if SWITCHBOARD_PREPARED_STATEMENTS:
    # psycopg ignores prepare=True while the connection's threshold is None (Django's
    # default). Django's own cursors bind client-side and never prepare, so a threshold that
    # is never reached leaves them alone; only queues.db asks for preparation (the hot
    # statements of queues/sql/).
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 2**31 - 1

# --- Signing in (board/auth.py, queues/signin_throttle.py) --------------------------------
# Sign-ins are counted in PostgreSQL (every web process sees the same counts) in a fixed
# window, per user name from one client address (FAILURES_PER_USER) and per address for every
# name (FAILURES_PER_ADDRESS); past either /login/ answers 429 with Retry-After and the
# password is not checked. Per user name from every address they only delay: past
# SLOW_AFTER_PER_USER each further sign-in for the name waits half a second more, up to
# MAX_DELAY_SECONDS, before its password is checked, and is never refused for it (a stranger
# cannot lock anyone out). A successful sign-in clears its name's counts. 0 turns one off.
SWITCHBOARD_SIGNIN_WINDOW_SECONDS = env_int("SWITCHBOARD_SIGNIN_WINDOW_SECONDS", 900, minimum=1)
SWITCHBOARD_SIGNIN_FAILURES_PER_USER = env_int(
    "SWITCHBOARD_SIGNIN_FAILURES_PER_USER", 10, minimum=0
)
SWITCHBOARD_SIGNIN_FAILURES_PER_ADDRESS = env_int(
    "SWITCHBOARD_SIGNIN_FAILURES_PER_ADDRESS", 50, minimum=0
)
SWITCHBOARD_SIGNIN_SLOW_AFTER_PER_USER = env_int(
    "SWITCHBOARD_SIGNIN_SLOW_AFTER_PER_USER", 20, minimum=0
)
SWITCHBOARD_SIGNIN_MAX_DELAY_SECONDS = env_int("SWITCHBOARD_SIGNIN_MAX_DELAY_SECONDS", 5, minimum=0)
# Behind a proxy every connection comes from the proxy: name the header it writes the client's
# address into (X-Forwarded-For); its last entry, the one the proxy added, is used. Unset: the
# connection's own address.
SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER = os.environ.get(
    "SWITCHBOARD_SIGNIN_CLIENT_IP_HEADER", ""
).strip()
# The peers whose header is believed (addresses or networks, comma-separated): loopback by
# default, a proxy on the same machine. From any other peer the header is ignored, so a client
# that reaches the server directly cannot choose the address it is counted as.
SWITCHBOARD_SIGNIN_TRUSTED_PROXIES = os.environ.get(
    "SWITCHBOARD_SIGNIN_TRUSTED_PROXIES", "127.0.0.0/8,::1"
)
# The one backend: Django's ModelBackend, throttled, with no pooled connection held across
# the password hash (board/auth.py). Also behind Django admin's sign-in.
AUTHENTICATION_BACKENDS = ["switchboard.board.auth.SignInBackend"]
