"""DATABASE_URL as libpq reads it: several hosts, IPv6, escapes and every parameter passed on."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from switchboard import dburl


def test_the_standard_multi_host_url_is_libpqs_host_and_port_lists():
    parsed = dburl.parse(
        "postgresql://sb:p%40ss@db1.example:5432,db2.example:5433/switchboard"
        "?target_session_attrs=read-write&connect_timeout=3"
    )
    assert (parsed["HOST"], parsed["PORT"]) == ("db1.example,db2.example", "5432,5433")
    assert (parsed["USER"], parsed["PASSWORD"], parsed["NAME"]) == ("sb", "p@ss", "switchboard")
    assert parsed["OPTIONS"] == {"target_session_attrs": "read-write", "connect_timeout": "3"}


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("postgresql://u@h1,h2/db", "h1,h2", ""),
        ("postgresql://u@h1:5432,h2/db", "h1,h2", "5432,"),
        ("postgresql://u@[::1]:5433,[fe80::1]/db", "::1,fe80::1", "5433,"),
        ("postgresql://u@/db?host=/run/postgresql", "/run/postgresql", ""),
        ("postgresql://u@ignored/db?host=h1,h2&port=5432,5433", "h1,h2", "5432,5433"),
        ("postgres://localhost/db", "localhost", ""),
    ],
)
def test_hosts_ports_and_the_query_form(url, host, port):
    parsed = dburl.parse(url)
    assert (parsed["HOST"], parsed["PORT"]) == (host, port)


@pytest.mark.parametrize(
    "url", ["mysql://u@h/db", "postgresql://u@h1:five/db", "postgresql://u@h:5432,h2:x/db"]
)
def test_a_url_libpq_would_refuse_is_refused_with_a_reason(url):
    with pytest.raises(ValueError, match="DATABASE_URL"):
        dburl.parse(url)


@pytest.mark.django_db
def test_libpq_connects_through_a_host_list_whose_first_host_is_away():
    """The real thing: a first host where nothing listens, then the test database; libpq
    moves on to the second, and target_session_attrs keeps only a writable one. (The embedded
    PostgreSQL listens on a socket directory, which libpq takes as a host like any other.)"""
    settings = connection.settings_dict
    real = settings["HOST"] or "localhost"
    away = "/nonexistent-switchboard-socket" if real.startswith("/") else "127.0.0.1"
    port = settings["PORT"] or "5432"
    parsed = dburl.parse(
        f"postgresql://{settings['USER']}@/{settings['NAME']}"
        f"?host={away},{real}&port=1,{port}&target_session_attrs=read-write&connect_timeout=2"
    )
    assert parsed["HOST"] == f"{away},{real}"
    with psycopg.connect(
        dbname=parsed["NAME"],
        user=parsed["USER"],
        password=settings.get("PASSWORD") or None,
        host=parsed["HOST"],
        port=parsed["PORT"],
        **parsed["OPTIONS"],
    ) as conn:
        assert conn.execute("SELECT NOT pg_is_in_recovery()").fetchone() == (True,)
        assert conn.info.host == real
