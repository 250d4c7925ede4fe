"""The agents' front door: ``/api/v1/…``, ``/mcp`` and ``/metrics``, answered on the event
loop without Django's request handler, and nowhere else (the site, under the same ASGI
application, is Django's: switchboard/asgi.py routes between the two).

Why not Django's handler: every sync middleware and view hop of it crosses ``sync_to_async`` (a
thread and back), which cost the agents' hot path much of its throughput (docs/benchmarks.md,
"Django's ASGI handler on the hot path"). Here a verb is decoded, authenticated and answered on
the loop, its plan run on the async pool (queues.db), a long-poll waits on the doorbell holding
no thread, and MCP runs django-mcpz's view on the loop (agents/mcp.py). What the site's
middleware does for these paths is asked of Django itself, not written again: the Host header
is judged by ``HttpRequest.get_host()`` (ALLOWED_HOSTS, the forwarded-host settings), and the
plain-http redirect and the security headers come from Django's ``SecurityMiddleware``
(``_SiteRules``).

A request body must arrive within SWITCHBOARD_BODY_TIMEOUT_SECONDS (else 408, and the
connection closes) and be at most 1 MiB (else 400 ``invalid``, without reading it, and the
connection closes: the unread body cannot be skipped). Before that 400 is sent, what the
client goes on sending of the body is read and dropped, up to LINGER_BYTES for at most
LINGER_SECONDS: a connection closed with unread bytes in its socket is reset by the kernel,
and the client can lose the 400 before it reads it (the server closes as soon as the
response is sent, so the dropping cannot come after it, as nginx's lingering close does).
"""

from __future__ import annotations

import asyncio
import io
import logging
from http import HTTPStatus

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import setting_changed
from django.http import HttpResponse
from django.middleware.security import SecurityMiddleware

from switchboard.agents import (
    a2a,
    a2a_rest,
    a2a_words,
    mcp,
    mcp_tasks,
    metrics,
    verbs,
    waiting,
    wire,
)
from switchboard.agents.auth import endpoint_for
from switchboard.agents.openapi import capabilities, document
from switchboard.queues import tracing
from switchboard.queues.db.availability import breaker
from switchboard.queues.errors import (
    DATABASE_ERRORS,
    DomainError,
    Invalid,
    NotFound,
    Unavailable,
    from_database_error,
)

log = logging.getLogger("switchboard.agents")

API = "/api/v1/"


def handles(scope: dict) -> bool:
    """Is this request the front's? ``/metrics`` is, only while a metrics token is set: unset,
    it is the site's, which has no such page (the 404 of any unknown URL)."""
    path = scope["path"]
    if path.startswith(("/api/", "/mcp", a2a_rest.PATH)) or path in (a2a.PATH, a2a.CARD_PATH):
        return True
    return path == "/metrics" and bool(settings.SWITCHBOARD_METRICS_TOKEN)


def _unavailable() -> Unavailable:
    """What every agents' path answers while the breaker says the database is away."""
    return Unavailable("The database is unavailable; retry shortly.")


class _BodyTimeout(Exception):
    pass


# How much of a refused body is read and dropped before the 400, and for how long at most:
# a client that sends more, or slower, is cut off (and may see a reset).
LINGER_BYTES = 16 * 1024 * 1024
LINGER_SECONDS = 2.0


