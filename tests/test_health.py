"""/healthz for load balancers (its 503 during a database outage: tests/crash)."""

from __future__ import annotations

import pytest
from django.db import connection


def test_healthz_says_ok_with_the_database_and_sets_no_cookie(client, db):
    response = client.get("/healthz")
    assert (response.status_code, response.content) == (200, b"ok\n")
    assert not response.cookies
    assert "no-cache" in response["Cache-Control"]
    assert client.post("/healthz").status_code == 405


def test_healthz_is_exempt_from_the_https_redirect(settings, client, db):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/login/").status_code == 301


def test_healthz_says_503_and_why_while_draining(client, db, monkeypatch):
    from switchboard.agents.waiting import drain

    monkeypatch.setattr(drain, "started", True)
    response = client.get("/healthz")
    assert response.status_code == 503 and b"draining" in response.content


@pytest.mark.django_db(transaction=True)
def test_healthz_says_503_when_the_database_cannot_take_writes(client, caplog):
    """A node whose database turned read-only (the old primary after a failover, a standby)
    is not healthy, whatever SELECT 1 says; the log says why, once."""
    with connection.cursor() as cursor:
        cursor.execute("SET default_transaction_read_only = on")
    try:
        first, second = client.get("/healthz"), client.get("/healthz")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET default_transaction_read_only")
    assert first.status_code == second.status_code == 503
    assert b"read-only" in first.content
    said = [r.getMessage() for r in caplog.records if r.name == "switchboard.health"]
    assert len(said) == 1 and "read-only" in said[0]
    assert client.get("/healthz").status_code == 200
