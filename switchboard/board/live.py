"""The Board's live stream: ``GET /live/`` answers Server-Sent Events, and every open Board
page that can hold one hears its teams' changes within a second of their commit.

How a change reaches a page. A trigger on the todos (once per statement), the endpoints and
the audit trail says a ``BoardNotice`` (queues/notify/channels.py: the team, what changed, the
endpoint and the todo) on ``switchboard_board`` when someone watches the team (this module
keeps ``board_watches`` up to date for the teams its streams show). The process's one LISTEN
connection (queues/notify, which the Hub subscribes to) hands each to ``Hub.hear``,
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
and the teams are read again) or when the server drains. Under WSGI there is no stream
(204): the page refreshes itself on a timer, as it does when a proxy buffers. Signed out (or
with a forged or expired session cookie) it is a bare 401 in plain text, never the sign-in
page's redirect and HTML: the browser's EventSource gives up on it, and the page's own reads
find the sign-in page and say "Signed out".

A stream ends with its sign-in. Every open stream is a row of ``board_streams`` (migration
0031): its person, the session key it was opened with, a digest of the person's password hash
as the request saw it, its teams, its holder (this process's Hub) and an expiry renewed while it
is open. Every CHECK_SECONDS each process asks, in one statement for all its streams
(queues/sql/live.py ``BOARD_STREAMS_CHECK``), which may no longer show what they show: the
session signed out (``/logout/`` deletes it), expired or deleted; the password changed (every
session opened before no longer signs in: Django's session auth hash is an HMAC of the
password hash, which SQL cannot compute, so the digest stands for it); the person gone or
made inactive; a team shown no longer the person's. Those streams end at once: nothing more
of their teams is sent (what waited in their queue is dropped), a signed-out one says
``event: signedout`` first (board.js then stops asking and says "Signed out"), the others just
end and the browser reconnects to the narrower set of teams, or to the 401. A team switch that
drops a team deletes its session's rows that show the dropped team (board/views/teams.py), and
a stream whose row is gone ends at the next check the same way. The check is state, not a
message: a sign-out or a removal that happens while a stream is being opened is seen at its
first check, and a lost notification cannot keep a stream open. The bound is CHECK_SECONDS
plus one statement, whatever the number of streams; a notification could make it shorter,
but the periodic check would still be what bounds it.

The same rows make the per-person cap (``SWITCHBOARD_BOARD_STREAMS_PER_USER``) one count
across every web process: a stream is let in by an insert that counts the person's unexpired
rows, under an advisory lock of that person (two openings on two processes cannot both be
the last one let in); past the cap the page is answered 429 and reads itself on a timer. A
row goes when its stream ends, also when its client left while it was let in (at once, or
after START_SECONDS if Django never began the response); a process that dies leaves rows that
expire (STREAM_ROW_SECONDS) and are swept by any process's next check.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import msgspec
from django.db import connection

from switchboard.board import overview
from switchboard.board.views.queue import TICKER_LINES, ticker_html, ticker_lines, todo_rows_html
from switchboard.queues import db, sql
from switchboard.queues.endpoint_health import team_last_hour, team_now
from switchboard.queues.notify import BOARD, BoardNotice, Listener, LoopLocal, listener, listeners
from switchboard.queues.notify.watches import RENEW_SECONDS, TeamWatch, holder_name
from switchboard.queues.selectors import TAB_COUNT_CAP, board_team_now_and_feed

log = logging.getLogger("switchboard.board.live")

FLUSH_GAP = 0.25  # seconds a team's changes are gathered before they are read and sent
CHART_SECONDS = 10.0  # the overview's last hour is read at most this often per team
KEEPALIVE_SECONDS = 15.0
STREAM_SECONDS = 300.0
# How often a process asks which of its streams must end: a signed-out or removed viewer's
# stream ends within this (and one statement) of the sign-out or removal.
CHECK_SECONDS = 2.0
STREAM_ROW_SECONDS = 60  # a stream row's life, renewed by the check when less than...
STREAM_ROW_RENEW_WITHIN = 40  # ...this is left: a row is written every 20 s, not every check
STREAM_LOCK_CLASS = 0x42530000  # advisory lock class of the cap's count (key: the user id)
# A stream let in whose events have not begun this long after is released: its client left
# while it was being let in, and Django dropped the response without closing it.
START_SECONDS = 10.0
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
        self.stream_id: int | None = None  # its board_streams row, once let in
        self.started = False  # its events began: the check watches it from then on
        self.released = False  # its row is gone, or going
        self.ended: str | None = None  # why the check ended it (BOARD_STREAMS_CHECK's words)
        self.ending = asyncio.Event()

    def send(self, event: str, data: str) -> None:
        if self.ended is not None:
            return
        try:
            self.outbox.put_nowait((event, data))
        except asyncio.QueueFull:  # a viewer this far behind reads everything again
            while not self.outbox.empty():
                self.outbox.get_nowait()
            self.outbox.put_nowait(("resync", "{}"))

    def end(self, why: str) -> None:
        """Its sign-in or its teams no longer allow what it shows: nothing more is sent,
        what waited included."""
        self.ended = why
        while not self.outbox.empty():
            self.outbox.get_nowait()
        self.ending.set()


@dataclass(frozen=True, slots=True)
class Who:
    """Whose stream, as the request that opened it was signed in (the check compares)."""

    user_id: int
    session_key: str
    password_digest: bytes  # sha256 of the password hash; never the hash itself
    team_ids: list[int]


@dataclass
class _Opening:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


class Hub:
    """One per event loop (a web process): the viewers of each team, their teams' watches,
    each team's gathered changes, and its open streams (their rows, checked every
    CHECK_SECONDS)."""

    def __init__(self, listener: Listener | None = None) -> None:
        self.viewers: dict[int, set[Viewer]] = defaultdict(set)
        self.pending: dict[int, Change] = {}
        self.flushing: dict[int, asyncio.Task] = {}
        self.last_flush: dict[int, float] = {}
        self.charts: dict[int, tuple[float, dict]] = {}
        self.holder = holder_name()
        self.watch = TeamWatch(self.holder)
        self._renewer: asyncio.Task | None = None
        self.streams: dict[int, Viewer] = {}  # begun and not ended, by board_streams row
        self._checker: asyncio.Task | None = None
        self._closing: set[int] = set()  # rows of ended streams still to delete
        self._closer: asyncio.Task | None = None
        self._opening: dict[int, _Opening] = {}  # by user id, while they open streams
        self.stopping = asyncio.Event()
        self.statements = 0  # statements the updates ran (tests/board/test_live_stream.py)
        if listener is not None:
            listener.subscribe(BOARD, self.hear)
            listener.on_connect(self.listening)

    # -- viewers

    async def open(self, viewer: Viewer, who: Who, *, cap: int) -> bool:
        """Let the stream in under its person's cap, counted across every web process: its
        row in ``board_streams``. False when the person holds ``cap`` streams already."""
        letting_in = asyncio.ensure_future(self._open(viewer, who, cap=cap))
        try:
            return await asyncio.shield(letting_in)
        except asyncio.CancelledError:
            # The client left while its row was being written: once it is, it goes again
            # (else nothing would ever release it, and the check would renew it for good).
            letting_in.add_done_callback(lambda _: self.release(viewer))
            raise

    async def _open(self, viewer: Viewer, who: Who, *, cap: int) -> bool:
        params = {
            "lock_class": STREAM_LOCK_CLASS,
            "holder": self.holder,
            "user_id": who.user_id,
            "session_key": who.session_key,
            "password_digest": who.password_digest,
            "team_ids": who.team_ids,
            "seconds": STREAM_ROW_SECONDS,
            "cap": cap,
        }
        # One opening of a person's at a time in this process, before a pooled connection is
        # taken: a script opening hundreds at once waits here, not on the advisory lock with
        # a connection each (the pool the agents' requests use too).
        opening = self._opening.setdefault(who.user_id, _Opening())
        opening.waiting += 1
        try:
            async with opening.lock:
                stream_id = await db.arun(_let_in(params))
        finally:
            opening.waiting -= 1
            if not opening.waiting:
                del self._opening[who.user_id]
        if stream_id is None:
            return False
        viewer.stream_id = stream_id
        asyncio.get_running_loop().call_later(START_SECONDS, self._unstarted, viewer)
        return True

    def _unstarted(self, viewer: Viewer) -> None:
        if not viewer.started:
            self.release(viewer)

    def adopt(self, viewer: Viewer) -> bool:
        """Its events begin: the check watches it from now on. False if it was released
        already (it began too late)."""
        if viewer.released:
            return False
        viewer.started = True
        if viewer.stream_id is not None:
            self.streams[viewer.stream_id] = viewer
            if self._checker is None or self._checker.done():
                self._checker = asyncio.get_running_loop().create_task(self._check_forever())
        return True

    def release(self, viewer: Viewer) -> None:
        """The stream ended, or its client left before it began: it leaves its teams, and its
        row goes (its place under the cap with it). Idempotent."""
        self.leave(viewer)
        if viewer.stream_id is None or viewer.released:
            return  # never let in, or released already (or ended by the check: row deleted)
        viewer.released = True
        self.streams.pop(viewer.stream_id, None)
        self._closing.add(viewer.stream_id)
        if self._closer is None or self._closer.done():
            self._closer = asyncio.get_running_loop().create_task(self._close_rows())

    async def _close_rows(self) -> None:
        while self._closing:
            ids, self._closing = sorted(self._closing), set()
            try:
                await db.arun(db.one(sql.BOARD_STREAMS_CLOSE, {"stream_ids": ids}))
            except Exception as exc:  # the rows expire by themselves
                log.warning("board stream: could not delete ended streams' rows: %s", exc)

    async def _check_forever(self) -> None:
        while self.streams:
            await asyncio.sleep(CHECK_SECONDS)
            try:
                await self.check()
            except Exception as exc:  # the database is away: so is any sign-out; next time
                log.warning("board stream: could not check the streams: %s", exc)

    async def check(self) -> None:
        """End every stream of this process that may no longer show what it shows (one
        statement for all of them; module docstring)."""
        ids = sorted(self.streams)
        if not ids:
            return
        params = {
            "stream_ids": ids,
            "seconds": STREAM_ROW_SECONDS,
            "renew_within": STREAM_ROW_RENEW_WITHIN,
        }
        why = dict(await db.arun(db.one(sql.BOARD_STREAMS_CHECK, params)))
        for stream_id in ids:
            viewer = self.streams.get(stream_id)
            if viewer is None:
                continue  # it ended while the check ran
            if stream_id not in why:  # its row is gone: a team switch, or it lapsed
                self.end(viewer, "gone")
            elif why[stream_id] is not None:
                self.end(viewer, why[stream_id])

    def end(self, viewer: Viewer, why: str) -> None:
        """End a stream for ``why``: out of its teams at once, so no later update reaches it.
        Its row is gone already (the check deleted it, or it was missing)."""
        if viewer.stream_id is not None:
            self.streams.pop(viewer.stream_id, None)
        viewer.released = True
        self.leave(viewer)
        viewer.end(why)

    async def join(self, viewer: Viewer) -> None:
        if viewer.ended is not None:
            return  # ended before its stream began: it watches nothing
        for team_id in viewer.team_ids:
            self.viewers[team_id].add(viewer)
        new = [t for t in viewer.team_ids if t not in self.watch.watched]
        if new:
            await self.watch.watch(self.viewers)
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
            await self.watch.watch(self.viewers)
        except Exception as exc:  # the next renewal tries again
            log.warning("board stream: could not drop a watch: %s", exc)

    async def _renew_forever(self) -> None:
        while self.viewers or self.watch.watched:
            try:
                await self.watch.watch(self.viewers)
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

    def hear(self, notice: BoardNotice) -> None:
        """A change of a watched team, as the LISTEN connection heard it."""
        if notice.team not in self.viewers:
            return  # watched by another process
        change = Change(feed=notice.moves_the_feed)
        if notice.todo is not None:
            change.todos.add(notice.todo)
        if notice.endpoint is not None:
            change.endpoints.add(notice.endpoint)
        self._gather(notice.team, change)

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
            data = _ENCODER.encode(update).decode()
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


class TeamUpdate(msgspec.Struct, omit_defaults=True):
    """One ``event: team`` update, as the pages read it (static/board/board.js,
    ``Live.prototype.onUpdate`` and ``queueUpdate``; tests/board/test_live_stream.py holds
    the two to the same names). What a page did not ask for (``?want=``) is left out."""

    team: int
    todos: list[int]  # the changed todos (at most ROWS_MAX)
    endpoints: list[int]  # the changed endpoints
    many: bool  # more todos changed than ROWS_MAX: pages read themselves
    feed: bool  # a try ended or someone acted: the feed has a new line
    rows: dict[str, dict] | None = None  # todo id -> its queue row, state and endpoint
    counts: dict[str, dict] | None = None  # endpoint id -> its counts by state
    cap: int | None = None  # where the counts stop being exact
    ticker: list[dict] | None = None  # the feed's newest lines
    overview: dict[str, str] | None = None  # DOM id -> the overview's row


def _str_of_html(value: object) -> str:
    """The drawn HTML (Django's SafeString, a str msgspec does not take as one) as text."""
    if isinstance(value, str):
        return str.__str__(value)
    raise NotImplementedError(type(value).__name__)


_ENCODER = msgspec.json.Encoder(enc_hook=_str_of_html)


def read_update(team_id: int, change: Change, wants: frozenset[str], chart) -> tuple:
    """What the team's viewers are sent (in a thread): (the update, statements run, the
    last hour when it was read again, else None)."""
    try:
        statements = 0
        many = len(change.todos) > ROWS_MAX
        update = TeamUpdate(
            team=team_id,
            todos=sorted(change.todos)[:ROWS_MAX],
            endpoints=sorted(change.endpoints),
            many=many,
            feed=change.feed,
        )
        if "rows" in wants and change.todos and not many:
            update.rows = todo_rows_html([team_id], sorted(change.todos))
            statements += 1
        feed = "ticker" in wants and change.feed
        hour = None
        if wants & {"counts", "overview"}:
            if feed:  # the counts and the feed's lines in one statement
                now, lines = board_team_now_and_feed(team_id, cap=TAB_COUNT_CAP, limit=TICKER_LINES)
                update.ticker, feed = ticker_html(lines), False
            else:
                now = team_now(team_id, cap=TAB_COUNT_CAP)
            statements += 1
            update.counts = {str(e.pk): _counts(e) for e in now}
            update.cap = TAB_COUNT_CAP
            if "overview" in wants:
                if chart is True:
                    hour = team_last_hour(team_id)
                    statements += 1
                update.overview = overview.rows_html(now, hour if hour is not None else chart)
        if feed:
            update.ticker = ticker_lines([team_id])
            statements += 1
        return update, statements, hour
    finally:
        connection.close()  # back to the pool: this thread may not read again for a while


def read_counts(team_ids: list[int]) -> dict:
    try:
        return {
            "counts": {
                team_id: {str(e.pk): _counts(e) for e in team_now(team_id, cap=TAB_COUNT_CAP)}
                for team_id in team_ids
            },
            "cap": TAB_COUNT_CAP,
        }
    finally:
        connection.close()


hubs: LoopLocal[Hub] = LoopLocal(lambda loop: Hub(listeners.of(loop)))


def hub() -> Hub:
    """The running event loop's hub, hearing the loop's listener (queues/notify)."""
    found = hubs.get()
    listener()  # started
    return found


def narrow(session_key: str | None, team_ids: list[int]) -> None:
    """A team switch to ``team_ids``: this session's streams that show any other team end at
    their process's next check (their rows go now; board/views/teams.py)."""
    if session_key:
        params = {"session_key": session_key, "team_ids": team_ids}
        db.run(db.one(sql.BOARD_STREAMS_NARROW, params))


def _let_in(params: dict) -> db.Plan[int | None]:
    """The stream's row, if its person holds fewer than ``cap`` (one transaction: the
    person's lock, then the counting insert)."""

    def counted() -> db.Plan[int | None]:
        yield from db.one(sql.BOARD_STREAM_LOCK, params)
        rows = yield from db.one(sql.BOARD_STREAM_OPEN, params)
        return rows[0][0] if rows else None

    return (yield db.Atomic(counted()))


def _counts(endpoint) -> dict[str, int]:
    """An endpoint's counts as the stream sends them: by state, and ``people`` (of its
    waiting todos, those that wait on a person: the nav's count; board.js sums it apart)."""
    return {**endpoint.by_state, "people": endpoint.people}
