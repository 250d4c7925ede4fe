"""The Board's live stream (board/live.py) over real HTTP from the ASGI server: a change is
pushed to the team's viewers within a second, drawn once per team (not per viewer), only to
those who may see it; the watch list follows the open streams; a stranger gets no stream.
(A stream ending with its sign-in or its teams: test_live_signout.py.)"""

from __future__ import annotations

import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from switchboard.queues import transitions
from switchboard.queues.models import TodoState
from switchboard.queues.transitions import Actor

pytestmark = pytest.mark.django_db(transaction=True)


class Stream:
    """A raw SSE client: the events of one ``GET /live/``, read with deadlines."""

    def __init__(self, server, cookie: str | None, want: str = "rows,counts,ticker") -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        # Connection: close, so that the end of the answer is the end of the connection.
        head = (
            f"GET /live/?want={want} HTTP/1.1\r\nHost: localhost\r\n"
            "Accept: text/event-stream\r\nConnection: close\r\n"
        )
        if cookie:
            head += f"Cookie: sessionid={cookie}\r\n"
        self.sock.sendall((head + "\r\n").encode())
        self.buffer = b""
        self.ended = False  # the server ended the stream (closed the connection)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        self.head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        self.status = int(self.head.split()[1])

    def event(self, within: float) -> tuple[str, dict] | None:
        """The next event (not a comment), or None if none came within ``within`` seconds."""
        deadline = time.monotonic() + within
        while True:
            for block in self._blocks():
                fields = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
                if "event" in fields:
                    return fields["event"], json.loads(fields.get("data", "{}"))
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return None
            if not chunk:
                self.ended = True
                return None
            self.buffer += chunk

    def _blocks(self):
        # Chunked transfer: the chunk sizes are lines of hex between the events; drop them.
        text = self.buffer.decode()
        while "\n\n" in text:
            block, text = text.split("\n\n", 1)
            self.buffer = text.encode()
            lines = [line for line in block.split("\r\n") if line]
            yield "\n".join(line.strip() for line in lines if not _hex(line))

    def close(self) -> None:
        self.sock.close()


def _hex(line: str) -> bool:
    return bool(line) and all(c in "0123456789abcdefABCDEF" for c in line.strip())


def _cookie(client, user) -> str:
    client.force_login(user)
    return client.cookies["sessionid"].value


def _until(event_name: str, stream: Stream, within: float = 3.0):
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        got = stream.event(left)
        if got is None:
            return None
        if got[0] == event_name:
            return got[1]
    return None


