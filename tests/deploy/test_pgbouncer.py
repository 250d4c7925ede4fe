"""The shipped PgBouncer configuration (deploy/pgbouncer.ini, transaction pooling) between a
served node and PostgreSQL: with prepared statements on, ``serve`` refuses to start and says
which setting to change (it answered thousands of 503 "retry" with /healthz green); with them
off and the doorbell's LISTEN direct (SWITCHBOARD_LISTEN_DATABASE_URL), a long-poll wakes in
milliseconds, not at the recheck."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.db import connection

from switchboard.queues import endpoints, transitions
from switchboard.queues.transitions import Actor
from tests import loopback
from tests.crash.harness import free_port, wait_until
from tests.deploy.conftest import DEPLOY, program

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# PgBouncer will not run as root; it becomes the user that runs the embedded PostgreSQL.
PGBOUNCER_USER = os.environ.get("SWITCHBOARD_PGBOUNCER_USER", "pgserver")


@pytest.fixture
def pooled(procs) -> Iterator[str]:
    """PgBouncer with the shipped settings in front of the test database: its URL. Its
    folder (in /tmp, where PGBOUNCER_USER can reach it) goes when the test ends."""
    binary = program("pgbouncer")
    settings = connection.settings_dict
    folder = Path(tempfile.mkdtemp(prefix="switchboard-pgbouncer-"))
    folder.chmod(0o777)  # PgBouncer writes here as PGBOUNCER_USER
    port = free_port()
    database = (
        f"{settings['NAME']} = host={settings['HOST']} port={settings['PORT'] or 5432}"
        f" dbname={settings['NAME']} user={settings['USER']}"
    )
    ini = (DEPLOY / "pgbouncer.ini").read_text()
    ini = ini.replace("switchboard = host=127.0.0.1 port=5432 dbname=switchboard", database)
    ini = ini.replace("listen_port = 6432", f"listen_port = {port}")
    # The test's own: no passwords (the embedded PostgreSQL trusts its socket), its files here.
    ini = ini.replace("auth_type = scram-sha-256", "auth_type = trust")
    ini = ini.replace(
        "auth_file = /etc/pgbouncer/userlist.txt",
        f"auth_file = {folder}/users.txt\nunix_socket_dir =\nlogfile = {folder}/pgbouncer.log"
        f"\npidfile = {folder}/pgbouncer.pid",
    )
    (folder / "users.txt").write_text(f'"{settings["USER"]}" ""\n')
    (folder / "pgbouncer.ini").write_text(ini)
    for path in folder.iterdir():
        path.chmod(0o666)
    procs.start("pgbouncer", [binary, "-u", PGBOUNCER_USER, str(folder / "pgbouncer.ini")], {})
    url = f"postgresql://{settings['USER']}@127.0.0.1:{port}/{settings['NAME']}"
    try:
        wait_until(
            lambda: _connects(url),
            seconds=20,
            what="PgBouncer to take connections",
            logs=procs.logs,
        )
        yield url
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _connects(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.Error:
        return False


def test_serve_refuses_a_transaction_pooler_that_loses_prepared_statements(
    procs, crash_env, pooled
):
    env = {**crash_env, "DATABASE_URL": pooled}
    server = procs.switchboard("serve", "serve", "--port", str(free_port()), env=env)
    assert server.popen.wait(timeout=60) != 0
    said = server.output()
    assert "Not serving: prepared statements are lost" in said, said
    assert "SWITCHBOARD_PREPARED_STATEMENTS=0" in said


def test_through_pgbouncer_with_the_direct_listen_a_long_poll_wakes_at_once(
    procs, crash_env, pooled, test_db_url, team
):
    env = {
        **crash_env,
        "DATABASE_URL": pooled,
        "SWITCHBOARD_PREPARED_STATEMENTS": "0",
        "SWITCHBOARD_PAGE_TIMEOUT_SECONDS": "0",
        "SWITCHBOARD_LISTEN_DATABASE_URL": test_db_url,
    }
    _server, base = procs.serve(env, workers=1)
    endpoint, token = endpoints.vend(team, "pooled")
    headers = {"Authorization": f"Bearer {token}"}
    # The verbs through the pooler: a claim and its close.
    transitions.create_todo(Actor.agent(endpoint), title="first")
    claimed = loopback.post(f"{base}/api/v1/claim_next", json={}, headers=headers, timeout=30)
    assert claimed.status_code == 200, claimed.text
    done = loopback.post(
        f"{base}/api/v1/complete",
        json={"todo_id": claimed.json()["todo"]["id"]},
        headers=headers,
        timeout=30,
    )
    assert done.status_code == 200, done.text

    woken = []
    with ThreadPoolExecutor(1) as pool:
        for n in range(3):
            poll = pool.submit(
                httpx.post,
                f"{base}/api/v1/claim_next",
                json={"wait_seconds": 20},
                headers=headers,
                timeout=30,
            )
            time.sleep(0.5)  # waiting
            created = time.monotonic()
            transitions.create_todo(Actor.agent(endpoint), title=f"wake {n}")
            answer = poll.result(timeout=25)
            woken.append(time.monotonic() - created)
            assert answer.status_code == 200 and answer.json()["todo"] is not None
    # At the recheck (5 s, jittered from 2.5) without the direct LISTEN; rung at once with it.
    assert max(woken) < 2.0, woken
    assert procs.tracebacks() == []


def test_through_pgbouncer_without_the_direct_listen_a_revoked_or_rotated_token_is_refused_at_once(
    procs, crash_env, pooled, team
):
    """The LISTEN connection through a transaction pooler answers its queries and hears
    nothing: the token cache, told of no revoke, kept a revoked token working on every worker
    that had seen it (red team, round 3: still 200 a minute later). Now the cache trusts only
    a connection that hears its own ping, so every request looks its token up: refused on
    every worker within a second of the commit; and /healthz says why in its body."""
    env = {
        **crash_env,
        "DATABASE_URL": pooled,
        "SWITCHBOARD_PREPARED_STATEMENTS": "0",
        "SWITCHBOARD_PAGE_TIMEOUT_SECONDS": "0",
    }
    _server, base = procs.serve(env, workers=2)
    revoked, revoked_token = endpoints.vend(team, "to-revoke")
    rotated, old_token = endpoints.vend(team, "to-rotate")

    def statuses(token: str, n: int = 40) -> list[int]:
        # A new connection each: gunicorn's workers take them in turn, as they come.
        return [
            loopback.post(
                f"{base}/api/v1/list_todos",
                json={},
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            ).status_code
            for _ in range(n)
        ]

    def warned() -> bool:
        answer = loopback.get(f"{base}/healthz", timeout=10)
        return answer.status_code == 200 and "does not hear its own notifications" in answer.text

    # Each worker finds out at the end of its first ping round (LISTEN_PING_SECONDS); from
    # then on, a cache that trusted its connection would keep what the warm-up fills.
    wait_until(
        lambda: warned() and warned() and warned(),
        seconds=30,
        what="/healthz's warning",
        logs=procs.logs,
    )
    # Warm: both tokens work, on both workers, many times over (a trusted cache keeps them).
    assert set(statuses(revoked_token) + statuses(old_token)) == {200}
    transitions.revoke_endpoint(None, revoked)
    new_token = endpoints.rotate(rotated)
    time.sleep(1.0)
    assert set(statuses(revoked_token)) == {401}
    assert set(statuses(old_token)) == {401}
    assert set(statuses(new_token)) == {200}

    assert procs.tracebacks() == []
