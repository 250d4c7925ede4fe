"""The ASGI application ``switchboard serve`` runs (gunicorn with uvicorn workers).

Two parts: the agents' paths (``/api/``, ``/mcp``, ``/metrics`` while a metrics token is set)
go to their front door, ``agents.front.app``, which answers on the event loop (a long-poll
holds no thread); everything else (the Board, admin, sign-in, static files, /healthz) goes to
Django's own ASGI handler, whose sync views and middleware run in threads (docs/deploy.md).
The lifespan starts this process's LISTEN connection (queues/notify: the agents' doorbell and
token cache and the Board's live stream hear it) and the event loop's watchdog
(switchboard/watchdog.py), and closes the async pool on shutdown.

A request body for the site must also arrive within SWITCHBOARD_BODY_TIMEOUT_SECONDS: a slow
or silent client is dropped (408), never left holding anything but its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import warnings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

from switchboard.queues import tracing  # noqa: E402  (nothing of Django: SWITCHBOARD_OTEL)

tracing.setup()  # before Django loads its middleware, which its instrumentation extends
django_app = get_asgi_application()  # runs django.setup()

from django.conf import settings  # noqa: E402

from switchboard import watchdog  # noqa: E402
from switchboard.agents import front  # noqa: E402
from switchboard.agents.doorbell import async_doorbell  # noqa: E402
from switchboard.queues import db, notify  # noqa: E402

log = logging.getLogger("switchboard.asgi")

# WhiteNoise answers static files with a file iterator Django reads in a thread under ASGI;
# that works and is cheap for the Board's few files, and Django warns about it on every one.
warnings.filterwarnings(
    "ignore", message="StreamingHttpResponse must consume synchronous iterators"
)


async def application(scope, receive, send) -> None:
    kind = scope["type"]
    if kind == "http":
        if front.handles(scope):
            await front.app(scope, receive, send)
        else:
            await _site(scope, receive, send)
    elif kind == "lifespan":
        await _lifespan(receive, send)
    else:  # websocket: nothing here speaks it
        raise ValueError(f"unsupported ASGI scope {kind!r}")


async def _site(scope, receive, send) -> None:
    """Django's handler, its body read under a deadline."""
    deadline = asyncio.get_running_loop().time() + settings.SWITCHBOARD_BODY_TIMEOUT_SECONDS
    body_done = False

    async def receive_in_time():
        nonlocal body_done
        if body_done:
            return await receive()  # after the body: only the disconnect, whenever it comes
        try:
            async with asyncio.timeout_at(deadline):
                message = await receive()
        except TimeoutError:
            raise _SlowBody from None
        if message["type"] != "http.request" or not message.get("more_body", False):
            body_done = True
        return message

    try:
        await django_app(scope, receive_in_time, send)
    except _SlowBody:
        await send(
            {
                "type": "http.response.start",
                "status": 408,
                "headers": [(b"content-type", b"text/plain"), (b"connection", b"close")],
            }
        )
        await send({"type": "http.response.body", "body": b"The request body was too slow.\n"})


class _SlowBody(Exception):
    pass


async def _lifespan(receive, send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            watchdog.watch(settings.SWITCHBOARD_LOOP_WATCHDOG_SECONDS)
            try:
                notify.listener()  # the process's LISTEN connection, which the rooms hear
                await db.async_pool()
            except Exception as exc:  # the database may be away; the first request retries
                log.warning("start-up without the database: %s", exc)
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            with contextlib.suppress(Exception):
                await async_doorbell().stop()
                await notify.listeners.get().stop()
                await db.close_async_pool()
            await send({"type": "lifespan.shutdown.complete"})
            return