def _let_in(server, cookie: str, *, within: float = 5.0) -> Stream:
    """A stream opened again until one is let in (a closed stream's place is free once its row
    is gone), or the last one refused when ``within`` seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        stream = Stream(server, cookie)
        if stream.status == 200 or time.monotonic() >= deadline:
            return stream
        stream.close()
        time.sleep(0.1)


def _watches() -> set[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT team_id FROM board_watches WHERE expires_at > now()")  # noqa: S608
        return {row[0] for row in cursor.fetchall()}


def test_a_change_reaches_every_viewer_of_its_team_within_a_second(
    live_server, client, user, endpoint, make_todo
):
    cookie = _cookie(client, user)
    viewers = [Stream(live_server, cookie) for _ in range(3)]
    try:
        for viewer in viewers:
            assert viewer.status == 200
            ready = _until("ready", viewer)
            assert ready["teams"] == [endpoint.team_id]
            assert str(endpoint.pk) in ready["counts"][str(endpoint.team_id)]
        assert endpoint.team_id in _watches()
        from switchboard.board import live

        [hub] = [h for h in live.hubs.all() if h.viewers]
        before = hub.statements
        started = time.monotonic()
        todo = make_todo("pushed to everyone")
        for viewer in viewers:
            update = _until("team", viewer, within=2.0)
            assert update is not None, "no update within 2 s"
            assert update["todos"] == [todo.id]
            assert "pushed to everyone" in update["rows"][str(todo.id)]["html"]
            assert update["rows"][str(todo.id)]["state"] == TodoState.PENDING
            assert update["counts"][str(endpoint.pk)]["pending"] == 1
        assert time.monotonic() - started < 1.0
        # Read once for the three viewers: the rows, then the counts with the feed's lines (a
        # new todo is a feed line), in one statement.
        assert hub.statements - before == 2

        # A claim: the row and the counts, the feed untouched (nothing ended).
        before = hub.statements
        transitions.claim(Actor.agent(endpoint), todo.id, claimant="run-7")
        update = _until("team", viewers[0], within=2.0)
        assert update["rows"][str(todo.id)]["state"] == TodoState.CLAIMED
        assert "ticker" not in update and not update["feed"]
        _until("team", viewers[1]), _until("team", viewers[2])
        assert hub.statements - before == 2
        # A completion ends a try: the feed is read again, with the counts, and says so.
        before = hub.statements
        transitions.complete(Actor.agent(endpoint), todo.id)
        update = _until("team", viewers[0], within=2.0)
        assert update["feed"] and "completed" in update["ticker"][0]["html"]
        assert update["counts"][str(endpoint.pk)]["done"] == 1
        _until("team", viewers[1]), _until("team", viewers[2])
        assert hub.statements - before == 2
    finally:
        for viewer in viewers:
            viewer.close()


def test_a_team_sees_only_its_own_changes(live_server, client, user, endpoint, make_user, vend):
    other_team = make_user("mallory").teams.get()  # her personal team
    foreign, _ = vend("foreign-agent", team=other_team)
    stream = Stream(live_server, _cookie(client, user))
    try:
        ready = _until("ready", stream)
        assert list(ready["counts"]) == [str(user.teams.get().pk)]
        assert str(foreign.pk) not in ready["counts"][str(user.teams.get().pk)]
        transitions.create_todo(Actor.agent(foreign), title="not for alice")
        assert _until("team", stream, within=1.5) is None
    finally:
        stream.close()


def test_no_stream_for_a_stranger_and_none_under_wsgi(live_server, client, user):
    """A stranger's stream is a bare 401 in plain text: not the sign-in page's redirect,
    whose HTML an EventSource cannot read (board.js finds the sign-in page itself)."""
    stranger = Stream(live_server, cookie=None)
    try:
        assert stranger.status == 401
        assert b"content-type: text/plain" in stranger.head.lower()
        assert b"location:" not in stranger.head.lower()
        assert _until("ready", stranger, within=0.5) is None and stranger.ended
        assert b"<" not in stranger.buffer
    finally:
        stranger.close()
    client.force_login(user)
    assert client.get("/live/").status_code == 204  # Django's test client: not ASGI


def test_the_watch_goes_when_its_last_stream_does(live_server, client, user, endpoint):
    stream = Stream(live_server, _cookie(client, user))
    assert _until("ready", stream)
    assert endpoint.team_id in _watches()
    stream.close()
    deadline = time.monotonic() + 5
    while endpoint.team_id in _watches() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert endpoint.team_id not in _watches()


def test_one_person_holds_a_bounded_number_of_streams(live_server, client, user, settings):
    settings.SWITCHBOARD_BOARD_STREAMS_PER_USER = 2
    cookie = _cookie(client, user)
    held = [Stream(live_server, cookie) for _ in range(2)]
    try:
        for stream in held:
            assert _until("ready", stream)
        refused = Stream(live_server, cookie)
        assert refused.status == 429 and b"retry-after: 60" in refused.head.lower()
        refused.close()
        held.pop().close()  # a tab closed: its place is free again
        again = _let_in(live_server, cookie)
        held.append(again)
        assert again.status == 200 and _until("ready", again)
    finally:
        for stream in held:
            stream.close()


def test_streams_asked_for_all_at_once_are_all_counted(live_server, client, user, settings):
    """The bound held against 12 tabs opened together, not only one after another: the
    count is taken as the request is let in (it once was as the stream began, and 50 at
    once got 46 streams past a bound of 24)."""
    settings.SWITCHBOARD_BOARD_STREAMS_PER_USER = 3
    cookie = _cookie(client, user)
    with ThreadPoolExecutor(12) as pool:
        streams = list(pool.map(lambda _: Stream(live_server, cookie), range(12)))
    try:
        assert sorted(s.status for s in streams) == [200] * 3 + [429] * 9
    finally:
        for stream in streams:
            stream.close()
    deadline = time.monotonic() + 5  # every place given back once they closed
    while time.monotonic() < deadline:
        again = Stream(live_server, cookie)
        again.close()
        if again.status == 200:
            break
        time.sleep(0.1)
    assert again.status == 200


def test_what_a_page_wants_is_read_as_a_list_of_known_words(live_server, client, user, endpoint):
    hostile = "want=" + "%00,rows,<script>," + "x" * 4000
    stream = Stream(live_server, _cookie(client, user), want=hostile.removeprefix("want="))
    try:
        assert stream.status == 200
        ready = _until("ready", stream)
        assert "counts" not in ready  # "rows" alone: no counts asked for
    finally:
        stream.close()


@pytest.mark.django_db
def test_the_counts_with_the_feed_read_as_the_two_reads_do(endpoint, make_endpoint, make_todo):
    """The stream's one statement for a change that ended a try says what team_now and the
    feed's own read say, with no line and no endpoint of another team."""
    from switchboard.queues.endpoint_health import team_now
    from switchboard.queues.selectors import TAB_COUNT_CAP, board_activity, board_team_now_and_feed

    other = make_endpoint("agent-b")
    for n in range(5):
        todo = make_todo(f"todo {n}", on=other if n % 2 else None)
        if n < 3:
            queue = other if n % 2 else endpoint
            transitions.claim(Actor.agent(queue), todo.id)
            transitions.complete(Actor.agent(queue), todo.id)
    now, lines = board_team_now_and_feed(endpoint.team_id, cap=TAB_COUNT_CAP, limit=4)

    def timeless(rows):  # an age is the database clock's now: one statement's, then another's
        return [replace(e, oldest_claimable_age=bool(e.oldest_claimable_age)) for e in rows]

    assert timeless(now) == timeless(team_now(endpoint.team_id, cap=TAB_COUNT_CAP))
    assert [(x.at, x.todo_id, x.attempt, x.event) for x in lines] == [
        (x.at, x.todo_id, x.attempt, x.event) for x in board_activity([endpoint.team_id], limit=4)
    ]
    assert len(lines) == 4 and len(now) == 2


def test_the_pages_read_exactly_what_a_team_update_says():
    """The update's shape is declared once (board/live.py ``TeamUpdate``); board.js reads
    each update as ``u`` and nothing else: every field it reads is declared, and every field
    declared is read."""
    import re
    from pathlib import Path

    from switchboard.board.live import TeamUpdate

    js = (
        Path(__file__).resolve().parents[2] / "switchboard" / "static" / "board" / "board.js"
    ).read_text()
    read = set(re.findall(r"\bu\.([A-Za-z_]+)", js))
    assert read == set(TeamUpdate.__struct_fields__)
