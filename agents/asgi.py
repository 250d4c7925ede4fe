"""The agents' surface under ASGI: ``/api/v1/…``, ``/mcp`` and ``/metrics``, served by the
event loop without Django's request handler.

Why not Django's ASGI handler: every sync middleware and view hop of Django's handler crosses
``sync_to_async`` (a thread and back), which measured 0.5-0.6× the throughput of the threaded
server for the agents' hot path. Here a verb is decoded, authenticated and answered on the
event loop, its plan run on the async pool (queues/db/executor.py), and a long-poll waits on the
asyncio doorbell holding no thread. What the site's middleware did for these paths is done
here: the Host header is checked against ALLOWED_HOSTS, plain http is redirected to https when
SECURE_SSL_REDIRECT is on, and the security headers are sent (nosniff, Referrer-Policy,
COOP, HSTS on https). A plain MCP tools/call runs here too (agents/mcp.py, ``arun_tool``);
the rest of MCP and /metrics are Django views (django-mcpz is synchronous): they run in a
thread pool of their own, except the waiting of a legacy client's claim_next, which happens
here.

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
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from django.http import HttpResponse
from django.http.request import split_domain_port, validate_host

from agents import http, mcp, metrics, verbs, waiting
from agents.auth import token_from_header
from agents.openapi import capabilities, document
from queues import db, endpoints
from queues.db.availability import breaker
from queues.errors import (
    DATABASE_ERRORS,
    DomainError,
    Invalid,
    NotFound,
    Unauthorized,
    Unavailable,
    from_database_error,
)

log = logging.getLogger("switchboard.agents")

PREFIXES = ("/api/", "/mcp", "/metrics")


def _unavailable() -> Unavailable:
    """What every agents' path answers while the breaker says the database is away."""
    return Unavailable("The database is unavailable; retry shortly.")


API = "/api/v1/"


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

    # -- the request

    async def body(self) -> bytes:
        declared = self.headers.get("content-length", "0").strip() or "0"
        if not declared.isascii() or not declared.isdigit():
            self.close = True
            await self._drop_rest()
            raise Invalid("Content-Length is not a number.")
        if int(declared) > http.MAX_BODY_BYTES:
            self.close = True  # an unread body cannot be skipped on a kept connection
            await self._drop_rest()
            raise Invalid(f"The body is over {http.MAX_BODY_BYTES} bytes.")
        chunks, size = [], 0
        try:
            async with asyncio.timeout(settings.SWITCHBOARD_BODY_TIMEOUT_SECONDS):
                while True:
                    message = await self.receive()
                    if message["type"] == "http.disconnect":
                        raise waiting.ClientGone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > http.MAX_BODY_BYTES:
                        self.close = True
                        if message.get("more_body", False):
                            await self._drop_rest()
                        raise Invalid(f"The body is over {http.MAX_BODY_BYTES} bytes.")
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

    def watch_disconnect(self) -> asyncio.Future:
        """A future done once the client goes away (the body must have been read)."""
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
        out += [(name, value) for name, value in _security_headers(self) if name not in names]
        out.append((b"content-length", str(len(body)).encode()))
        if self.close:
            out.append((b"connection", b"close"))
        self.started = True
        await self.send({"type": "http.response.start", "status": status, "headers": out})
        await self.send({"type": "http.response.body", "body": body})

    async def json(self, data: object, status: int = 200, headers=()) -> None:
        await self.respond(
            status,
            http.encode(data),
            [("content-type", "application/json"), ("cache-control", "no-store"), *headers],
        )

    async def error(self, error: DomainError, *, status: int | None = None, headers=()) -> None:
        code, body, extra = http.error_parts(error)
        await self.respond(status or code, body, [*extra, *headers])

    async def django(self, response: HttpResponse) -> None:
        headers = [(name, value) for name, value in response.items()]
        for cookie in response.cookies.values():
            headers.append(("set-cookie", cookie.output(header="").strip()))
        await self.respond(response.status_code, response.content, headers)