class _Exchange:
    """One request and its response, on the raw ASGI callables."""

    def __init__(self, scope: dict, receive, send) -> None:
        self.scope, self.receive, self.send = scope, receive, send
        self.method = scope["method"]
        self.path = scope["path"]
        self.headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        self.gone: asyncio.Future | None = None
        self._watcher: asyncio.Task | None = None
        self.close = False
        self.started = False
        self.security_headers: list[tuple[bytes, bytes]] = []

    # -- the request

    async def body(self) -> bytes:
        declared = self.headers.get("content-length", "0").strip() or "0"
        if not declared.isascii() or not declared.isdigit():
            self.close = True
            await self._drop_rest()
            raise Invalid("Content-Length is not a number.")
        if int(declared) > wire.MAX_BODY_BYTES:
            self.close = True  # an unread body cannot be skipped on a kept connection
            await self._drop_rest()
            raise Invalid(f"The body is over {wire.MAX_BODY_BYTES} bytes.")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(settings.SWITCHBOARD_BODY_TIMEOUT_SECONDS):
                while True:
                    message = await self.receive()
                    if message["type"] == "http.disconnect":
                        raise waiting.ClientGone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > wire.MAX_BODY_BYTES:
                        self.close = True
                        if message.get("more_body", False):
                            await self._drop_rest()
                        raise Invalid(f"The body is over {wire.MAX_BODY_BYTES} bytes.")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            raise _BodyTimeout from None

    async def _drop_rest(self) -> None:
        """Read and drop the rest of a body being refused, up to LINGER_BYTES and for at
        most LINGER_SECONDS, so that the connection closes after the 400 with nothing left
        unread in its socket."""
        left = LINGER_BYTES
        try:
            async with asyncio.timeout(LINGER_SECONDS):
                while left > 0:
                    message = await self.receive()
                    if message["type"] == "http.disconnect":
                        raise waiting.ClientGone  # nobody to answer
                    left -= len(message.get("body", b""))
                    if not message.get("more_body", False):
                        return
        except TimeoutError:
            return

    def watch_disconnect(self, *, peek: bool = False) -> waiting.Departure:
        """A future done once the client goes away (the body must have been read); with
        ``peek``, a look taken only when asked (no task for a call that does not wait)."""
        if peek:
            return _Peek(self)
        if self.gone is None:
            loop = asyncio.get_running_loop()
            self.gone = loop.create_future()
            self._watcher = loop.create_task(self._watch())
        return self.gone

    async def _watch(self) -> None:
        gone = self.gone
        assert gone is not None
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                if not gone.done():
                    gone.set_result(None)
                return

    def finish(self) -> None:
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()

    # -- the response

    async def respond(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        names = {name.lower() for name, _ in headers}
        out = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        out += [(name, value) for name, value in self.security_headers if name not in names]
        out.append((b"content-length", str(len(body)).encode()))
        if self.close or waiting.drain.started:  # draining: the next request goes elsewhere
            out.append((b"connection", b"close"))
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": out})
        await self.send({"type": "http.response.body", "body": body})

    async def open_stream(self, headers: list[tuple[str, str]]) -> None:
        """Begin a Server-Sent Events response (agents/a2a.py): 200, no length; ``push`` sends
        each event and ``end_stream`` the end."""
        out = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        out += [
            (b"content-type", b"text/event-stream"),
            (b"cache-control", b"no-store"),
            (b"x-accel-buffering", b"no"),  # nginx: pass each event on as it comes
            *self.security_headers,
        ]
        self.started = True
        await self.send({"type": "http.response.start", "status": 200, "headers": out})

    async def push(self, chunk: bytes) -> None:
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})

    async def end_stream(self) -> None:
        await self.send({"type": "http.response.body", "body": b""})

    async def json(self, data: object, status: int = 200, headers=()) -> None:
        await self.respond(
            status,
            wire.encode(data),
            [("content-type", "application/json"), ("cache-control", "no-store"), *headers],
        )

    async def error(self, error: DomainError, *, status: int | None = None, headers=()) -> None:
        code, body, extra = wire.error_parts(error)
        await self.respond(status or code, body, [*extra, *headers])

    async def django(self, response: HttpResponse) -> None:
        headers = [(name, value) for name, value in response.items()]
        for cookie in response.cookies.values():
            headers.append(("set-cookie", cookie.output(header="").strip()))
        await self.respond(response.status_code, response.content, headers)


class _Peek:
    """Whether the client has already gone, looked at when asked and not watched meanwhile:
    one ``receive()`` stepped without waiting. After the body, a server answers ``receive``
    with the disconnect at once when the connection is closed (uvicorn does) and otherwise
    waits for it; a step that would wait is abandoned (closed), which takes nothing off the
    connection. The look is kept once it saw the client gone."""

    __slots__ = ("_exchange", "_gone")

    def __init__(self, exchange: _Exchange) -> None:
        self._exchange = exchange
        self._gone = False

    def done(self) -> bool:
        watched = self._exchange.gone
        if watched is not None:
            return watched.done()
        if not self._gone:
            step = self._exchange.receive().__await__()
            try:
                step.send(None)
            except StopIteration as said:
                self._gone = said.value.get("type") == "http.disconnect"
            else:
                step.close()
        return self._gone


