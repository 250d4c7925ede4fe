"""The standard-library client: one persistent HTTP connection per thread, and its job
loop (``work()``) with ``Job``, a claimed todo heartbeated by a thread."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from switchboard.client.about import VERBS
from switchboard.client.common import (
    STOPPED,
    USER_AGENT,
    Backoff,
    SwitchboardError,
    _asking,
    _base_url,
    _beat_interval,
    _beat_retry,
    _body,
    _brought,
    _Claimed,
    _decoded,
    _failure_summary,
    _Then,
    _waiting,
    log,
    read_timeout,
    retryable,
    trace_headers,
)


class Client:
    """One persistent HTTP connection per thread; safe to share between threads. ``backoff``
    says how its job loops wait between tries (``Backoff``)."""

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 45.0, backoff: Backoff | None = None
    ) -> None:
        self._scheme, self._host, self._port, self._prefix = _base_url(base_url)
        self._token = token
        self._timeout = timeout
        self.backoff = backoff or Backoff()
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Client({self._scheme}://{self._host}:{self._port})"

    def call(self, verb: str, **arguments: Any) -> dict:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/json",
        }
        return _decoded(
            *self._request(
                "POST",
                f"{self._prefix}/api/v1/{verb}",
                _body(arguments),
                headers,
                timeout=read_timeout(self._timeout, verb, arguments),
            )
        )

    def capabilities(self) -> dict:
        """``GET /api/v1/``: the server's version, features and limits (no token sent)."""
        return _decoded(
            *self._request("GET", f"{self._prefix}/api/v1/", None, {}, timeout=self._timeout)
        )

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
        each as a ``Job``. Stops when ``stop`` is set (checked between claims, and at once
        while waiting to try a claim again). A claim that meets a ``retryable`` error is
        tried again after ``self.backoff``'s wait, for as long as it takes; any other error
        raises."""
        stop = stop or threading.Event()
        then = _Then(claim_arguments, stopped=stop.is_set)
        arguments = {"wait_seconds": wait_seconds, **claim_arguments}
        claimed: dict | None = None
        job: Job | None = None
        try:
            while not stop.is_set():
                if claimed is None or claimed.get("todo") is None:
                    claimed = self._claim(arguments, stop)
                    if claimed is None or claimed.get("todo") is None:
                        continue
                job, claimed = Job(self, claimed, then=then), None
                yield job
                claimed, job = job.next, None
        finally:
            # A todo the last close brought, after a stop or a loop left (break): given
            # back at once, not kept until its lease lapses.
            if (brought := _brought(job, claimed)) is not None:
                Job(self, brought)._give_back()

    def _claim(self, arguments: dict, stop: threading.Event) -> dict | None:
        """``claim_next`` until it is answered; None when ``stop`` is set meanwhile."""
        failed = 0
        while True:
            try:
                return self.claim_next(**arguments)
            except (SwitchboardError, OSError) as error:
                failed += 1
                delay = self.backoff.delay(error, failed)
                if delay is None:
                    raise
                _waiting("claim_next", error, delay)
            if stop.wait(delay):
                return None

    def _request(
        self, method: str, path: str, body: bytes | None, headers: dict, *, timeout: float
    ) -> tuple[int, bytes, str | None]:
        """The answer's status, body and ``Retry-After`` header."""
        headers = {
            **headers,
            "Connection": "keep-alive",
            "User-Agent": USER_AGENT,
            **trace_headers(),
        }
        for attempt in range(2):  # one retry on a connection the server closed while idle
            conn = self._connection()
            conn.timeout = timeout  # used when it (re)connects
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                conn.request(method, path, body, headers)
                response = conn.getresponse()
                return response.status, response.read(), response.getheader("Retry-After")
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._drop_connection()
                if attempt:
                    raise
            except http.client.HTTPException as exc:
                # An answer cut short or garbled (IncompleteRead, a bad status line): a
                # transport failure like any other, an OSError as the async client says it.
                self._drop_connection()
                raise ConnectionError(f"{method} {path}: {type(exc).__name__}") from exc
            except BaseException:
                # Refused, timed out, interrupted: the connection is left mid-request, and
                # every later call on it would fail with CannotSendRequest.
                self._drop_connection()
                raise
        raise AssertionError("unreachable")

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


