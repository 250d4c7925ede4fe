"""``GET /live/``: the Board's live stream as Server-Sent Events (board/live.py says what it
carries and how a change reaches it): the person signed in and the teams their page shows,
let in under their cap, then the hub's updates for them until the stream ends."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connection
from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from switchboard.board.live import KEEPALIVE_SECONDS, STREAM_SECONDS, WANTS, Hub, Viewer, Who, hub
from switchboard.board.scope import board_scope

log = logging.getLogger("switchboard.board.live")

SIGNED_OUT = "Signed out.\n"


@require_GET
async def live(request):
    if not isinstance(request, ASGIRequest):
        return HttpResponse(status=204)  # no stream under WSGI: the page polls
    wants = frozenset(request.GET.get("want", "").split(",")) & WANTS
    who = await sync_to_async(_who)(request)
    if who is None:
        # Not the sign-in redirect: its HTML is no answer to an EventSource (board.js finds
        # the sign-in page with its own reads). No WWW-Authenticate challenge to offer: the
        # way back in is the sign-in page.
        return HttpResponse(SIGNED_OUT, status=401, content_type="text/plain; charset=utf-8")
    here = hub()
    viewer = Viewer(who.team_ids, wants)
    try:
        let_in = await here.open(viewer, who, cap=settings.SWITCHBOARD_BOARD_STREAMS_PER_USER)
    except Exception as exc:  # the database is away: the browser tries again shortly
        log.warning("board stream: could not start: %s", exc)
        return _headers(StreamingHttpResponse(_retry_later(), content_type="text/event-stream"))
    if not let_in:
        # Many tabs, or a script: this page reads itself on a timer instead.
        return HttpResponse(status=429, headers={"Retry-After": "60"})
    response = _Stream(here, viewer)
    response.streaming_content = _events(here, viewer)
    return _headers(response)


def _who(request) -> Who | None:
    """The signed-in person of this request and the teams its page shows (in the request's
    thread: the session and the user are Django's synchronous reads)."""
    try:
        user = request.user
        if not user.is_authenticated or not request.session.session_key:
            return None
        return Who(
            user_id=user.pk,
            session_key=request.session.session_key,
            password_digest=hashlib.sha256(user.password.encode()).digest(),
            team_ids=board_scope(request).team_ids,
        )
    finally:
        # Nothing more is read for this request on Django's connection: it goes back to the
        # pool now, not when the stream ends minutes later.
        close_old_connections()
        connection.close()


async def _retry_later():
    yield "retry: 5000\n\n"


def _headers(response: StreamingHttpResponse) -> StreamingHttpResponse:
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on as it comes
    return response


class _Stream(StreamingHttpResponse):
    """The stream's response, which releases its stream when Django closes it: after the
    stream ends, and also when the client left before it began (then the events never ran)."""

    def __init__(self, here: Hub, viewer: Viewer) -> None:
        super().__init__((), content_type="text/event-stream")
        self._release = (asyncio.get_running_loop(), here, viewer)

    def close(self) -> None:
        try:
            loop, here, viewer = self._release
            # Django closes a response in a thread of its own; the hub lives on the loop.
            loop.call_soon_threadsafe(here.release, viewer)
        except RuntimeError:  # the loop is closed (the server stopped): the row expires
            pass
        finally:
            super().close()


async def _events(here: Hub, viewer: Viewer):
    try:
        if not here.adopt(viewer):
            yield "retry: 2000\n\n"  # too late: the browser asks again
            return
        try:
            await here.join(viewer)
            ready = await here.counts(viewer.team_ids) if "counts" in viewer.wants else {}
        except Exception as exc:  # the database is away: the browser tries again shortly
            log.warning("board stream: could not start: %s", exc)
            yield "retry: 5000\n\n"
            return
        if viewer.ended is not None:
            yield _ending(viewer.ended)
            return
        ready["teams"] = viewer.team_ids
        yield f"retry: 2000\nevent: ready\ndata: {json.dumps(ready)}\n\n"
        ends = time.monotonic() + STREAM_SECONDS
        stopping = asyncio.ensure_future(here.stopping.wait())
        ending = asyncio.ensure_future(viewer.ending.wait())
        got: asyncio.Future | None = None
        try:
            while (left := ends - time.monotonic()) > 0 and not here.stopping.is_set():
                got = got or asyncio.ensure_future(viewer.outbox.get())
                done, _ = await asyncio.wait(
                    {got, stopping, ending},
                    timeout=min(KEEPALIVE_SECONDS, left),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if viewer.ended is not None:  # before anything it may have been handed
                    yield _ending(viewer.ended)
                    return
                if got in done:
                    event, data = got.result()
                    got = None
                    yield f"event: {event}\ndata: {data}\n\n"
                else:
                    yield ": still here\n\n"
        finally:
            stopping.cancel()
            ending.cancel()
            if got is not None:
                got.cancel()
    finally:
        here.release(viewer)


def _ending(why: str) -> str:
    """A stream's last words when the check ended it: a signed-out page is told so (board.js
    stops asking); any other just ends, and the browser reconnects to what it may see now."""
    return "event: signedout\ndata: {}\n\n" if why == "signedout" else ": ended\n\n"
