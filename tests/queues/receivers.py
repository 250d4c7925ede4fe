"""Webhook receivers for tests: tiny HTTP servers on 127.0.0.1, started by the test.

Only loopback: tests never send traffic anywhere else (tests that need a delivery to go
through turn on SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE with the ``settings`` fixture). Test modules
wrap ``receivers()`` in a fixture of their own.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered

    @property
    def json(self) -> dict:
        return json.loads(self.body)

    @property
    def delivery_id(self) -> str:
        return self.headers["x-switchboard-delivery"]

    def signed_by(self, secret: str) -> bool:
        """The check docs/notifications.md tells receivers to make."""
        timestamp = self.headers["x-switchboard-timestamp"]
        expected = hmac.new(
            secret.encode(), timestamp.encode() + b"." + self.body, hashlib.sha256
        ).hexdigest()
        return hmac.compare_digest("sha256=" + expected, self.headers["x-switchboard-signature"])


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a sender that hung up on a slow answer (the deadline test) is expected


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that reads a POST's body, answers with ``answer``, and logs nothing."""

    def body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def answer(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):  # keep the test output quiet
        pass


def serve_on_loopback(handler: type[BaseHTTPRequestHandler]):
    """Serve ``handler`` on 127.0.0.1 at a free port, a thread per request, from a daemon
    thread; returns (server, thread). Stop with ``server.shutdown(); server.server_close()``."""
    server = _QuietServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def serve_posts(received):
    """Serve POSTs on 127.0.0.1 (``serve_on_loopback``): each one's handler and body go to
    ``received(handler, body)`` on the server's thread, which answers (``handler.answer``)."""

    class Handler(QuietHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            received(self, self.body())

    return serve_on_loopback(Handler)


class Receiver:
    """Answers each POST with the next of ``statuses`` (then 200 for ever), after ``delay``
    seconds; ``location`` is sent with a 3xx; ``on_request`` (if given) runs before each
    answer, on the server's thread. Records every request."""

    def __init__(
        self, statuses=(), *, location: str | None = None, delay: float = 0.0, on_request=None
    ):
        self.statuses = list(statuses)
        self.location = location
        self.delay = delay
        self.on_request = on_request
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self.server, self.thread = serve_posts(self._received)

    def _received(self, handler: QuietHandler, body: bytes) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.on_request is not None:
            self.on_request()
        with self._lock:
            status = self.statuses.pop(0) if self.statuses else 200
            self.requests.append(
                Request(
                    handler.path,
                    {k.lower(): v for k, v in handler.headers.items()},
                    body,
                    status,
                )
            )
        redirect = self.location and 300 <= status < 400
        handler.answer(
            status,
            b"receiver says no" if status >= 400 else b"ok",
            {"Location": self.location} if redirect else None,
        )

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    @property
    def accepted(self) -> list[Request]:
        return [r for r in self.requests if 200 <= r.status < 300]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def receivers() -> Iterator:
    """``start(statuses, location=..., delay=..., on_request=...)`` starts a receiver; every
    receiver started stops when the block ends."""
    started: list[Receiver] = []

    def start(statuses=(), **kwargs) -> Receiver:
        server = Receiver(statuses, **kwargs)
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()
