"""The shipped proxy configurations (deploy/haproxy.cfg, deploy/nginx-switchboard.conf) in
front of a served node: a client that leaves mid long-poll has nothing claimed for it (the
proxy passes the leaving on, and the node's waiter ends), a live client behind the same proxy
is served; and behind HAProxy's defaults, which hide the leaving, a ring goes to the newest
waiter, a live one, rather than to the ghosts that waited longer."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from switchboard.queues import endpoints, transitions
from switchboard.queues.models import TodoAttempt
from switchboard.queues.transitions import Actor
from tests import loopback
from tests.crash.harness import free_port, wait_until
from tests.deploy.conftest import DEPLOY, program

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

GHOSTS = 5


def _haproxy(procs, node: str, *, abortonclose: bool = True) -> str:
    config = (DEPLOY / "haproxy.cfg").read_text()
    if not abortonclose:  # HAProxy's default: the leaving is not passed on
        config = config.replace("    option abortonclose\n", "")
    path = procs.root / "haproxy.cfg"
    path.write_text(config)
    port = free_port()
    env = {
        "SWITCHBOARD_PROXY_BIND": f"127.0.0.1:{port}",
        **{f"SWITCHBOARD_NODE_{n}": node for n in "ABC"},  # three names, one node
    }
    procs.start("haproxy", [program("haproxy"), "-db", "-f", str(path)], env)
    return f"http://127.0.0.1:{port}"


def _nginx(procs, node: str) -> str:
    site = (DEPLOY / "nginx-switchboard.conf").read_text()
    port = free_port()
    for shipped in ("127.0.0.1:8001", "127.0.0.1:8002", "127.0.0.1:8003"):
        site = site.replace(shipped, node)
    site = site.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{port};")
    root: Path = procs.root
    conf = root / "nginx.conf"
    conf.write_text(
        "daemon off;\nworker_processes 1;\n"
        f"pid {root}/nginx.pid;\nerror_log {root}/nginx-error.log info;\n"
        "events { worker_connections 1024; }\n"
        "http {\n"
        f"access_log off;\nclient_body_temp_path {root}/body;\nproxy_temp_path {root}/proxy;\n"
        f"{site}\n}}\n"
    )
    procs.start("nginx", [program("nginx"), "-e", f"{root}/nginx-error.log", "-c", str(conf)], {})
    return f"http://127.0.0.1:{port}"


PROXIES = {"haproxy": _haproxy, "nginx": _nginx}


def _answers(base: str) -> bool:
    """The proxy listens. Not asked for a page: its answer would leave an idle connection
    in the proxy's pool to the node, which a ghost's request could then take over."""
    host, port = base.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return False
    return True


def _connections(server) -> set[tuple]:
    """The node's open connections (its workers'), each as its two addresses."""
    held = set()
    for worker in psutil.Process(server.pid).children():
        try:
            held |= {
                (c.laddr, c.raddr)
                for c in worker.net_connections()
                if c.status == psutil.CONN_ESTABLISHED
            }
        except psutil.NoSuchProcess:
            continue
    return held


class _Held:
    """The requests the node holds on to that were not there before: connections seen
    open across half a second (a health check, or the proxy's idle pool, is not one)."""

    def __init__(self, server) -> None:
        self.server = server
        self.before = _connections(server)
        self.seen: set[tuple] = set()

    def count(self) -> int:
        first = _connections(self.server) - self.before
        time.sleep(0.5)
        self.seen = first & _connections(self.server)
        return len(self.seen)

    def gone(self) -> bool:
        return not (self.seen & _connections(self.server))


def _ghost(base: str, token: str, wait: int = 25) -> socket.socket:
    """A client that asks for a long-poll through the proxy; the caller closes it (leaves)."""
    host, port = base.removeprefix("http://").split(":")
    body = b'{"wait_seconds": %d}' % wait
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        b"POST /api/v1/claim_next HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (host.encode(), token.encode(), len(body), body)
    )
    return sock


@pytest.mark.parametrize("proxy", list(PROXIES))
def test_a_client_that_leaves_behind_the_shipped_proxy_has_nothing_claimed(
    proxy, procs, crash_env, team
):
    server, node = procs.serve(crash_env, workers=1)
    base = PROXIES[proxy](procs, node.removeprefix("http://"))
    wait_until(lambda: _answers(base), seconds=30, what=f"{proxy} to answer", logs=procs.logs)
    endpoint, token = endpoints.vend(team, "behind-a-proxy")

    held = _Held(server)
    ghosts = [_ghost(base, token) for _ in range(GHOSTS)]
    wait_until(lambda: held.count() >= GHOSTS, seconds=20, what="the polls", logs=procs.logs)
    for sock in ghosts:
        sock.close()  # the clients leave
    wait_until(
        held.gone, seconds=20, what=f"{proxy} to pass the leaving on to the node", logs=procs.logs
    )
    time.sleep(0.2)  # the node's loop ends the waiters it was told of
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="for nobody who left")
    time.sleep(1.5)  # a ghost would have claimed it by now (a ring answers in milliseconds)

    assert not TodoAttempt.objects.filter(todo_id=todo.id).exists(), procs.logs()
    live = loopback.post(
        f"{base}/api/v1/claim_next",
        json={"wait_seconds": 5},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert live.status_code == 200 and live.json()["todo"]["id"] == todo.id
    assert procs.tracebacks() == []


def test_behind_haproxys_defaults_a_ring_goes_to_the_live_client_not_the_ghosts(
    procs, crash_env, team
):
    """Without ``option abortonclose`` the node never hears that the ghosts left; the newest
    waiter (a live client polling after them) gets the ring. The oldest-first rule it
    replaced gave 3 of 3 new todos to vanished clients (issue 29)."""
    server, node = procs.serve(crash_env, workers=1)
    base = _haproxy(procs, node.removeprefix("http://"), abortonclose=False)
    wait_until(lambda: _answers(base), seconds=30, what="haproxy to answer", logs=procs.logs)
    endpoint, token = endpoints.vend(team, "behind-haproxy-defaults")

    held = _Held(server)
    ghosts = [_ghost(base, token) for _ in range(GHOSTS)]
    wait_until(lambda: held.count() >= GHOSTS, seconds=20, what="the polls", logs=procs.logs)
    for sock in ghosts:
        sock.close()  # the node is not told: it holds their long-polls on
    held.before |= held.seen
    with ThreadPoolExecutor(1) as pool:
        live = pool.submit(
            httpx.post,
            f"{base}/api/v1/claim_next",
            json={"wait_seconds": 10},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        wait_until(lambda: held.count() >= 1, seconds=20, what="the live poll", logs=procs.logs)
        time.sleep(0.3)  # past its first look: waiting, the newest of all
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title="for the live one")
        answer = live.result(timeout=20)
    assert answer.status_code == 200 and answer.json()["todo"]["id"] == todo.id
    assert TodoAttempt.objects.filter(todo_id=todo.id).count() == 1
