"""The Board's live stream: ``GET /live/`` answers Server-Sent Events, and every open Board
page that can hold one hears its teams' changes within a second of their commit.

How a change reaches a page. A transition's row trigger says ``team:endpoint:todo:flag`` on
``switchboard_board`` when someone watches the team (migration 0027: this module keeps
``board_watches`` up to date for the teams its streams show). The process's one LISTEN
connection (agents/doorbell.py, wired in switchboard/asgi.py) hands each to ``Hub.hear``,
which gathers a team's changes for FLUSH_GAP seconds and then reads what the team's viewers
need once, in a thread: the changed rows (one query, each drawn with the queue's own row
template), every endpoint's counts and live numbers (one statement: the tab counts and the
overview's rows), the feed (one statement, only after a try ended or a person acted), the
overview's last hour (one statement, at most every CHART_SECONDS). The same update goes to
every viewer of the team: the work per change is per watched team, never per open page.

Pages say what they show (``?want=rows,counts,ticker,overview``); the rest (the drawer, the
endpoint page, the endpoints list, Activity) is told which todos and endpoints changed and
reads itself again when the change is one of its own (static/board/board.js).

An update is one ``data:`` line of JSON (``event: team``). A stream starts with
``event: ready`` once its teams are watched (the page reads itself once then: what changed
between its drawing and the watch is not lost), says ``event: resync`` when the LISTEN
connection was lost (anything may have been missed), sends a comment every KEEPALIVE_SECONDS
(proxies close idle connections), and ends after STREAM_SECONDS (the browser reconnects,
and the sign-in and teams are checked again) or when the server drains. Under WSGI there is
no stream (204): the page refreshes itself on a timer, as it does when a proxy buffers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.handlers.asgi import ASGIRequest
from django.db import close_old_connections, connection
from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from board import overview
from board.scope import board_scope
from board.views.queue import TICKER_LINES, ticker_html, ticker_lines, todo_rows_html
from queues import db, sql
from queues.endpoint_health import team_last_hour, team_now
from queues.selectors import TAB_COUNT_CAP, board_team_now_and_feed

log = logging.getLogger("switchboard.board.live")

FLUSH_GAP = 0.25  # seconds a team's changes are gathered before they are read and sent
CHART_SECONDS = 10.0  # the overview's last hour is read at most this often per team
KEEPALIVE_SECONDS = 15.0
STREAM_SECONDS = 300.0
WATCH_SECONDS = 60  # a watch row's life; renewed every RENEW_SECONDS
RENEW_SECONDS = 20.0
ROWS_MAX = 50  # more changed todos than this in one update: pages read themselves instead
WANTS = frozenset({"rows", "counts", "ticker", "overview"})

# Reads and drawing run here, never on the event loop; two at a time whatever the teams.
_READER = ThreadPoolExecutor(max_workers=2, thread_name_prefix="board-live")


@dataclass
class Change:
    """A team's changes gathered since its last update."""

    todos: set[int] = field(default_factory=set)
    endpoints: set[int] = field(default_factory=set)
    feed: bool = False  # a try ended or a person acted: the ticker moved


class Viewer:
    """One open stream: its teams, what its page shows, and what waits to be sent."""

    def __init__(self, team_ids: list[int], wants: frozenset[str]) -> None:
        self.team_ids = team_ids
        self.wants = wants
        self.outbox: asyncio.Queue[tuple[str, str]] = asyncio.Queue(maxsize=64)

    def send(self, event: str, data: str) -> None:
        try:
            self.outbox.put_nowait((event, data))
        except asyncio.QueueFull:  # a viewer this far behind reads everything again
            while not self.outbox.empty():
                self.outbox.get_nowait()
            self.outbox.put_nowait(("resync", "{}"))


