"""A request's head on ``switchboard serve`` (switchboard/workers.py): a deadline for its
line and headers, and a ceiling on their size.

The deadline: a connection that sends nothing, half a request line or half its headers is
closed within SWITCHBOARD_HEADER_TIMEOUT_SECONDS (second hardening round: such connections
stayed open indefinitely, and 4,500 of them used up a worker's open files), while a request
whose headers came in time may take as long as its answer takes.

The ceiling, at its defaults (SWITCHBOARD_MAX_HEADER_BYTES 65536, SWITCHBOARD_MAX_HEADERS
100): past either the request is answered 431 and the connection closed (third hardening
round: an 8 MB header was answered 200, and connections streaming an endless header were
buffered until the header timeout, tens of MiB each), while requests within it, one after
another on a kept connection or pipelined, are answered as before. One served process for
both."""

from __future__ import annotations

import json
import select
import socket
import time
import urllib.request

import pytest
from django.db import connection

from switchboard import dburl
from switchboard.queues import endpoints
from tests.crash.conftest import base_env
from tests.crash.harness import Procs

HEADER_TIMEOUT = 2
# Closed within the deadline plus slack for a loaded 2-core machine; the old behaviour (never
# closed) fails this by a wide margin.
CLOSED_WITHIN = HEADER_TIMEOUT + 6
CEILING = 65536


@pytest.fixture(scope="module")
def served(django_db_setup, tmp_path_factory):
    procs = Procs(tmp_path_factory.mktemp("headers"))
    env = {
        **base_env(),
        "DATABASE_URL": dburl.build(connection.settings_dict),
        "SWITCHBOARD_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
    }
    try:
        _server, base = procs.serve(env, workers=1)
        yield base
    finally:
        procs.close()


def _connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=CLOSED_WITHIN + 5)
    return sock


def _closed_after(sock: socket.socket) -> tuple[float, bytes]:
    """Seconds until the server closes the connection, and what it sent before closing."""
    started, received = time.monotonic(), b""
    while True:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
    return time.monotonic() - started, received


PARTIAL = {
    "nothing": b"",
    "half a request line": b"GET /healthz HT",
    "half the headers": b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slo",
}


@pytest.mark.parametrize("what", list(PARTIAL))
def test_a_request_whose_headers_never_come_is_cut_off(served, what):
    sock = _connect(served)
    try:
        sock.sendall(PARTIAL[what])
        took, received = _closed_after(sock)
    finally:
        sock.close()
    assert took <= CLOSED_WITHIN, (what, took)
    if PARTIAL[what]:
        assert received.startswith(b"HTTP/1.1 408 "), received
    else:
        assert received == b""


def test_a_kept_connection_gets_the_same_deadline_for_its_next_request(served):
    sock = _connect(served)
    try:
        for _ in range(2):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            first = b""
            while b"\r\n\r\n" not in first or not first.endswith(b"ok\n"):
                first += sock.recv(4096)
            assert first.startswith(b"HTTP/1.1 200 "), first
            # Idle past the header deadline but within the keep-alive (5 s): still open,
            # for the idle time is the keep-alive's to bound.
            time.sleep(HEADER_TIMEOUT + 0.5)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHo")  # then nothing more
        took, received = _closed_after(sock)
    finally:
        sock.close()
    assert took <= CLOSED_WITHIN, took
    assert received.startswith(b"HTTP/1.1 408 "), received