class _SiteRules:
    """What Django's own rules say of a request, asked of Django: whether its Host is allowed
    (``HttpRequest.get_host``), whether it is secure (``is_secure``, with
    SECURE_PROXY_SSL_HEADER), the redirect of plain http (``SecurityMiddleware``'s
    ``process_request``) and the security headers (its ``process_response``, on an empty
    response). A verdict depends only on a few headers and the settings, so it is remembered
    for each distinct set of them (at most MEMORY, forgotten when a setting changes): the hot
    path pays a dict lookup, not a Django request."""

    MEMORY = 512

    def __init__(self) -> None:
        self._verdicts: dict[tuple, tuple[bool, bool]] = {}
        self._headers: dict[bool, list[tuple[bytes, bytes]]] = {}
        self._middleware: SecurityMiddleware | None = None

    def forget(self, **_) -> None:
        self._verdicts.clear()
        self._headers.clear()
        self._middleware = None

    def middleware(self) -> SecurityMiddleware:
        if self._middleware is None:
            self._middleware = SecurityMiddleware(lambda request: HttpResponse())
        return self._middleware

    def verdict(self, exchange: _Exchange) -> tuple[bool, bool]:
        """(the Host is allowed, the request is secure)."""
        headers = exchange.headers
        key = (
            headers.get("host"),
            headers.get("x-forwarded-host"),
            headers.get("x-forwarded-port"),
            headers.get("x-forwarded-proto"),
            _proxy_ssl_value(headers),
            exchange.scope.get("scheme"),
            tuple(exchange.scope.get("server") or ()),
        )
        found = self._verdicts.get(key)
        if found is None:
            request = _request(exchange, b"")
            try:
                request.get_host()
                allowed = True
            except DisallowedHost:
                allowed = False
            found = (allowed, request.is_secure())
            if len(self._verdicts) >= self.MEMORY:
                self._verdicts.clear()
            self._verdicts[key] = found
        return found

    def redirect(self, exchange: _Exchange) -> HttpResponse | None:
        """SecurityMiddleware's redirect of a plain-http request (SECURE_SSL_REDIRECT), or
        None (exempt, or not asked for)."""
        return self.middleware().process_request(_request(exchange, b""))

    def headers(self, exchange: _Exchange, secure: bool) -> list[tuple[bytes, bytes]]:
        found = self._headers.get(secure)
        if found is None:
            response = self.middleware().process_response(_request(exchange, b""), HttpResponse())
            found = self._headers[secure] = [
                (name.lower().encode("latin-1"), value.encode("latin-1"))
                for name, value in response.items()
                if name.lower() != "content-type"
            ]
        return found


def _proxy_ssl_value(headers: dict[str, str]) -> str | None:
    if not settings.SECURE_PROXY_SSL_HEADER:
        return None
    meta_name = settings.SECURE_PROXY_SSL_HEADER[0]
    return headers.get(meta_name.removeprefix("HTTP_").replace("_", "-").lower())


_rules = _SiteRules()
setting_changed.connect(_rules.forget)


def _request(exchange: _Exchange, body: bytes) -> ASGIRequest:
    return ASGIRequest(exchange.scope, io.BytesIO(body))


async def app(scope: dict, receive, send) -> None:
    """The ASGI application for the agents' paths (switchboard/asgi.py routes them here)."""
    exchange = _Exchange(scope, receive, send)
    try:
        await _dispatch(exchange)
    except waiting.ClientGone:
        return  # nobody to answer
    except _BodyTimeout:
        exchange.close = True
        await exchange.respond(
            HTTPStatus.REQUEST_TIMEOUT,
            b"The request body did not arrive in time.\n",
            [("content-type", "text/plain; charset=utf-8")],
        )
    finally:
        exchange.finish()