class Hub:
    """One per event loop (a web process): the viewers of each team, their teams' watches,
    and each team's gathered changes."""

    def __init__(self) -> None:
        self.viewers: dict[int, set[Viewer]] = defaultdict(set)
        self.pending: dict[int, Change] = {}
        self.flushing: dict[int, asyncio.Task] = {}
        self.last_flush: dict[int, float] = {}
        self.charts: dict[int, tuple[float, dict]] = {}
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.watched: set[int] = set()
        self._renewer: asyncio.Task | None = None
        self.stopping = asyncio.Event()
        self.statements = 0  # statements the updates ran (the bench reads it)

    # -- viewers

    async def join(self, viewer: Viewer) -> None:
        for team_id in viewer.team_ids:
            self.viewers[team_id].add(viewer)
        new = [t for t in viewer.team_ids if t not in self.watched]
        if new:
            await self._watch()
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew_forever())

    def leave(self, viewer: Viewer) -> None:
        unwatched = False
        for team_id in viewer.team_ids:
            viewers = self.viewers.get(team_id)
            if viewers is not None:
                viewers.discard(viewer)
                if not viewers:
                    del self.viewers[team_id]
                    unwatched = True
        if unwatched:  # its commits need say nothing more
            asyncio.get_running_loop().create_task(self._unwatch())

    async def _unwatch(self) -> None:
        try:
            await self._watch()
        except Exception as exc:  # the next renewal tries again
            log.warning("board stream: could not drop a watch: %s", exc)

    async def _watch(self) -> None:
        teams = sorted(self.viewers)
        params = {"team_ids": teams, "holder": self.holder, "seconds": WATCH_SECONDS}
        await db.arun(db.one(sql.BOARD_WATCH, params))
        await db.arun(db.one(sql.BOARD_UNWATCH, params))
        self.watched = set(teams)

    async def _renew_forever(self) -> None:
        while self.viewers or self.watched:
            try:
                await self._watch()
            except Exception as exc:  # the database is away: the next renewal tries again
                log.warning("board stream: could not renew the watches: %s", exc)
            # An overview's last hour moves on with the clock alone: its teams are read
            # again now and then, changed or not (once per team, whatever its viewers).
            for team_id, viewers in list(self.viewers.items()):
                if any("overview" in viewer.wants for viewer in viewers):
                    self._gather(team_id, Change())
            await asyncio.sleep(RENEW_SECONDS)

    async def counts(self, team_ids: list[int]) -> dict:
        """Every endpoint's counts by state of these teams now (a stream's first event: the
        page sums its teams' counts as their updates come)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_READER, read_counts, team_ids)

    # -- changes

    def hear(self, payload: str) -> None:
        """A notification from the LISTEN connection: ``team:endpoint:todo:flag``."""
        try:
            team, endpoint, todo, flag = payload.split(":")
            team_id = int(team)
        except ValueError:
            return
        if team_id not in self.viewers:
            return  # watched by another process
        change = Change(feed=flag in ("e", "n"))
        if todo:
            change.todos.add(int(todo))
        if endpoint != "0":
            change.endpoints.add(int(endpoint))
        self._gather(team_id, change)

    def _gather(self, team_id: int, change: Change) -> None:
        gathered = self.pending.setdefault(team_id, Change())
        gathered.todos |= change.todos
        gathered.endpoints |= change.endpoints
        gathered.feed |= change.feed
        if team_id not in self.flushing:
            self.flushing[team_id] = asyncio.get_running_loop().create_task(self._flush(team_id))

    def listening(self) -> None:
        """A new LISTEN connection: what was said while there was none is lost."""
        for viewer in {v for viewers in self.viewers.values() for v in viewers}:
            viewer.send("resync", "{}")

    async def _flush(self, team_id: int) -> None:
        try:
            wait = self.last_flush.get(team_id, 0.0) + FLUSH_GAP - time.monotonic()
            await asyncio.sleep(max(wait, 0.05))  # a burst's later rows join its first
            change = self.pending.pop(team_id, None)
            viewers = self.viewers.get(team_id)
            if change is None or not viewers:
                return
            wants = frozenset().union(*(viewer.wants for viewer in viewers))
            self.last_flush[team_id] = time.monotonic()
            chart = self._chart_due(team_id, wants)
            loop = asyncio.get_running_loop()
            update, statements, hour = await loop.run_in_executor(
                _READER, read_update, team_id, change, wants, chart
            )
            self.statements += statements
            if hour is not None:
                self.charts[team_id] = (time.monotonic(), hour)
            data = json.dumps(update, separators=(",", ":"))
            for viewer in self.viewers.get(team_id, ()):
                viewer.send("team", data)
        except Exception as exc:  # the database is away: the pages read themselves again
            log.warning("board stream: could not read team %s's change: %s", team_id, exc)
            for viewer in self.viewers.get(team_id, ()):
                viewer.send("resync", "{}")
        finally:
            self.flushing.pop(team_id, None)
            if team_id in self.pending:  # more came while this one was read
                self.flushing[team_id] = asyncio.get_running_loop().create_task(
                    self._flush(team_id)
                )

    def _chart_due(self, team_id: int, wants: frozenset[str]) -> dict | bool:
        """The team's last hour as last read, or True when it is due to be read again."""
        if "overview" not in wants:
            return False
        at, hour = self.charts.get(team_id, (0.0, {}))
        return True if time.monotonic() - at >= CHART_SECONDS else hour

    def stop(self) -> None:
        """The server drains: every stream ends (the browsers reconnect elsewhere)."""
        self.stopping.set()