def _security_headers(exchange: _Exchange) -> list[tuple[bytes, bytes]]:
    """What Django's SecurityMiddleware sends, for the same settings."""
    headers = []
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append((b"x-content-type-options", b"nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        headers.append((b"referrer-policy", settings.SECURE_REFERRER_POLICY.encode()))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        policy = settings.SECURE_CROSS_ORIGIN_OPENER_POLICY.encode()
        headers.append((b"cross-origin-opener-policy", policy))
    if settings.SECURE_HSTS_SECONDS and _is_secure(exchange):
        value = f"max-age={settings.SECURE_HSTS_SECONDS}"
        if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
            value += "; includeSubDomains"
        if settings.SECURE_HSTS_PRELOAD:
            value += "; preload"
        headers.append((b"strict-transport-security", value.encode()))
    return headers


def _is_secure(exchange: _Exchange) -> bool:
    if exchange.scope.get("scheme") == "https":
        return True
    if settings.SECURE_PROXY_SSL_HEADER:
        meta_name, value = settings.SECURE_PROXY_SSL_HEADER
        header = meta_name.removeprefix("HTTP_").replace("_", "-").lower()
        sent = exchange.headers.get(header)
        return sent is not None and sent.split(",")[0].strip() == value
    return False


def _host(exchange: _Exchange) -> str | None:
    """The request's Host, if ALLOWED_HOSTS allows it (as Django's get_host decides)."""
    host = exchange.headers.get("host", "")
    domain, _port = split_domain_port(host)
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return host if domain and validate_host(domain, allowed) else None


_threads: ThreadPoolExecutor | None = None


def _thread_pool() -> ThreadPoolExecutor:
    global _threads
    if _threads is None:
        _threads = ThreadPoolExecutor(
            max_workers=settings.SWITCHBOARD_WEB_THREADS, thread_name_prefix="sync-view"
        )
    return _threads


async def _in_thread(view, request) -> HttpResponse:
    """A Django view in this app's thread pool; its database connection goes back (to the
    pool, or closed) when it returns, as at the end of any request."""

    def run() -> HttpResponse:
        try:
            return view(request)
        finally:
            connections.close_all()

    return await asyncio.get_running_loop().run_in_executor(_thread_pool(), run)


def _django_request(exchange: _Exchange, body: bytes) -> ASGIRequest:
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
    if _host(exchange) is None:
        exchange.close = True
        await exchange.respond(400, b"Invalid Host header.\n", [("content-type", "text/plain")])
        return
    if settings.SECURE_SSL_REDIRECT and not _is_secure(exchange):
        raw = exchange.scope.get("raw_path") or exchange.path.encode()
        query = exchange.scope.get("query_string", b"")
        target = f"https://{exchange.headers['host']}{raw.decode('latin-1')}"
        target += f"?{query.decode('latin-1')}" if query else ""
        await exchange.respond(301, b"", [("location", target)])
        return
    path = exchange.path
    if path == API:
        await _get_only(exchange, capabilities)
    elif path == API + "openapi.json":
        await _get_only(exchange, document)
    elif path.startswith(API):
        await _verb(exchange, path.removeprefix(API))
    elif path == "/mcp":
        await _mcp(exchange)
    elif path == "/metrics":
        body = await exchange.body()
        request = _django_request(exchange, body)
        await exchange.django(await _in_thread(metrics.metrics_view, request))
    else:
        await exchange.error(NotFound("No such path."))


async def _get_only(exchange: _Exchange, make) -> None:
    if exchange.method not in ("GET", "HEAD"):
        await exchange.error(Invalid("Use GET."), status=405, headers=[("allow", "GET, HEAD")])
        return
    await exchange.json(make())


async def _verb(exchange: _Exchange, verb: str) -> None:
    if exchange.method != "POST":
        await exchange.error(
            Invalid("Use POST with a JSON body."), status=405, headers=[("allow", "POST")]
        )
        return
    try:
        body = await exchange.body()
        if not await breaker.aadmit():
            raise _unavailable()
        endpoint = await _endpoint(exchange)
        if verb not in verbs.HANDLERS:
            raise NotFound(f"No such verb. Verbs: {', '.join(verbs.HANDLERS)}.")
        verbs.check_allowed(endpoint, verb)
        params = http.decode(verb, body)
        waits = verb == "claim_next" and params.wait_seconds
        gone = exchange.watch_disconnect() if waits else None
        result = await waiting.acall(endpoint, verb, params, gone=gone)
    except DomainError as error:
        await exchange.error(error)
        return
    except DATABASE_ERRORS as exc:
        await exchange.error(from_database_error(exc, verb=verb))
        return
    await exchange.json(result)


async def _endpoint(exchange: _Exchange):
    endpoint = await db.arun(
        endpoints.authenticate_plan(token_from_header(exchange.headers.get("authorization", "")))
    )
    if endpoint is None:
        raise Unauthorized("A valid endpoint token is required (Authorization: Bearer …).")
    if endpoint.revoked_at is not None:
        raise Unauthorized("This endpoint has been revoked.")
    return endpoint


# ---------------------------------------------------------------------------------------
# MCP: django-mcpz's view in a thread; a claim_next that waits does its waiting here.


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
    if exchange.method == "POST" and await _mcp_on_loop(exchange, body):
        return
    call = _waiting_claim(body)
    if call is None or exchange.method != "POST":
        await exchange.django(await _in_thread(mcp.view, _django_request(exchange, body)))
        return
    try:
        endpoint = await _endpoint(exchange)
    except DomainError:
        # django-mcpz answers (its auth runs the same lookup): the 401.
        await exchange.django(await _in_thread(mcp.view, _django_request(exchange, body)))
        return
    except DATABASE_ERRORS as exc:
        await exchange.django(mcp.refusal(body, from_database_error(exc, verb="claim_next")))
        return
    wait_seconds, at_once = call
    gone = exchange.watch_disconnect()

    async def attempt() -> HttpResponse:
        return await _in_thread(mcp.view, _django_request(exchange, at_once))

    try:
        response = await waiting.awaiting(
            endpoint, attempt, wait_seconds=wait_seconds, found=_mcp_claimed, gone=gone
        )
    except DomainError as error:
        # A cap (or the credential gone while waiting): the tool's error, as the HTTP API's
        # body, in django-mcpz's own answer.
        request = _django_request(exchange, body)
        request.switchboard_refusal = error  # type: ignore[attr-defined]  # agents/mcp.py
        await exchange.django(await _in_thread(mcp.view, request))
        return
    if gone.done() and (claim := _mcp_claim(response)) is not None:
        await waiting.release_unheard(endpoint, claim)
        raise waiting.ClientGone
    await exchange.django(response)


async def _mcp_on_loop(exchange: _Exchange, body: bytes) -> bool:
    """Answer a tools/call here, on the event loop, when django-mcpz's view would pass it to
    the tool as it stands and the endpoint may use the tool (agents/mcp.py). False: the view
    answers it (a refusal in its own words, a legacy client, anything but a plain call)."""
    call = mcp.plain_tool_call(exchange.scope["headers"], body)
    if call is None or not await breaker.aadmit():
        return False
    try:
        endpoint = await _endpoint(exchange)
    except DomainError:
        return False  # the view's auth says it, in JSON-RPC
    except DATABASE_ERRORS as exc:
        await exchange.django(mcp.refusal(body, from_database_error(exc, verb=call.verb)))
        return True
    if not verbs.allowed(endpoint, call.verb):
        return False  # "Unknown tool", in django-mcpz's words
    wait = call.arguments.get("wait_seconds") if call.verb == "claim_next" else None
    gone = exchange.watch_disconnect() if wait else None
    response = await mcp.arun_tool(
        endpoint,
        call,
        mcp_session_id=exchange.headers.get("mcp-session-id") or None,
        gone=gone,
    )
    await exchange.django(response)
    return True


def _waiting_claim(body: bytes) -> tuple[float, bytes] | None:
    """For a tools/call of claim_next with wait_seconds > 0: the wait, and the same request
    asking to claim at once (the waiting is done here, between tries)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    params = message.get("params")
    if not isinstance(params, dict) or params.get("name") != "claim_next":
        return None
    arguments = params.get("arguments")
    if not isinstance(arguments, dict):
        return None
    wait = arguments.get("wait_seconds")
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 < wait <= 30:
        return None  # absent, invalid (django-mcpz says why) or nothing to wait for
    at_once = {**message, "params": {**params, "arguments": {**arguments, "wait_seconds": 0}}}
    return float(wait), json.dumps(at_once).encode()


def _structured(response: HttpResponse) -> dict | None:
    if response.status_code != 200:
        return None
    try:
        result = json.loads(response.content).get("result", {})
    except (ValueError, AttributeError):
        return None
    if not isinstance(result, dict) or result.get("isError"):
        return None
    content = result.get("structuredContent")
    return content if isinstance(content, dict) else None


def _mcp_claim(response: HttpResponse) -> dict | None:
    content = _structured(response)
    return content if content is not None and content.get("todo") is not None else None


def _mcp_claimed(response: HttpResponse) -> bool:
    """Stop waiting unless the answer is a plain 'nothing to claim'."""
    content = _structured(response)
    return content is None or content.get("todo") is not None