class Job(_Claimed):
    """A claimed todo: heartbeats in the background while used as a context manager, and
    ends with exactly one of complete, fail or release. ``lost`` turns true when a heartbeat
    or a close answers ``conflict``: the attempt was ended elsewhere (reaped, taken over,
    released or canceled by a person), nothing this job reports will count, and leaving the
    block sends nothing.

    A close (complete, fail, release) that meets a ``retryable`` error is tried again, with
    the same ids, for up to the client's ``Backoff.close_seconds``; then, or when
    ``give_up`` is set meanwhile, its last error raises and leaving the block sends nothing
    more (the lease lapses). Background heartbeats that fail are tried again sooner than
    their interval; ``heartbeat()`` called by hand is one try."""

    def __init__(
        self,
        client: Client,
        claimed: dict,
        *,
        then: Callable[[], dict | None] | None = None,
        give_up: threading.Event | None = None,
    ) -> None:
        super().__init__(claimed, then)
        self.client = client
        self._give_up = give_up
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def heartbeat(self, lease_seconds: int | None = None) -> dict:
        return self.client.heartbeat(**self._ids(), lease_seconds=lease_seconds)

    def complete(self, **arguments: Any) -> dict:
        return self._end("complete", arguments)

    def fail(self, **arguments: Any) -> dict:
        return self._end("fail", arguments)

    def release(self, **arguments: Any) -> dict:
        return self._end("release", arguments)

    def spawn(self, title: str, **arguments: Any) -> dict:
        """Make a child of this todo (``create_todo`` with ``parent``; ``to`` puts it on
        another endpoint's queue): the holder splits its work. Returns the child todo."""
        made = self.client.call("create_todo", title=title, parent=self.todo["id"], **arguments)
        return made["todo"]

    def wait_for_children(self, **arguments: Any) -> dict:
        """Release this todo until each of its children has ended (``release`` with
        ``wait_for_children``; no try spent): its next claimer reads them in ``children``.
        Other arguments (``summary``, ``then``) as for ``release``."""
        return self.release(wait_for_children=True, **arguments)

    def ask(
        self,
        question: str,
        *,
        choices: list[str] | None = None,
        answer_schema: dict | None = None,
        answer_within_seconds: int | None = None,
        on_no_answer: str | None = None,
        **arguments: Any,
    ) -> dict:
        """Give the todo to people with ``question`` (``release`` with ``question``): the
        attempt ends ``asked`` (no try spent) and the todo waits (state ``waiting``) until a
        person on the Board, or the todo's requester with ``answer``, answers; then it is
        pending again and its next claimer reads the question and the answer
        (``questions``). ``choices`` (1 to 10 strings) or ``answer_schema`` (a flat JSON
        Schema object) say what answers it, else free text; ``answer_within_seconds`` and
        ``on_no_answer`` (``requeue`` or ``dead_letter``) what comes of no answer. Other
        arguments (``summary``, ``artifact``, ``then``) as for ``release``."""
        return self.release(
            **_asking(
                question,
                choices=choices,
                answer_schema=answer_schema,
                answer_within_seconds=answer_within_seconds,
                on_no_answer=on_no_answer,
                arguments=arguments,
            )
        )

    def _end(self, verb: str, arguments: dict) -> dict:
        self._stop.set()
        deadline = time.monotonic() + self.client.backoff.close_seconds
        failed = 0
        while True:
            try:
                ended = self.client.call(verb, **self._ids(), **self._then_of(arguments))
                break
            except (SwitchboardError, OSError) as error:
                failed += 1
                delay = self._close_failed(self.client.backoff, verb, error, failed, deadline)
                if delay is None or self._told_to_give_up(delay):
                    raise
        self.ended = ended
        return self._took(ended)

    def _told_to_give_up(self, seconds: float) -> bool:
        """Wait before a close's next try; True when ``give_up`` was set meanwhile."""
        if self._give_up is None:
            time.sleep(seconds)
            return False
        self._abandoned = self._give_up.wait(seconds)
        return self._abandoned

    def _give_back(self) -> None:
        """Release a todo the loop holds but never handed out, once: in an outage it is
        left to its lease rather than hold up a loop that was told to stop."""
        self._stopping()
        try:
            self.release(summary=STOPPED)
        except (SwitchboardError, OSError) as error:
            if not retryable(error):
                raise
            log.warning(
                "could not give back todo %s (%s); its lease will lapse", self.todo["id"], error
            )

    def __enter__(self) -> Job:
        interval = _beat_interval(self.todo)
        self._beat = threading.Thread(target=self._beat_loop, args=(interval,), daemon=True)
        self._beat.start()
        return self

    def _beat_loop(self, interval: float) -> None:
        wait, failed = interval, 0
        while not self._stop.wait(wait):
            try:
                self.heartbeat()
                wait, failed = interval, 0
            except (SwitchboardError, OSError) as error:
                if isinstance(error, SwitchboardError) and error.code == "conflict":
                    self.lost = True  # the attempt is gone (reaped, taken over)
                    return
                failed += 1
                wait = _beat_retry(self, error, failed, interval)

    def __exit__(self, kind, error, traceback) -> bool:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        # A lost attempt's report would be refused; one given up on has had its minutes.
        if self.ended is None and not self.lost and not self._abandoned:
            if kind is KeyboardInterrupt:
                self._stopping()
                self.release(summary="worker interrupted; released")
            elif kind is not None:
                self.fail(summary=_failure_summary(kind, error))
            else:
                self.release(summary="worker ended without a verdict")
        return False
