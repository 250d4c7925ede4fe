"""The breaker tells a database that is away from a pool that is busy."""

from __future__ import annotations

import socket

import psycopg_pool
import pytest
from django.db import OperationalError

from queues import availability
from queues.availability import Breaker


def _pool_timeout() -> OperationalError:
    error = OperationalError("couldn't get a connection after 10.00 sec")
    error.__cause__ = psycopg_pool.PoolTimeout("couldn't get a connection after 10.00 sec")
    return error


@pytest.mark.django_db
def test_a_busy_pool_with_the_database_there_does_not_trip():
    breaker = Breaker()
    breaker.trip(_pool_timeout())
    assert not breaker.tripped
    assert breaker.admit()


@pytest.mark.django_db
def test_a_pool_timeout_trips_when_a_fresh_connection_fails_too(monkeypatch):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = availability._probe_params()
    monkeypatch.setattr(
        availability, "_probe_params", lambda: {**params, "host": "127.0.0.1", "port": port}
    )
    breaker = Breaker()
    breaker.trip(_pool_timeout())
    assert breaker.tripped
    assert not breaker.admit()  # refused at once, the probe a second away


@pytest.mark.django_db
def test_a_lost_connection_trips_without_asking():
    breaker = Breaker()
    breaker.trip(OperationalError("server closed the connection unexpectedly"))
    assert breaker.tripped
