"""The breaker tells a database that is away from a pool that is busy."""

from __future__ import annotations

import asyncio
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import psycopg_pool
import pytest
from django.db import OperationalError

from switchboard.queues.db import availability
from switchboard.queues.db.availability import Breaker
from tests.crash.harness import free_port


def _pool_timeout() -> OperationalError:
    error = OperationalError("couldn't get a connection after 10.00 sec")
    error.__cause__ = psycopg_pool.PoolTimeout("couldn't get a connection after 10.00 sec")
    return error


def _probes_reach(monkeypatch, port: int) -> dict:
    """Point the breaker's probes at 127.0.0.1:``port``; returns the real parameters."""
    params = availability._probe_params()
    monkeypatch.setattr(
        availability, "_probe_params", lambda: {**params, "host": "127.0.0.1", "port": port}
    )
    return params


@pytest.mark.django_db
def test_a_busy_pool_with_the_database_there_does_not_trip():
    breaker = Breaker()
    breaker.trip(_pool_timeout())
    assert not breaker.tripped
    assert breaker.admit()


@pytest.mark.django_db
def test_a_pool_timeout_trips_when_a_fresh_connection_fails_too(monkeypatch):
    _probes_reach(monkeypatch, free_port())  # a port nothing listens on
    breaker = Breaker()
    breaker.trip(_pool_timeout())
    assert breaker.tripped
    assert not breaker.admit()  # refused at once, the next probe an interval away


@pytest.mark.django_db
def test_a_lost_connection_trips_without_asking():
    breaker = Breaker()
    breaker.trip(OperationalError("server closed the connection unexpectedly"))
    assert breaker.tripped


@pytest.mark.django_db
def test_a_tripped_breaker_closes_by_itself_once_the_database_answers():
    """A web worker that no request reaches probes anyway: it is closed before its next
    request, which is then not the one to probe (and wait) under a burst."""
    breaker = Breaker()
    breaker.trip(OperationalError("server closed the connection unexpectedly"))
    assert breaker.tripped
    deadline = time.monotonic() + 3 * availability.PROBE_INTERVAL_SECONDS + 2
    while breaker.tripped and time.monotonic() < deadline:
        time.sleep(0.05)  # nobody calls admit()
    assert not breaker.tripped


@pytest.mark.django_db(transaction=True)
def test_an_async_caller_waits_for_a_probe_in_flight_rather_than_be_refused(monkeypatch):
    breaker = Breaker()
    breaker.trip(OperationalError("server closed the connection unexpectedly"))
    real = availability._probe

    def slow_probe():
        time.sleep(0.5)
        return real()

    monkeypatch.setattr(availability, "_probe", slow_probe)
    # A thread's probe in flight (a Board request's, or the breaker's own watcher's) ...
    with ThreadPoolExecutor(1) as pool:
        probing = pool.submit(breaker.admit)
        time.sleep(0.1)
        # ... an agent request on the event loop meanwhile: admitted with its answer.
        assert asyncio.run(breaker.aadmit()) is True
        assert probing.result() is True


@pytest.mark.django_db
def test_a_database_back_is_noticed_by_the_next_request_within_a_probe_interval(monkeypatch):
    """The last probe failed just before PostgreSQL came back: a request a moment later is
    admitted, not refused until a slow probe clock comes round."""
    params = _probes_reach(monkeypatch, free_port())  # the database away
    breaker = Breaker()
    breaker.trip(OperationalError("server closed the connection unexpectedly"))
    assert not breaker.admit()  # a probe, failed
    monkeypatch.setattr(availability, "_probe_params", lambda: params)  # the database is back
    time.sleep(0.3)  # the promise: noticed within a quarter second (and a margin)
    assert asyncio.run(breaker.aadmit()) is True
    assert not breaker.tripped


@pytest.mark.django_db(transaction=True)
def test_a_crowd_on_the_loop_is_answered_promptly_while_probes_hang(monkeypatch):
    """A database that hangs rather than refuses (a server that accepts and never answers):
    every probe takes its whole connect timeout (libpq's two seconds at least), so the
    watcher's probe is in flight most of the time. 200 agent requests on the event loop
    meanwhile are all refused within about one probe. (Both the polling wait and the earlier
    wait in an executor thread pass this: queued waits drain the moment a probe ends.)"""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(256)
        _probes_reach(monkeypatch, listener.getsockname()[1])
        breaker = Breaker()
        breaker.trip(OperationalError("server closed the connection unexpectedly"))
        time.sleep(availability.PROBE_INTERVAL_SECONDS + 0.1)  # the watcher's probe, hanging

        async def crowd() -> tuple[list[bool], float]:
            started = time.monotonic()
            answers = await asyncio.gather(*(breaker.aadmit() for _ in range(200)))
            return answers, time.monotonic() - started

        answers, took = asyncio.run(crowd())
    assert answers == [False] * 200
    print(f"200 callers answered in {took:.2f} s")
    assert took < 3.0, took  # one hanging probe (libpq: 2 s) and a second of slack


def test_an_outage_line_names_every_host_a_connection_tries(monkeypatch, caplog):
    """With a multi-host URL libpq's message names the last host it tried (the failover
    probe: "connection to server at 127.0.0.1, port 5443 failed: session is read-only"); the
    line says every host, in order."""
    from django.db import connection

    monkeypatch.setitem(connection.settings_dict, "HOST", "10.0.0.1,10.0.0.2,db3.internal")
    monkeypatch.setitem(connection.settings_dict, "PORT", "5441,5442,5443")
    assert availability.hosts_tried() == (
        "hosts tried: 10.0.0.1:5441, 10.0.0.2:5442, db3.internal:5443"
    )
    breaker = Breaker()
    monkeypatch.setattr(breaker, "_recover", lambda: None)  # no probes of those hosts
    with caplog.at_level("WARNING", logger="switchboard.database"):
        breaker.trip(OperationalError('connection to server at "db3.internal" failed'))
    [line] = [r.getMessage() for r in caplog.records]
    assert "hosts tried: 10.0.0.1:5441, 10.0.0.2:5442, db3.internal:5443" in line, line
    breaker.reset()


@pytest.mark.django_db
def test_requests_that_meet_an_outage_add_no_line_of_their_own(caplog):
    """An outage is said once, by the breaker as it trips; the requests that meet it (a
    failover's thousands) each say nothing more."""
    from switchboard.queues.errors import from_database_error

    lost = OperationalError("server closed the connection unexpectedly")
    with caplog.at_level("INFO"):
        try:
            for _ in range(50):
                assert from_database_error(lost, verb="claim_next").code == "unavailable"
            lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        finally:
            availability.breaker.reset()
    assert len(lines) == 1 and lines[0].startswith("database unavailable ("), lines
