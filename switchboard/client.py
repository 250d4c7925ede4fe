"""Python clients for Switchboard's agent API.

``Client`` uses the standard library only and threads:

    from switchboard.client import Client, SwitchboardError

    sb = Client("http://127.0.0.1:8000", token)
    sb.create_todo(title="rebuild docs")
    for job in sb.work(claimant="buildbox/docs-1", require_fence=True):
        with job:                          # heartbeats in the background while inside
            pages = rebuild(job.todo["body"], job.prior_attempts)
            job.complete(result={"pages": pages}, summary=f"rebuilt {pages} pages")
        # leaving the block without complete/fail/release fails the attempt (with the
        # exception as its summary) or, on KeyboardInterrupt, releases it

``AsyncClient`` is the same for asyncio, on httpx2 (``pip install 'switchboard[async]'``):

    async with AsyncClient("http://127.0.0.1:8000", token) as sb:
        async for job in sb.work(claimant="buildbox/docs-1", require_fence=True):
            async with job:                # heartbeats in a background task while inside
                job_result = await rebuild(job.todo["body"], job.prior_attempts)
                await job.complete(result=job_result)

Every verb is a method taking the verb's arguments as keywords and returning the decoded
JSON. Errors raise ``SwitchboardError`` with the API's ``code`` and ``status``; a transport
failure raises ``OSError`` (``TimeoutError`` for a timeout) from both clients. The token is
sent only in the Authorization header and never appears in a repr or an error.

The job loops ride through an outage (a database failover or restart, a node drained): the
claims of ``work()``, the background heartbeats and every close of a ``Job`` or ``AsyncJob``
(complete, fail, release, with or without ``then``) are tried again after a 429, 502, 503 or
504 or a transport failure, after ``Backoff``'s wait (full jitter, never shorter than the
server's ``Retry-After``). A close goes again with the same ``attempt_seq`` and lease token,
which the ledger answers with its recorded result when an earlier try had landed
(``replayed``; with ``then``, ``next`` is null and the loop long-polls), for up to
``Backoff.close_seconds`` (five minutes), then raises. Anything else (400, 401, 403, 404,
409, 500) raises at once, as does a plain verb call (``sb.create_todo(...)``): outside the
loop nothing is sent twice behind the caller's back. Each wait is logged (the logger
``switchboard.client``; never the token).

A ``claim_next`` long-poll holds its request open for up to ``wait_seconds``, so both clients
read it with a timeout of at least ``wait_seconds + LONG_POLL_MARGIN_SECONDS``, whatever
``timeout`` says: a read timeout under the wait would cut every idle long-poll short, and a
claim the server commits just as the client gives up is lost until its lease lapses.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import math
import random
import ssl
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from queues.verbs import VERBS  # plain Python, nothing of Django

log = logging.getLogger("switchboard.client")

# Seconds a long-poll's read timeout exceeds its wait_seconds: the server answers at the end
# of the wait (plus its own work and the network); this margin keeps a slow answer from
# being taken for a dead server.
LONG_POLL_MARGIN_SECONDS = 15.0

# What a later try can fix: too many requests, and a server, proxy or database away. A 500 is
# a bug, and 400, 401, 403, 404 and 409 say the request itself will never be taken.
RETRIED_STATUSES = frozenset({429, 502, 503, 504})


class SwitchboardError(Exception):
    """The API's error: ``status``, ``code``, ``message``, the error's other fields in
    ``extra``, and ``retry_after``: the seconds the server asked for (its ``Retry-After``
    header, else the body's ``retry_after``), or None."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.extra = status, code, message, extra
        given = extra.get("retry_after")
        self.retry_after: float | None = (
            float(given)
            if isinstance(given, int | float) and math.isfinite(given) and given >= 0
            else None
        )


def retryable(error: BaseException) -> bool:
    """Whether trying the same call again later may succeed: a 429, 502, 503 or 504, or a
    transport failure (refused, reset, timed out, a name that did not resolve), but not a
    certificate the client refuses."""
    if isinstance(error, SwitchboardError):
        return error.status in RETRIED_STATUSES
    return isinstance(error, OSError) and not isinstance(error, ssl.SSLCertVerificationError)


@dataclass(frozen=True, slots=True)
class Backoff:
    """How the job loops wait before trying a call again (``retryable``): a random wait
    between 0 and ``first_seconds`` doubled for each failed try so far, at most
    ``cap_seconds`` (full jitter: a fleet that failed together does not come back together),
    added to the server's ``Retry-After`` when it sent one, so the wait is never shorter than
    what the server asked. A claim is tried until it is answered or the loop is stopped; a
    close until ``close_seconds`` have passed since its first try (then its last error
    raises, and the attempt's lease lapses as for a worker that died)."""

    first_seconds: float = 0.5
    cap_seconds: float = 30.0
    close_seconds: float = 300.0

    def delay(
        self, error: BaseException, tries: int, *, deadline: float | None = None
    ) -> float | None:
        """Seconds to wait before the next try after ``tries`` failed ones (this one
        included), or None: not ``retryable``, or the wait would end past ``deadline`` (a
        ``time.monotonic()`` value)."""
        if not retryable(error):
            return None
        asked = error.retry_after if isinstance(error, SwitchboardError) else None
        wait = self.wait(tries, asked)
        if deadline is not None and time.monotonic() + wait > deadline:
            return None
        return wait

    def wait(self, tries: int, retry_after: float | None = None) -> float:
        """The wait after ``tries`` failed tries, whatever the error."""
        step = min(self.cap_seconds, self.first_seconds * 2 ** min(tries - 1, 32))
        return (retry_after or 0.0) + random.uniform(0.0, step)


def _waiting(what: str, error: BaseException, seconds: float) -> None:
    if isinstance(error, SwitchboardError):
        happened = f"answered {error.status} {error.code}"
    else:
        happened = f"failed ({type(error).__name__}: {error})"
    log.warning("%s %s; trying again in %.1f s", what, happened, seconds)


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header's seconds: a number, or an HTTP date from now."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def read_timeout(timeout: float, verb: str, arguments: dict) -> float:
    """The read timeout for one call: ``timeout``, or more for a long-poll (claim_next's, or
    the claim a close's ``then`` makes)."""
    then = arguments.get("then")
    wait = arguments.get("wait_seconds") if verb == "claim_next" else None
    if isinstance(then, dict):
        wait = then.get("wait_seconds")
    if isinstance(wait, int | float) and wait > 0:
        return max(timeout, float(wait) + LONG_POLL_MARGIN_SECONDS)
    return timeout


def _base_url(base_url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("base_url must be http(s)://host[:port]")
    return parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/")


def _decoded(status: int, payload: bytes, retry_after: str | None = None) -> dict:
    """The JSON body, or the API's error raised as SwitchboardError (with the seconds of
    ``retry_after``, the answer's ``Retry-After`` header). A body that is not JSON (a proxy's
    HTML error page) is an error with code ``error``, never a crash."""
    try:
        data = json.loads(payload) if payload else {}
    except ValueError:
        if status < 400:
            raise SwitchboardError(status, "error", "the answer was not JSON") from None
        data = {}
    if status >= 400:
        error = data.get("error", {}) if isinstance(data, dict) else {}
        error = error if isinstance(error, dict) else {}
        extra = {k: v for k, v in error.items() if k not in ("code", "message")}
        raised = SwitchboardError(
            status, error.get("code", "error"), error.get("message", ""), **extra
        )
        header = _retry_after(retry_after)
        if header is not None:
            raised.retry_after = header
        raise raised
    return data


def _body(arguments: dict) -> bytes:
    return json.dumps({k: v for k, v in arguments.items() if v is not None}).encode()


def _beat_interval(todo: dict) -> float:
    """A third of the lease the claim was given (at least a second), else 10 s."""
    lease, claimed = todo.get("lease_expires_at"), todo.get("claimed_at")
    if lease and claimed:
        span = (datetime.fromisoformat(lease) - datetime.fromisoformat(claimed)).total_seconds()
        return max(1.0, span / 3)
    return 10.0


def _failure_summary(kind: type[BaseException], error: BaseException | None) -> str:
    return f"{kind.__name__}: {error}"[:2000]


def _beat_retry(job: Job | AsyncJob, error: BaseException, failed: int, interval: float) -> float:
    """The wait before a background heartbeat's next try after ``failed`` failed ones: the
    backoff's for a ``retryable`` error, never more than the interval (a lease must not lapse
    while the loop waits), else the interval as usual."""
    delay = job.client.backoff.delay(error, failed)
    if delay is None:
        return interval
    delay = min(delay, interval)
    _waiting(f"heartbeat of todo {job.todo['id']} attempt {job.attempt_seq}", error, delay)
    return delay


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
        headers = {**headers, "Connection": "keep-alive"}
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


# What a job loop says of a todo it gives back because it stopped (or was left).
STOPPED = "worker stopped; released"


def _brought(job: _Claimed | None, claimed: dict | None) -> dict | None:
    """The claim a job loop holds but has not handed out: the one its job's close brought
    (the loop was left while the job was out), or the one it was about to hand out."""
    found = job.next if job is not None else claimed
    return found if found is not None and found.get("todo") is not None else None


class _Then:
    """A job loop's ``then``: its complete, fail or release claims the next todo in the same
    request (at once, no waiting: when nothing is there the loop long-polls claim_next as
    before), unless the loop was told to stop."""

    def __init__(self, claim_arguments: dict, *, stopped) -> None:
        self.arguments = {k: v for k, v in claim_arguments.items() if v is not None}
        self.stopped = stopped

    def __call__(self) -> dict | None:
        return None if self.stopped() else self.arguments


class _Claimed:
    """What ``Job`` and ``AsyncJob`` share: the claim's todo, its attempt, the ids every
    report on it sends (with the lease token when the claim was fenced), and, in a job
    loop, the next claim its report brought back (``next``: None when it brought none)."""

    def __init__(self, claimed: dict, then: Callable[[], dict | None] | None = None) -> None:
        self.todo: dict = claimed["todo"]
        self.attempt_seq: int = claimed["attempt_seq"]
        self.prior_attempts: list[dict] = claimed.get("prior_attempts", [])
        self._lease_token: str | None = claimed.get("lease_token")
        self._then = then
        self.ended: dict | None = None
        self.next: dict | None = None
        self.lost = False
        self._once = False  # a close tried once, never again (the worker is going away)
        self._abandoned = False  # a close given up: leaving the block sends nothing more

    def _stopping(self) -> None:
        """The worker is going away (interrupted, canceled): its release claims nothing and
        is tried once, not for minutes."""
        self._then = None
        self._once = True

    def _close_failed(
        self, backoff: Backoff, verb: str, error: BaseException, failed: int, deadline: float
    ) -> float | None:
        """After a close's ``failed``-th failed try: the seconds to wait before the next, or
        None to raise. The same ids go again, so a try whose answer was lost is answered
        with its recorded result (``replayed``). A ``conflict`` means the attempt was ended
        elsewhere: it is ``lost``, and leaving the block reports nothing either."""
        if isinstance(error, SwitchboardError) and error.code == "conflict":
            self.lost = True
            return None
        delay = None if self._once else backoff.delay(error, failed, deadline=deadline)
        if delay is None:
            self._abandoned = retryable(error)
            return None
        _waiting(f"{verb} of todo {self.todo['id']} attempt {self.attempt_seq}", error, delay)
        return delay

    def _then_of(self, arguments: dict) -> dict:
        if "then" in arguments or self._then is None:
            return arguments
        then = self._then()
        return arguments if then is None else {**arguments, "then": then}

    def _took(self, ended: dict) -> dict:
        self.next = ended.get("next")
        return ended

    def __repr__(self) -> str:
        return f"{type(self).__name__}(todo={self.todo['id']}, attempt_seq={self.attempt_seq})"

    def _ids(self) -> dict:
        ids: dict[str, Any] = {"todo_id": self.todo["id"], "attempt_seq": self.attempt_seq}
        if self._lease_token is not None:
            ids["lease_token"] = self._lease_token
        return ids


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


# --- asyncio ----------------------------------------------------------------------------------


def _httpx2():
    try:
        import httpx2
    except ImportError as exc:  # the sync client needs nothing beyond the standard library
        raise ImportError(
            "switchboard.client.AsyncClient needs httpx2: pip install 'switchboard[async]'"
        ) from exc
    return httpx2


class AsyncClient:
    """The verbs for asyncio agents, on one pooled ``httpx2.AsyncClient``.

    httpx2 is the maintained continuation of httpx (same API, under Pydantic's stewardship;
    httpx itself has had no release since 0.28.1 in December 2024), and the official MCP SDK
    already depends on it, so an asyncio agent that speaks MCP has it installed. Pass ``http`` to share a client you own
    (its timeouts are replaced per call, so a long-poll still outlives its wait); otherwise
    close this one with ``await sb.aclose()`` or ``async with``.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 45.0,
        http: Any = None,
        backoff: Backoff | None = None,
    ) -> None:
        self._httpx2 = _httpx2()
        self._scheme, self._host, self._port, prefix = _base_url(base_url)
        port = f":{self._port}" if self._port else ""
        self._base = f"{self._scheme}://{self._host}{port}{prefix}"
        self._token = token
        self._timeout = timeout
        self.backoff = backoff or Backoff()
        self._owns_http = http is None
        self._http = http if http is not None else self._httpx2.AsyncClient()

    def __repr__(self) -> str:
        return f"AsyncClient({self._scheme}://{self._host}:{self._port})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def call(self, verb: str, **arguments: Any) -> dict:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/json",
        }
        response = await self._request(
            "POST",
            f"/api/v1/{verb}",
            content=_body(arguments),
            headers=headers,
            read=read_timeout(self._timeout, verb, arguments),
        )
        return _decoded(response.status_code, response.content, response.headers.get("retry-after"))

    async def capabilities(self) -> dict:
        """``GET /api/v1/``: the server's version, features and limits (no token sent)."""
        response = await self._request("GET", "/api/v1/", read=self._timeout)
        return _decoded(response.status_code, response.content, response.headers.get("retry-after"))

    def __getattr__(self, verb: str):
        if verb not in VERBS:
            raise AttributeError(verb)

        async def verb_call(**arguments: Any) -> dict:
            return await self.call(verb, **arguments)

        return verb_call

    async def work(
        self,
        *,
        wait_seconds: float = 30,
        stop: asyncio.Event | None = None,
        **claim_arguments: Any,
    ) -> AsyncIterator[AsyncJob]:
        """Claim todos one after another (long-polling when the queue is empty) and yield
        each as an ``AsyncJob``. Stops when ``stop`` is set (checked between claims, and at
        once while waiting to try a claim again; a long-poll in flight is let finish, since
        canceling it could lose a claim the server had just committed until its lease
        lapses). Claims are tried again as ``Client.work``'s are."""
        stop = stop or asyncio.Event()
        then = _Then(claim_arguments, stopped=stop.is_set)
        arguments = {"wait_seconds": wait_seconds, **claim_arguments}
        claimed: dict | None = None
        job: AsyncJob | None = None
        try:
            while not stop.is_set():
                if claimed is None or claimed.get("todo") is None:
                    claimed = await self._claim(arguments, stop)
                    if claimed is None or claimed.get("todo") is None:
                        continue
                job, claimed = AsyncJob(self, claimed, then=then), None
                yield job
                claimed, job = job.next, None
        finally:
            # As Client.work: a todo the last close brought is given back at once.
            if (brought := _brought(job, claimed)) is not None:
                await AsyncJob(self, brought)._give_back()

    async def _claim(self, arguments: dict, stop: asyncio.Event) -> dict | None:
        """``claim_next`` until it is answered; None when ``stop`` is set meanwhile."""
        failed = 0
        while True:
            try:
                return await self.claim_next(**arguments)
            except (SwitchboardError, OSError) as error:
                failed += 1
                delay = self.backoff.delay(error, failed)
                if delay is None:
                    raise
                _waiting("claim_next", error, delay)
            try:
                await asyncio.wait_for(stop.wait(), delay)
                return None
            except TimeoutError:
                pass

    async def _request(self, method: str, path: str, *, read: float, **kwargs: Any):
        httpx2 = self._httpx2
        timeout = httpx2.Timeout(self._timeout, read=read)
        for attempt in range(2):
            try:
                return await self._http.request(
                    method, f"{self._base}{path}", timeout=timeout, **kwargs
                )
            # The same exception types as the sync client, so one handler serves both.
            except httpx2.TimeoutException as exc:
                raise TimeoutError(f"{method} {path}: {type(exc).__name__}") from exc
            except httpx2.RemoteProtocolError as exc:
                # A kept-alive connection the server (or a proxy, when a node drains) closed
                # before this request reached it: once more on a new one, as the sync
                # client does.
                if attempt or "without sending a response" not in str(exc):
                    raise ConnectionError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
            except httpx2.TransportError as exc:
                raise ConnectionError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable")


class AsyncJob(_Claimed):
    """A claimed todo for asyncio: heartbeats in a background task while used as an async
    context manager, and ends with exactly one of complete, fail or release. Leaving the
    block by an exception fails the attempt; by cancellation (or KeyboardInterrupt) releases
    it; without a verdict releases it. ``lost``, a close's tries and the heartbeats' as on
    ``Job`` (a task being canceled stops a close's waiting, as it stops anything)."""

    def __init__(self, client: AsyncClient, claimed: dict, *, then: _Then | None = None) -> None:
        super().__init__(claimed, then)
        self.client = client
        self._beat: asyncio.Task | None = None

    async def heartbeat(self, lease_seconds: int | None = None) -> dict:
        return await self.client.heartbeat(**self._ids(), lease_seconds=lease_seconds)

    async def complete(self, **arguments: Any) -> dict:
        return await self._end("complete", arguments)

    async def fail(self, **arguments: Any) -> dict:
        return await self._end("fail", arguments)

    async def release(self, **arguments: Any) -> dict:
        return await self._end("release", arguments)

    async def _end(self, verb: str, arguments: dict) -> dict:
        await self._stop_beating()
        deadline = time.monotonic() + self.client.backoff.close_seconds
        failed = 0
        while True:
            try:
                ended = await self.client.call(verb, **self._ids(), **self._then_of(arguments))
                break
            except (SwitchboardError, OSError) as error:
                failed += 1
                delay = self._close_failed(self.client.backoff, verb, error, failed, deadline)
                if delay is None:
                    raise
                await asyncio.sleep(delay)
        self.ended = ended
        return self._took(ended)

    async def _give_back(self) -> None:
        """As ``Job._give_back``: released once, else left to its lease."""
        self._stopping()
        try:
            await self.release(summary=STOPPED)
        except (SwitchboardError, OSError) as error:
            if not retryable(error):
                raise
            log.warning(
                "could not give back todo %s (%s); its lease will lapse", self.todo["id"], error
            )

    async def __aenter__(self) -> AsyncJob:
        self._beat = asyncio.create_task(self._beat_loop(_beat_interval(self.todo)))
        return self

    async def _beat_loop(self, interval: float) -> None:
        wait, failed = interval, 0
        while True:
            await asyncio.sleep(wait)
            try:
                await self.heartbeat()
                wait, failed = interval, 0
            except (SwitchboardError, OSError) as error:
                if isinstance(error, SwitchboardError) and error.code == "conflict":
                    self.lost = True  # the attempt is gone (reaped, taken over)
                    return
                failed += 1
                wait = _beat_retry(self, error, failed, interval)

    async def _stop_beating(self) -> None:
        beat, self._beat = self._beat, None
        if beat is not None and beat is not asyncio.current_task():
            beat.cancel()
            await asyncio.wait([beat])  # waits without taking on the beat's CancelledError

    async def __aexit__(self, kind, error, traceback) -> bool:
        await self._stop_beating()
        # As Job.__exit__: nothing for a lost attempt, nothing more after a close given up.
        if self.ended is None and not self.lost and not self._abandoned:
            if kind is not None and issubclass(kind, asyncio.CancelledError | KeyboardInterrupt):
                # shielded: the task is being canceled, and the release must still be sent
                self._stopping()
                await asyncio.shield(self.release(summary="worker canceled; released"))
            elif kind is not None:
                await self.fail(summary=_failure_summary(kind, error))
            else:
                await self.release(summary="worker ended without a verdict")
        return False
