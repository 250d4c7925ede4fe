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

A ``claim_next`` long-poll holds its request open for up to ``wait_seconds``, so both clients
read it with a timeout of at least ``wait_seconds + LONG_POLL_MARGIN_SECONDS``, whatever
``timeout`` says: a read timeout under the wait would cut every idle long-poll short, and a
claim the server commits just as the client gives up is lost until its lease lapses.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from queues.verbs import VERBS  # plain Python, nothing of Django

# Seconds a long-poll's read timeout exceeds its wait_seconds: the server answers at the end
# of the wait (plus its own work and the network); this margin keeps a slow answer from
# being taken for a dead server.
LONG_POLL_MARGIN_SECONDS = 15.0


class SwitchboardError(Exception):
    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.extra = status, code, message, extra


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


def _decoded(status: int, payload: bytes) -> dict:
    """The JSON body, or the API's error raised as SwitchboardError. A body that is not
    JSON (a proxy's HTML error page) is an error with code ``error``, never a crash."""
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
        raise SwitchboardError(
            status, error.get("code", "error"), error.get("message", ""), **extra
        )
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


class Client:
    """One persistent HTTP connection per thread; safe to share between threads."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 45.0) -> None:
        self._scheme, self._host, self._port, self._prefix = _base_url(base_url)
        self._token = token
        self._timeout = timeout
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"Client({self._scheme}://{self._host}:{self._port})"

    def call(self, verb: str, **arguments: Any) -> dict:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/json",
        }
        status, payload = self._request(
            "POST",
            f"{self._prefix}/api/v1/{verb}",
            _body(arguments),
            headers,
            timeout=read_timeout(self._timeout, verb, arguments),
        )
        return _decoded(status, payload)

    def capabilities(self) -> dict:
        """``GET /api/v1/``: the server's version, features and limits (no token sent)."""
        status, payload = self._request(
            "GET", f"{self._prefix}/api/v1/", None, {}, timeout=self._timeout
        )
        return _decoded(status, payload)

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
        each as a ``Job``. Stops when ``stop`` is set (checked between claims)."""
        stop = stop or threading.Event()
        then = _Then(claim_arguments, stopped=stop.is_set)
        claimed: dict | None = None
        job: Job | None = None
        try:
            while not stop.is_set():
                if claimed is None or claimed.get("todo") is None:
                    claimed = self.claim_next(wait_seconds=wait_seconds, **claim_arguments)
                    if claimed.get("todo") is None:
                        continue
                job, claimed = Job(self, claimed, then=then), None
                yield job
                claimed, job = job.next, None
        finally:
            # A todo the last close brought, after a stop or a loop left (break): given
            # back at once, not kept until its lease lapses.
            if (brought := _brought(job, claimed)) is not None:
                Job(self, brought).release(summary=STOPPED)

    def _request(
        self, method: str, path: str, body: bytes | None, headers: dict, *, timeout: float
    ) -> tuple[int, bytes]:
        headers = {**headers, "Connection": "keep-alive"}
        for attempt in range(2):  # one retry on a connection the server closed while idle
            conn = self._connection()
            conn.timeout = timeout  # used when it (re)connects
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            try:
                conn.request(method, path, body, headers)
                response = conn.getresponse()
                return response.status, response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self._drop_connection()
                if attempt:
                    raise
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

    def _stopping(self) -> None:
        """The worker is going away (interrupted, canceled): its release claims nothing."""
        self._then = None

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
    answers ``conflict``: the attempt was ended elsewhere (reaped, taken over, released or
    canceled by a person), nothing this job reports will count, and leaving the block sends
    nothing."""

    def __init__(
        self, client: Client, claimed: dict, *, then: Callable[[], dict | None] | None = None
    ) -> None:
        super().__init__(claimed, then)
        self.client = client
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
        self.ended = self.client.call(verb, **self._ids(), **self._then_of(arguments))
        return self._took(self.ended)

    def __enter__(self) -> Job:
        interval = _beat_interval(self.todo)
        self._beat = threading.Thread(target=self._beat_loop, args=(interval,), daemon=True)
        self._beat.start()
        return self

    def _beat_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.heartbeat()
            except SwitchboardError as error:
                if error.code == "conflict":  # the attempt is gone (reaped, taken over)
                    self.lost = True
                    return
            except OSError:
                time.sleep(1)

    def __exit__(self, kind, error, traceback) -> bool:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
        if self.ended is None and not self.lost:  # a lost attempt's report would be refused
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
        self, base_url: str, token: str, *, timeout: float = 45.0, http: Any = None
    ) -> None:
        self._httpx2 = _httpx2()
        self._scheme, self._host, self._port, prefix = _base_url(base_url)
        port = f":{self._port}" if self._port else ""
        self._base = f"{self._scheme}://{self._host}{port}{prefix}"
        self._token = token
        self._timeout = timeout
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
        return _decoded(response.status_code, response.content)

    async def capabilities(self) -> dict:
        """``GET /api/v1/``: the server's version, features and limits (no token sent)."""
        response = await self._request("GET", "/api/v1/", read=self._timeout)
        return _decoded(response.status_code, response.content)

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
        each as an ``AsyncJob``. Stops when ``stop`` is set (checked between claims: a
        long-poll in flight is let finish, since canceling it could lose a claim the server
        had just committed until its lease lapses)."""
        stop = stop or asyncio.Event()
        then = _Then(claim_arguments, stopped=stop.is_set)
        claimed: dict | None = None
        job: AsyncJob | None = None
        try:
            while not stop.is_set():
                if claimed is None or claimed.get("todo") is None:
                    claimed = await self.claim_next(wait_seconds=wait_seconds, **claim_arguments)
                    if claimed.get("todo") is None:
                        continue
                job, claimed = AsyncJob(self, claimed, then=then), None
                yield job
                claimed, job = job.next, None
        finally:
            # As Client.work: a todo the last close brought is given back at once.
            if (brought := _brought(job, claimed)) is not None:
                await AsyncJob(self, brought).release(summary=STOPPED)

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
    it; without a verdict releases it. ``lost`` as on ``Job``."""

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
        self.ended = await self.client.call(verb, **self._ids(), **self._then_of(arguments))
        return self._took(self.ended)

    async def __aenter__(self) -> AsyncJob:
        self._beat = asyncio.create_task(self._beat_loop(_beat_interval(self.todo)))
        return self

    async def _beat_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await self.heartbeat()
            except SwitchboardError as error:
                if error.code == "conflict":  # the attempt is gone (reaped, taken over)
                    self.lost = True
                    return
            except OSError:
                await asyncio.sleep(1)

    async def _stop_beating(self) -> None:
        beat, self._beat = self._beat, None
        if beat is not None and beat is not asyncio.current_task():
            beat.cancel()
            await asyncio.wait([beat])  # waits without taking on the beat's CancelledError

    async def __aexit__(self, kind, error, traceback) -> bool:
        await self._stop_beating()
        if self.ended is None and not self.lost:  # a lost attempt's report would be refused
            if kind is not None and issubclass(kind, asyncio.CancelledError | KeyboardInterrupt):
                # shielded: the task is being canceled, and the release must still be sent
                self._stopping()
                await asyncio.shield(self.release(summary="worker canceled; released"))
            elif kind is not None:
                await self.fail(summary=_failure_summary(kind, error))
            else:
                await self.release(summary="worker ended without a verdict")
        return False
