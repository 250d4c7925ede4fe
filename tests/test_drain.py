"""A served node that is stopped (a deploy, a scale-down: SIGTERM to ``switchboard serve``)
drains: its waiting long-polls are answered at once, ``todo: null`` with ``Connection:
close``, where they were held to gunicorn's grace and cut; and its workers die with their
master, so a killed master does not leave them holding the port."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import psutil
import pytest

from switchboard.queues import endpoints
from tests.crash.conftest import base_env
from tests.crash.harness import Procs, answers_200, free_port, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WAITERS = 20
# gunicorn's grace (switchboard/gunicorn_conf.py graceful_timeout): before the drain, every
# waiter was held this long and then cut. Answered well inside it now, even on a busy machine.
GRACE_SECONDS = 10.0
ANSWERED_WITHIN_SECONDS = 5.0


@pytest.fixture
def procs(tmp_path):
    procs = Procs(tmp_path)
    yield procs
    procs.close()


@pytest.fixture
def env(transactional_db):
    from django.db import connection

    from switchboard import dburl

    return {**base_env(), "DATABASE_URL": dburl.build(connection.settings_dict)}


def _workers(master: int) -> list[psutil.Process]:
    try:
        return psutil.Process(master).children()
    except psutil.NoSuchProcess:
        return []


def _open_connections(master: int) -> int:
    count = 0
    for worker in _workers(master):
        try:
            count += sum(c.status == psutil.CONN_ESTABLISHED for c in worker.net_connections())
        except psutil.NoSuchProcess:
            continue
    return count


def test_a_stopped_server_answers_every_waiter_at_once(procs, env, team):
    server, base = procs.serve(env, workers=1)
    _, token = endpoints.vend(team, "drained")

    async def scenario() -> tuple[list[httpx.Response], float]:
        limits = httpx.Limits(max_connections=WAITERS + 5)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:
            polls = [
                asyncio.create_task(
                    client.post(
                        "/api/v1/claim_next",
                        json={"wait_seconds": 25},
                        headers={"Authorization": f"Bearer {token}"},
                    )
                )
                for _ in range(WAITERS)
            ]
            deadline = time.monotonic() + 30
            while _open_connections(server.pid) < WAITERS:  # every poll is in
                assert time.monotonic() < deadline, procs.logs()
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # and past its first look, waiting
            stopped = time.monotonic()
            server.popen.send_signal(signal.SIGTERM)
            answers = await asyncio.gather(*polls)
            return answers, time.monotonic() - stopped

    answers, took = asyncio.run(scenario())

    assert took < ANSWERED_WITHIN_SECONDS < GRACE_SECONDS, (took, procs.logs())
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.json()["todo"] is None
        assert answer.headers.get("connection") == "close"
    assert server.popen.wait(timeout=GRACE_SECONDS + 5) == 0, procs.logs()
    assert procs.tracebacks() == []


def test_workers_die_with_their_master_and_the_port_is_free_again(procs, env):
    """``kill -9`` of the master once left its workers serving and holding the port, and
    ``serve`` could not start again on it."""
    port = free_port()
    env = {**env, "SWITCHBOARD_WEB_WORKERS": "2"}
    first = procs.switchboard("serve", "serve", "--port", str(port), env=env)
    base = f"http://127.0.0.1:{port}"
    wait_until(lambda: answers_200(f"{base}/login/"), seconds=60, what="serve", logs=procs.logs)
    # One worker may answer before the other has booted: wait for both.
    wait_until(
        lambda: len(_workers(first.pid)) == 2, seconds=30, what="both workers", logs=procs.logs
    )
    workers = _workers(first.pid)

    first.popen.send_signal(signal.SIGKILL)
    first.popen.wait(timeout=10)
    wait_until(
        lambda: not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers),
        seconds=20,
        what="the workers of a killed master to exit",
        logs=procs.logs,
    )

    procs.switchboard("serve-again", "serve", "--port", str(port), env=env)
    wait_until(
        lambda: answers_200(f"{base}/login/"),
        seconds=60,
        what="serve to start again on the same port",
        logs=procs.logs,
    )
