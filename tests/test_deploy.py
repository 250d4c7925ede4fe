"""Production settings (docs/deploy.md): https only, security headers, the CSP, static files.

The settings module is evaluated afresh under a given environment (``_settings``) for what it
decides; ``check --deploy`` and ``collectstatic`` run as a user runs them, in a subprocess.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.test import Client

import switchboard.settings
from switchboard import dburl

SETTINGS_FILE = switchboard.settings.__file__
MANAGE_PY = str(Path(SETTINGS_FILE).resolve().parent.parent / "manage.py")
# Every variable the settings read that a test here sets; cleared first, so the shell running
# the tests (a DEBUG=1, a SECRET_KEY) cannot change what they see.
SETTINGS_ENV = (
    "DEBUG",
    "SWITCHBOARD_DEV",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "CSRF_TRUSTED_ORIGINS",
    "SWITCHBOARD_PROXY_SSL_HEADER",
    "SWITCHBOARD_SSL_REDIRECT",
    "SWITCHBOARD_HSTS_SECONDS",
    "SWITCHBOARD_HSTS_INCLUDE_SUBDOMAINS",
    "SWITCHBOARD_HSTS_PRELOAD",
    "SWITCHBOARD_STATIC_ROOT",
)
ENFORCED_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "object-src 'none'"
)


def strong_key() -> str:
    return secrets.token_urlsafe(50)


@pytest.fixture
def production_env() -> dict[str, str]:
    """A production shell: no DEBUG or SWITCHBOARD_DEV, a real key, a host name, and the
    test database (the model checks ask the server for its version)."""
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS_ENV}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.update(
        SECRET_KEY=strong_key(),
        ALLOWED_HOSTS="switchboard.example.com",
        DATABASE_URL=dburl.build(connection.settings_dict),
    )
    return env


def _manage(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``manage.py`` run with ``args`` as a user runs it, in a subprocess under ``env``."""
    return subprocess.run(
        [sys.executable, MANAGE_PY, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def read_settings(monkeypatch):
    """Evaluate switchboard/settings.py under an environment; returns its names."""

    def read(**env: str) -> dict:
        for name in SETTINGS_ENV:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return runpy.run_path(SETTINGS_FILE)

    return read


# ---------------------------------------------------------------------------------------
# check --deploy


@pytest.mark.slow
def test_check_deploy_is_clean_under_production_settings(production_env, django_db_setup):
    result = _manage("check", "--deploy", "--fail-level", "WARNING", env=production_env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


# ---------------------------------------------------------------------------------------
# SECRET_KEY


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "SECRET_KEY is not set"),
        ("s3cret-but-only-thirty-chars-1", "SECRET_KEY is too weak"),
        ("ab" * 30, "SECRET_KEY is too weak"),  # long, but two characters
        ("django-insecure-switchboard-dev-only-key-do-not-use-in-production", "too weak"),
    ],
)
def test_production_refuses_to_start_without_a_real_secret_key(read_settings, key, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        read_settings(SECRET_KEY=key)


def test_development_starts_with_the_dev_key_or_a_short_one(read_settings):
    assert read_settings(SWITCHBOARD_DEV="1")["SECRET_KEY"].startswith("django-insecure-")
    assert read_settings(DEBUG="1", SECRET_KEY="short")["SECRET_KEY"] == "short"


# ---------------------------------------------------------------------------------------
# https and headers


def test_production_is_https_only(read_settings):
    prod = read_settings(SECRET_KEY=strong_key(), ALLOWED_HOSTS="switchboard.example.com")

    assert prod["SECURE_SSL_REDIRECT"] is True
    assert prod["SESSION_COOKIE_SECURE"] is True and prod["CSRF_COOKIE_SECURE"] is True
    assert prod["SESSION_COOKIE_HTTPONLY"] is True
    assert prod["SECURE_HSTS_SECONDS"] == 3600
    assert prod["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert prod["SECURE_HSTS_PRELOAD"] is False
    assert prod["SECURE_PROXY_SSL_HEADER"] is None
    assert prod["STORAGES"]["staticfiles"]["BACKEND"] == (
        "whitenoise.storage.CompressedManifestStaticFilesStorage"
    )
    assert prod["SECURE_CSP"] and not prod["SECURE_CSP_REPORT_ONLY"]


def test_development_keeps_plain_http_working(read_settings):
    dev = read_settings(SWITCHBOARD_DEV="1")

    assert dev["SECURE_SSL_REDIRECT"] is False
    assert dev["SESSION_COOKIE_SECURE"] is False and dev["CSRF_COOKIE_SECURE"] is False
    assert dev["SECURE_HSTS_SECONDS"] == 0
    assert dev["STORAGES"]["staticfiles"]["BACKEND"] == (
        "django.contrib.staticfiles.storage.StaticFilesStorage"
    )
    # The policy is enforced in development too, so the browser tests run under it.
    assert dev["SECURE_CSP"] == read_settings(SECRET_KEY=strong_key())["SECURE_CSP"]


def test_with_debug_the_policy_is_reported_not_enforced(read_settings):
    debug = read_settings(DEBUG="1")

    assert debug["SECURE_CSP"] == {}
    assert debug["SECURE_CSP_REPORT_ONLY"]["script-src"] == ["'self'"]


def test_https_settings_come_from_the_environment(read_settings):
    prod = read_settings(
        SECRET_KEY=strong_key(),
        SWITCHBOARD_SSL_REDIRECT="0",
        SWITCHBOARD_HSTS_SECONDS="31536000",
        SWITCHBOARD_HSTS_INCLUDE_SUBDOMAINS="0",
        SWITCHBOARD_HSTS_PRELOAD="1",
        CSRF_TRUSTED_ORIGINS="https://switchboard.example.com, https://sb.example.com:8443",
    )

    assert prod["SECURE_SSL_REDIRECT"] is False
    assert prod["SECURE_HSTS_SECONDS"] == 31536000
    assert prod["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is False
    assert prod["SECURE_HSTS_PRELOAD"] is True
    assert "SILENCED_SYSTEM_CHECKS" not in prod  # preload on: nothing left to silence
    assert prod["CSRF_TRUSTED_ORIGINS"] == [
        "https://switchboard.example.com",
        "https://sb.example.com:8443",
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("X-Forwarded-Proto: https", ("HTTP_X_FORWARDED_PROTO", "https")),
        ("X-Forwarded-Proto", ("HTTP_X_FORWARDED_PROTO", "https")),
        ("x-forwarded-ssl:on", ("HTTP_X_FORWARDED_SSL", "on")),
    ],
)
def test_the_proxy_ssl_header_is_read_from_the_environment(read_settings, raw, expected):
    prod = read_settings(SECRET_KEY=strong_key(), SWITCHBOARD_PROXY_SSL_HEADER=raw)
    assert prod["SECURE_PROXY_SSL_HEADER"] == expected


def test_a_malformed_proxy_ssl_header_is_refused(read_settings):
    with pytest.raises(ImproperlyConfigured, match="SWITCHBOARD_PROXY_SSL_HEADER"):
        read_settings(SECRET_KEY=strong_key(), SWITCHBOARD_PROXY_SSL_HEADER=": https")


@pytest.mark.django_db
def test_behind_the_proxy_http_is_redirected_and_https_gets_hsts(read_settings, settings):
    prod = read_settings(
        SECRET_KEY=strong_key(), SWITCHBOARD_PROXY_SSL_HEADER="X-Forwarded-Proto: https"
    )
    for name in ("SECURE_SSL_REDIRECT", "SECURE_PROXY_SSL_HEADER", "SECURE_HSTS_SECONDS"):
        setattr(settings, name, prod[name])
    settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = prod["SECURE_HSTS_INCLUDE_SUBDOMAINS"]

    plain = Client().get("/login/")
    secure = Client().get("/login/", headers={"X-Forwarded-Proto": "https"})

    assert plain.status_code == 301 and plain["Location"] == "https://testserver/login/"
    assert "Strict-Transport-Security" not in plain
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=3600; includeSubDomains"


# ---------------------------------------------------------------------------------------
# Content Security Policy


def test_board_pages_carry_the_enforced_policy(client, user, make_todo):
    todo = make_todo("rebuild docs")
    client.force_login(user)

    for path in ("/login/", "/", f"/todos/{todo.id}/", "/activity/", "/todos/new/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response["Content-Security-Policy"] == ENFORCED_POLICY, path
        assert "Content-Security-Policy-Report-Only" not in response


@pytest.mark.django_db
def test_a_nonced_style_element_is_allowed_by_its_nonce_alone():
    # The CSRF failure page carries Django's one nonced <style>; the nonce reaches the header
    # of that response only.
    response = Client(enforce_csrf_checks=True).post("/login/", {"username": "x"})

    assert response.status_code == 403
    nonce = re.search(r'<style nonce="([^"]+)">', response.text).group(1)
    directives = dict(d.split(" ", 1) for d in response["Content-Security-Policy"].split("; "))
    assert directives["style-src"] == f"'self' 'nonce-{nonce}'"
    assert directives["script-src"] == "'self'"


# ---------------------------------------------------------------------------------------
# Static files


@pytest.mark.slow
def test_collectstatic_writes_hashed_and_compressed_files(production_env, tmp_path):
    root = tmp_path / "static"
    static_root = {"SWITCHBOARD_STATIC_ROOT": str(root)}
    result = _manage(
        "collectstatic", "--noinput", "-v", "0", env=production_env | static_root, timeout=300
    )

    assert result.returncode == 0, result.stdout + result.stderr
    paths = json.loads((root / "staticfiles.json").read_text())["paths"]
    for name in ("board/board.css", "board/board.js", "board/vendor/htmx-2.0.11.min.js"):
        hashed = root / paths[name]
        assert re.search(r"\.[0-9a-f]{12}\.(css|js)$", hashed.name), hashed
        assert hashed.exists() and Path(f"{hashed}.gz").exists()


@pytest.mark.slow
def test_serve_refuses_to_start_without_collected_static_files(production_env, tmp_path):
    static_root = {"SWITCHBOARD_STATIC_ROOT": str(tmp_path / "empty")}
    result = _manage("serve", "--port", "1", env=production_env | static_root)

    assert result.returncode == 1
    assert "No collected static files" in result.stderr
    assert "switchboard collectstatic --noinput" in result.stderr
