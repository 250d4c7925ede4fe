"""The asyncio client, on httpx2 (``pip install 'switchboard[async]'``): ``AsyncClient`` and
its job loop with ``AsyncJob``, a claimed todo heartbeated by a task."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
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
        headers = {**kwargs.pop("headers", {}), "User-Agent": USER_AGENT, **trace_headers()}
        for attempt in range(2):
            try:
                return await self._http.request(
                    method, f"{self._base}{path}", timeout=timeout, headers=headers, **kwargs
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

    async def spawn(self, title: str, **arguments: Any) -> dict:
        """Make a child of this todo (``create_todo`` with ``parent``; ``to`` puts it on
        another endpoint's queue): the holder splits its work. Returns the child todo."""
        made = await self.client.call(
            "create_todo", title=title, parent=self.todo["id"], **arguments
        )
        return made["todo"]

    async def wait_for_children(self, **arguments: Any) -> dict:
        """Release this todo until each of its children has ended (``release`` with
        ``wait_for_children``; no try spent): its next claimer reads them in ``children``.
        Other arguments (``summary``, ``then``) as for ``release``."""
        return await self.release(wait_for_children=True, **arguments)

    async def ask(
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
        return await self.release(
            **_asking(
                question,
                choices=choices,
                answer_schema=answer_schema,
                answer_within_seconds=answer_within_seconds,
                on_no_answer=on_no_answer,
                arguments=arguments,
            )
        )

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