def read_update(team_id: int, change: Change, wants: frozenset[str], chart) -> tuple:
    """What the team's viewers are sent (in a thread): (update, statements run, the last
    hour when it was read again, else None)."""
    try:
        statements = 0
        many = len(change.todos) > ROWS_MAX
        update: dict = {
            "team": team_id,
            "todos": sorted(change.todos)[:ROWS_MAX],
            "endpoints": sorted(change.endpoints),
            "many": many,
            "feed": change.feed,
        }
        if "rows" in wants and change.todos and not many:
            update["rows"] = todo_rows_html([team_id], sorted(change.todos))
            statements += 1
        feed = "ticker" in wants and change.feed
        if wants & {"counts", "overview"}:
            if feed:  # the counts and the feed's lines in one statement
                now, lines = board_team_now_and_feed(team_id, cap=TAB_COUNT_CAP, limit=TICKER_LINES)
                update["ticker"], feed = ticker_html(lines), False
            else:
                now = team_now(team_id, cap=TAB_COUNT_CAP)
            statements += 1
            update["counts"] = {str(e.pk): e.by_state for e in now}
            update["cap"] = TAB_COUNT_CAP
            hour = None
            if "overview" in wants:
                if chart is True:
                    hour = team_last_hour(team_id)
                    statements += 1
                update["overview"] = overview.rows_html(now, hour if hour is not None else chart)
        else:
            hour = None
        if feed:
            update["ticker"] = ticker_lines([team_id])
            statements += 1
        return update, statements, hour
    finally:
        connection.close()  # back to the pool: this thread may not read again for a while


def read_counts(team_ids: list[int]) -> dict:
    try:
        return {
            "counts": {
                team_id: {str(e.pk): e.by_state for e in team_now(team_id, cap=TAB_COUNT_CAP)}
                for team_id in team_ids
            },
            "cap": TAB_COUNT_CAP,
        }
    finally:
        connection.close()


_hubs: dict[int, Hub] = {}


def hub() -> Hub:
    """The running event loop's hub."""
    return hub_of(asyncio.get_running_loop())


def hub_of(loop: asyncio.AbstractEventLoop) -> Hub:
    found = _hubs.get(id(loop))
    if found is None:
        found = _hubs[id(loop)] = Hub()
    return found


def attach(bell) -> None:
    """Hear the Board's channel on this process's LISTEN connection (agents/doorbell.py;
    wired by switchboard/asgi.py, since the board does not import the agents' room)."""
    here = hub()
    bell.board_hearer = here.hear
    bell.board_listening = here.listening


# ---------------------------------------------------------------------------------------
# The stream


_open: Counter[int] = Counter()  # streams open per user, in this process
_open_lock = threading.Lock()  # counted on the loop, read by the view's thread


@require_GET
@login_required
def live(request):
    if not isinstance(request, ASGIRequest):
        return HttpResponse(status=204)  # no stream under WSGI: the page polls
    user_id = request.user.pk
    with _open_lock:  # taken here, not when the stream starts: many at once are all counted
        if _open[user_id] >= settings.SWITCHBOARD_BOARD_STREAMS_PER_USER:
            # Many tabs, or a script: this page reads itself on a timer instead.
            return HttpResponse(status=429, headers={"Retry-After": "60"})
        _open[user_id] += 1
    response = _Stream(user_id)
    try:
        wants = frozenset(request.GET.get("want", "").split(",")) & WANTS
        team_ids = board_scope(request).team_ids
        # Nothing more is read for this request: its pooled connection goes back now, not
        # when the stream ends minutes later.
        close_old_connections()
        connection.close()
    except BaseException:
        response.close()
        raise
    response.streaming_content = _events(team_ids, wants)
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on as it comes
    return response


class _Stream(StreamingHttpResponse):
    """The stream's response, which gives its person's count back when Django closes it:
    after the stream ends, and also when the client left before it began."""

    def __init__(self, user_id: int) -> None:
        super().__init__((), content_type="text/event-stream")
        self._user_id: int | None = user_id

    def close(self) -> None:
        try:
            user_id, self._user_id = self._user_id, None
            if user_id is not None:
                with _open_lock:
                    _open[user_id] -= 1
                    if not _open[user_id]:
                        del _open[user_id]
        finally:
            super().close()


async def _events(team_ids: list[int], wants: frozenset[str]):
    here = hub()
    viewer = Viewer(team_ids, wants)
    try:
        try:
            await here.join(viewer)
            ready = await here.counts(team_ids) if "counts" in wants else {}
        except Exception as exc:  # the database is away: the browser tries again shortly
            log.warning("board stream: could not start: %s", exc)
            yield "retry: 5000\n\n"
            return
        ready["teams"] = team_ids
        yield f"retry: 2000\nevent: ready\ndata: {json.dumps(ready)}\n\n"
        ends = time.monotonic() + STREAM_SECONDS
        stopping = asyncio.ensure_future(here.stopping.wait())
        got: asyncio.Future | None = None
        try:
            while (left := ends - time.monotonic()) > 0 and not here.stopping.is_set():
                got = got or asyncio.ensure_future(viewer.outbox.get())
                done, _ = await asyncio.wait(
                    {got, stopping},
                    timeout=min(KEEPALIVE_SECONDS, left),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                if got in done:
                    event, data = got.result()
                    got = None
                    yield f"event: {event}\ndata: {data}\n\n"
                else:
                    yield ": still here\n\n"
        finally:
            stopping.cancel()
            if got is not None:
                got.cancel()
    finally:
        here.leave(viewer)