async def _dispatch(exchange: _Exchange) -> None:
    allowed, secure = _rules.verdict(exchange)
    exchange.security_headers = _rules.headers(exchange, secure)
    if not allowed:
        exchange.close = True
        await exchange.respond(400, b"Invalid Host header.\n", [("content-type", "text/plain")])
        return
    if settings.SECURE_SSL_REDIRECT and not secure:
        redirect = _rules.redirect(exchange)
        if redirect is not None:
            await exchange.django(redirect)
            return
    path = exchange.path
    if path == API:
        await _get_only(exchange, capabilities)
    elif path == API + "openapi.json":
        await _get_only(exchange, document)
    elif path.startswith(API):
        with tracing.request(f"{exchange.method} {API}{{verb}}", exchange.headers):
            await _verb(exchange, path.removeprefix(API))
    elif path == "/mcp":
        with tracing.request(f"{exchange.method} /mcp", exchange.headers):
            await _mcp(exchange)
    elif path == a2a.CARD_PATH:
        await _get_only(exchange, lambda: a2a_words.public_card(_base(exchange)))
    elif path == a2a.PATH:
        with tracing.request(f"{exchange.method} {a2a.PATH}", exchange.headers):
            await a2a.serve(exchange, _base(exchange))
    elif path == a2a_rest.PATH or path.startswith(a2a_rest.PATH + "/"):
        with tracing.request(f"{exchange.method} {a2a_rest.PATH}/…", exchange.headers):
            await a2a_rest.serve(exchange, _base(exchange), path)
    elif path == "/metrics":
        await exchange.body()
        status, body, headers = await metrics.scrape(
            exchange.method, exchange.headers.get("authorization", "")
        )
        await exchange.respond(status, body, headers)
    else:
        await exchange.error(NotFound("No such path."))


def _base(exchange: _Exchange) -> str:
    """This server's address as the request reached it (its Host judged by the site's rules)."""
    return _request(exchange, b"").build_absolute_uri("/").rstrip("/")


async def _get_only(exchange: _Exchange, make) -> None:
    if exchange.method not in ("GET", "HEAD"):
        await exchange.error(Invalid("Use GET."), status=405, headers=[("allow", "GET, HEAD")])
        return
    await exchange.json(make())


async def _verb(exchange: _Exchange, name: str) -> None:
    if exchange.method != "POST":
        await exchange.error(
            Invalid("Use POST with a JSON body."), status=405, headers=[("allow", "POST")]
        )
        return
    try:
        body = await exchange.body()
        if not await breaker.aadmit():
            raise _unavailable()
        endpoint = await endpoint_for(exchange.headers.get("authorization", ""))
        verb = verbs.named(name)
        verb.check_allowed(endpoint)
        params = wire.decode(verb, body)
        gone = waiting.departure(verb, params, exchange.watch_disconnect)
        result = await waiting.call(endpoint, verb, params, gone=gone)
    except DomainError as error:
        await exchange.error(error)
        return
    except DATABASE_ERRORS as exc:
        await exchange.error(from_database_error(exc, verb=name))
        return
    await exchange.json(result)


async def _mcp(exchange: _Exchange) -> None:
    try:
        body = await exchange.body()
    except Invalid as error:
        await exchange.json(mcp.jsonrpc_error(None, -32700, error.message), status=400)
        return
    screen = mcp.screened(body)
    if screen is not None:
        await exchange.django(screen)
        return
    if not await breaker.aadmit():
        # The database is known to be away: said at once, as the HTTP verbs say it.
        await exchange.django(mcp.refusal(body, _unavailable()))
        return
    if exchange.method == "POST" and b"subscriptions/listen" in body:
        message = mcp_tasks.peek(body)
        if message is not None and mcp_tasks.listens_for_tasks(message):  # an event stream
            refused = await mcp_tasks.listen(
                exchange,
                exchange.scope,
                body,
                message,
                server=mcp.server,
                authenticate=mcp.authenticated,
            )
            if refused is not None:
                await exchange.django(refused)
            return
    await exchange.django(
        await mcp.answer(exchange.scope, body, watch_disconnect=exchange.watch_disconnect)
    )
