"""Settings, read from the environment with safe defaults (see README, "Settings")."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from switchboard import dburl

BASE_DIR = Path(__file__).resolve().parent.parent


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
_DEV_KEY = "django-insecure-switchboard-dev-only-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if DEBUG or env_bool("SWITCHBOARD_DEV", False):
        SECRET_KEY = _DEV_KEY
    else:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (production) or DEBUG=1 (local development)."
        )

ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get(
        "ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]" if DEBUG or SECRET_KEY == _DEV_KEY else ""
    ).split(",")
    if h.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "queues",
    "board",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "switchboard.urls"
WSGI_APPLICATION = "switchboard.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "board.scope.context",
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
# A connection pool per process (psycopg_pool through Django): a request borrows a connection
# for its queries and gives it back when it ends, so a claim_next long-poll that waits holds
# none, and many gunicorn threads share a few connections. 0 turns pooling off and keeps a
# persistent connection per thread instead (SWITCHBOARD_CONN_MAX_AGE seconds).
SWITCHBOARD_DB_POOL_SIZE = env_int("SWITCHBOARD_DB_POOL_SIZE", 8, minimum=0)
if SWITCHBOARD_DB_POOL_SIZE:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": 1,
        "max_size": SWITCHBOARD_DB_POOL_SIZE,
        "timeout": 10,
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0
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
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "pgserver": {"level": "WARNING"},
    },
}

# --- Switchboard -------------------------------------------------------------------------
SWITCHBOARD_LEASE_SECONDS = env_int("SWITCHBOARD_LEASE_SECONDS", 300, minimum=1)
SWITCHBOARD_OWNER_LEASE_SECONDS = env_int("SWITCHBOARD_OWNER_LEASE_SECONDS", 1800, minimum=1)
SWITCHBOARD_MAX_ATTEMPTS = env_int("SWITCHBOARD_MAX_ATTEMPTS", 5, minimum=1)
SWITCHBOARD_RETRY_BASE_SECONDS = env_int("SWITCHBOARD_RETRY_BASE_SECONDS", 10, minimum=0)
SWITCHBOARD_RETRY_MAX_SECONDS = env_int("SWITCHBOARD_RETRY_MAX_SECONDS", 3600, minimum=0)
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
SWITCHBOARD_METRICS_TOKEN = os.environ.get("SWITCHBOARD_METRICS_TOKEN", "")
# The hot statements of queues/sql.py run as server-side prepared statements (planned once
# per connection). Turn off behind a pooler that cannot keep them (pgbouncer < 1.21 in
# transaction mode).
SWITCHBOARD_PREPARED_STATEMENTS = env_bool("SWITCHBOARD_PREPARED_STATEMENTS", True)
if SWITCHBOARD_PREPARED_STATEMENTS:
    # psycopg ignores prepare=True while the connection's threshold is None (Django's
    # default). Django's own cursors bind client-side and never prepare, so a threshold that
    # is never reached leaves them alone; only queues.sql.fetch asks for preparation.
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = 2**31 - 1