@pytest.mark.django_db(transaction=True)
def test_a_request_whose_headers_came_may_outlast_the_deadline(served, team):
    """A long-poll of twice the deadline is answered, not cut."""
    _, token = endpoints.vend(team, "patient")
    request = urllib.request.Request(
        f"{served}/api/v1/claim_next",
        data=json.dumps({"wait_seconds": 2 * HEADER_TIMEOUT + 1}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    assert response.status == 200 and body["todo"] is None
    assert time.monotonic() - started >= 2 * HEADER_TIMEOUT


# ---------------------------------------------------------------------------------------
# The ceiling

MOST_HEADERS = 100


def _get(*headers: bytes, path: bytes = b"/healthz") -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % (
        path,
        b"".join(header + b"\r\n" for header in headers),
    )


def _answer(sock: socket.socket, pending: bytearray) -> tuple[int, bytes]:
    """Read one answer (with a content-length) from ``sock``; what follows it stays in
    ``pending``. Returns its status and its whole text."""
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before an answer: {bytes(pending)!r}"
        pending += chunk
    head, _, _ = bytes(pending).partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    size = len(head) + 4 + length
    while len(pending) < size:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed inside an answer"
        pending += chunk
    whole = bytes(pending[:size])
    del pending[:size]
    return int(whole.split(b" ", 2)[1]), whole


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes its side."""
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


def test_an_8_mb_header_is_answered_431_and_the_connection_closed(served):
    sock = _connect(served)
    try:
        try:
            sock.sendall(_get(b"X-Big: " + b"a" * (8 << 20)))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may close before all of it went; its answer came first
        received = _until_closed(sock)
    finally:
        sock.close()
    assert received.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), received[:200]
    assert b"connection: close\r\n" in received


def test_a_header_that_never_ends_is_cut_at_the_ceiling(served):
    """The server answers and closes as soon as the ceiling is passed: long before the header
    timeout (10 s), and before twice the ceiling has been sent."""
    sock = _connect(served)
    sent = 0
    received = b""
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: ")
        while sent < 2 * CEILING:
            sock.sendall(b"a" * 4096)
            sent += 4096
            # Past the ceiling, give the server time to answer before sending more.
            wait = 5 if sent > CEILING else 0
            if select.select([sock], [], [], wait)[0]:
                received = _until_closed(sock)
                break
    finally:
        sock.close()
    assert received.startswith(b"HTTP/1.1 431 "), (sent, received[:200])
    assert sent < 2 * CEILING


def test_a_hundred_headers_are_allowed_and_a_hundred_and_one_are_not(served):
    # Host is one of them.
    allowed = [b"X-Many-%d: 1" % n for n in range(MOST_HEADERS - 1)]
    sock = _connect(served)
    try:
        sock.sendall(_get(*allowed))
        status, _ = _answer(sock, bytearray())
        assert status == 200
        sock.sendall(_get(*allowed, b"X-One-Too-Many: 1"))
        received = _until_closed(sock)
    finally:
        sock.close()
    assert received.startswith(b"HTTP/1.1 431 "), received[:200]


def test_the_ceiling_is_counted_afresh_for_each_request_on_a_kept_connection(served):
    """Heads of nearly the ceiling each, or of nearly the most headers, one after the other:
    together well past both."""
    large = b"X-Large: " + b"a" * (CEILING - 1024)
    many = [b"X-Many-%d: 1" % n for n in range(MOST_HEADERS - 1)]
    sock = _connect(served)
    pending = bytearray()
    try:
        for headers in ([large], [large], many, many, [large]):
            sock.sendall(_get(*headers))
            status, whole = _answer(sock, pending)
            assert status == 200, whole[:200]
    finally:
        sock.close()


def test_pipelined_requests_are_each_answered(served):
    """Requests sent at once, together past the ceiling, a body among them (a body is not part
    of any head): each is answered in turn."""
    half = b"X-Half: " + b"a" * (CEILING // 2)
    body = b"{" + b" " * (200 * 1024) + b"}"
    post = (
        b"POST /api/v1/claim_next HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    sock = _connect(served)
    pending = bytearray()
    try:
        sock.sendall(_get(half) + _get(half) + post + _get(half) + _get(half))
        statuses = [_answer(sock, pending)[0] for _ in range(5)]
    finally:
        sock.close()
    assert statuses == [200, 200, 401, 200, 200]
