"""/healthz for load balancers (its 503 during a database outage: tests/crash)."""

from __future__ import annotations


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
