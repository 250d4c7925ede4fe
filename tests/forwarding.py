"""A forwarding proxy in front of a real server, for the clients' and the relay's tests: it
records every exchange (what was asked, what was answered, and when), and can lose answers
the way a network does (the request reaches the server, which acts on it; its answer never
reaches the client). It never answers anything itself."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests import loopback
from tests.recorded import Recorded

# The answer's headers a client reads, passed on as they came.
PASSED_ON = ("content-type", "retry-after", "www-authenticate")


@dataclass(frozen=True, slots=True)
class Exchange:
    method: str
    path: str
    asked: dict | None  # the JSON sent
    status: int | None  # None: the answer was lost on the way back
    answer: dict | None  # the JSON the server answered
    retry_after: str | None
    started: float  # time.monotonic() as the request arrived
    ended: float  # and as its answer went back (or was lost)

    @property
    def verb(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def _json(data: bytes) -> dict | None:
    try:
        return json.loads(data) if data else None
    except ValueError:
        return None


class RecordingProxy:
    def __init__(self, target: str) -> None:
        self.exchanges: Recorded[Exchange] = Recorded()
        self._lose: dict[str, int] = {}  # verb: how many more of its answers to lose
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self) -> None:
                started = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() in ("authorization", "content-type")
                }
                answer = loopback.request(
                    self.command, target + self.path, content=body, headers=headers, timeout=60
                )
                asked, decoded = _json(body), _json(answer.content)
                lost = proxy._loses(self.path.rsplit("/", 1)[-1])
                if not lost:
                    self.send_response(answer.status_code)
                    for name in PASSED_ON:
                        if name in answer.headers:
                            self.send_header(name, answer.headers[name])
                    self.send_header("Content-Length", str(len(answer.content)))
                    self.end_headers()
                    self.wfile.write(answer.content)
                else:
                    self.close_connection = True  # closed without a word
                proxy.exchanges.add(
                    Exchange(
                        self.command,
                        self.path,
                        asked,
                        None if lost else answer.status_code,
                        decoded,
                        answer.headers.get("retry-after"),
                        started,
                        time.monotonic(),
                    )
                )

            do_GET = do_POST = forward

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def lose_answers(self, verb: str, count: int) -> None:
        """Forward the next ``count`` calls of ``verb`` and lose their answers."""
        with self._lock:
            self._lose[verb] = count

    def _loses(self, verb: str) -> bool:
        with self._lock:
            left = self._lose.get(verb, 0)
            if left:
                self._lose[verb] = left - 1
            return bool(left)

    def seen(self) -> list[Exchange]:
        return self.exchanges.snapshot()

    def verbs(self) -> list[str]:
        return [e.verb for e in self.seen() if e.method == "POST"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> RecordingProxy:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
