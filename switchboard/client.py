"""A small Python client for Switchboard's agent API (standard library only).

    from switchboard.client import Client, SwitchboardError

    sb = Client("http://127.0.0.1:8000", token)
    sb.create_todo(title="rebuild docs")
    for job in sb.work(claimant="buildbox/docs-1", require_fence=True):
        with job:                          # heartbeats in the background while inside
            pages = rebuild(job.todo["body"], job.prior_attempts)
            job.complete(result={"pages": pages}, summary=f"rebuilt {pages} pages")
        # leaving the block without complete/fail/release fails the attempt (with the
        # exception as its summary) or, on KeyboardInterrupt, releases it

Every verb is a method taking the verb's arguments as keywords and returning the decoded
JSON. Errors raise ``SwitchboardError`` with the API's ``code`` and ``status``. The token is
sent only in the Authorization header and never appears in a repr or an error.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

VERBS = (
    "create_todo",
    "list_todos",
    "get_todo",
    "claim",
    "claim_next",
    "heartbeat",
    "complete",
    "fail",
    "release",
    "cancel",
)


class SwitchboardError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.extra = status, code, message, extra


class Client:
    """One persistent HTTP connection per thread; safe to share between threads."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 45.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be http(s)://host[:port]")
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self._token = token
        self._timeout = timeout
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Client({self._scheme}://{self._host}:{self._port})"

    def call(self, verb: str, **arguments: Any) -> dict:
        body = json.dumps({k: v for k, v in arguments.items() if v is not None}).encode()
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/json",
            "Connection": "keep-alive",
        }
        for attempt in range(2):  # one retry on a connection the server closed while idle
            conn = self._connection()
            try:
                conn.request("POST", f"{self._prefix}/api/v1/{verb}", body, headers)
                response = conn.getresponse()
                payload = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._drop_connection()
                if attempt:
                    raise
            except BaseException:
                # Refused, timed out, interrupted: the connection is left mid-request, and
                # every later call on it would fail with CannotSendRequest.
                self._drop_connection()
                raise
        data = json.loads(payload) if payload else {}
        if response.status >= 400:
            error = data.get("error", {}) if isinstance(data, dict) else {}
            extra = {k: v for k, v in error.items() if k not in ("code", "message")}
            raise SwitchboardError(
                response.status, error.get("code", "error"), error.get("message", ""), **extra
            )
        return data

    def __getattr__(self, verb: str):
        if verb not in VERBS:
            raise AttributeError(verb)
        return lambda **arguments: self.call(verb, **arguments)

    def work(
        self,
        *,
        wait_seconds: float = 30,
        stop: threading.Event | None = None,
        **claim_arguments: Any,
    ) -> Iterator[Job]:
        """Claim todos one after another (long-polling when the queue is empty) and yield
        each as a ``Job``. Stops when ``stop`` is set."""
        stop = stop or threading.Event()
        while not stop.is_set():
            claimed = self.claim_next(wait_seconds=wait_seconds, **claim_arguments)
            if claimed.get("todo") is None:
                continue
            yield Job(self, claimed)

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = (
                http.client.HTTPSConnection
                if self._scheme == "https"
                else http.client.HTTPConnection
            )
            conn = cls(self._host, self._port, timeout=self._timeout)
            self._local.conn = conn
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None


class Job:
    """A claimed todo: heartbeats in the background while used as a context manager, and
    ends with exactly one of complete, fail or release."""

    def __init__(self, client: Client, claimed: dict) -> None:
        self.client = client
        self.todo: dict = claimed["todo"]
        self.attempt_seq: int = claimed["attempt_seq"]
        self.prior_attempts: list[dict] = claimed.get("prior_attempts", [])
        self._lease_token: str | None = claimed.get("lease_token")
        self.ended: dict | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"Job(todo={self.todo['id']}, attempt_seq={self.attempt_seq})"

    def _ids(self) -> dict:
        ids: dict[str, Any] = {"todo_id": self.todo["id"], "attempt_seq": self.attempt_seq}
        if self._lease_token is not None:
            ids["lease_token"] = self._lease_token
        return ids

    def heartbeat(self, lease_seconds: int | None = None) -> dict:
        return self.client.heartbeat(**self._ids(), lease_seconds=lease_seconds)

    def complete(self, **arguments: Any) -> dict:
        return self._end("complete", arguments)

    def fail(self, **arguments: Any) -> dict:
        return self._end("fail", arguments)

    def release(self, **arguments: Any) -> dict:
        return self._end("release", arguments)

    def _end(self, verb: str, arguments: dict) -> dict:
        self._stop.set()
        self.ended = self.client.call(verb, **self._ids(), **arguments)
        return self.ended

    def __enter__(self) -> Job:
        lease = self.todo.get("lease_expires_at")
        claimed = self.todo.get("claimed_at")
        interval = 10.0
        if lease and claimed:
            from datetime import datetime

            span = (datetime.fromisoformat(lease) - datetime.fromisoformat(claimed)).total_seconds()
            interval = max(1.0, span / 3)
        self._beat = threading.Thread(target=self._beat_loop, args=(interval,), daemon=True)
        self._beat.start()
        return self

    def _beat_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except SwitchboardError as error:
                if error.code == "conflict":  # the attempt is gone (reaped, taken over)
                    return
            except OSError:
                time.sleep(1)

    def __exit__(self, kind, error, traceback) -> bool:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        if self.ended is None:
            if kind is KeyboardInterrupt:
                self.release(summary="worker interrupted; released")
            elif kind is not None:
                self.fail(summary=f"{kind.__name__}: {error}"[:2000])
            else:
                self.release(summary="worker ended without a verdict")
        return False
