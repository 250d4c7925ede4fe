"""A Board stream ends with its sign-in (board/live.py; issue 41, item 2): signing out,
removal from a team, a password change and a team switch that drops a team each end an open
``/live/`` stream within a few seconds, and nothing of the team reaches it after; a signed-out
or forged cookie gets a bare 401; the per-person cap is one count across server processes; the
rows behind it all go when their streams or their processes do.

Before: a stream read its teams once, when it began, and checked again only after 300 s; the
cap was counted in each process (48 streams on two workers for a cap of 24)."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test import Client

from switchboard import dburl
from switchboard.board import live
from switchboard.queues import teams, transitions
from switchboard.queues.models import Team
from switchboard.queues.transitions import Actor
from tests.board.test_live_stream import Stream, _cookie, _let_in, _until
from tests.crash.conftest import base_env
from tests.crash.harness import Procs

pytestmark = pytest.mark.django_db(transaction=True)

# A stream ends within one check's period and the statement, with room for two busy cores.
ENDS_WITHIN = live.CHECK_SECONDS + 3.0


def _events_until_it_ends(stream: Stream, *, within: float, during=None) -> tuple[list, float]:
    """Every event the stream sends until the server ends it (and how long that took), while
    ``during()`` is called now and then (a todo made each time: would its row arrive?)."""
    started, seen, next_call = time.monotonic(), [], 0.0
    while not stream.ended and time.monotonic() - started < within:
        if during is not None and time.monotonic() >= next_call:
            during()
            next_call = time.monotonic() + 0.3
        got = stream.event(0.1)
        if got is not None:
            seen.append(got)
    assert stream.ended, f"still open after {within} s; it sent {[e for e, _ in seen]}"
    return seen, time.monotonic() - started


def _rows_of_streams(user) -> list[tuple]:
    """The user's rows in board_streams (ids are never reused between tests, and the table
    is not emptied between them: a killed server's rows wait for their expiry)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, holder, user_id, team_ids FROM board_streams WHERE user_id = %s"
            " ORDER BY id",
            [user.pk],
        )
        return cursor.fetchall()


def test_signing_out_ends_the_stream_and_nothing_of_the_team_reaches_it_after(
    live_server, client, user, endpoint, make_todo
):
    cookie = _cookie(client, user)
    stream = Stream(live_server, cookie)
    try:
        assert _until("ready", stream)["teams"] == [endpoint.team_id]
        make_todo("seen while signed in")
        assert "seen while signed in" in repr(_until("team", stream))
        client.post("/logout/")
        made = []

        def create():
            made.append(f"made after sign-out {len(made)}")
            make_todo(made[-1])

        events, took = _events_until_it_ends(stream, within=ENDS_WITHIN, during=create)
        # The page is told, and its last word is that: no update of the team after it.
        names = [name for name, _ in events]
        assert names[-1] == "signedout", names
        assert took < ENDS_WITHIN
    finally:
        stream.close()
    make_todo("made once the stream ended")
    again = Stream(live_server, cookie)
    try:
        assert again.status == 401 and _until("team", again, within=1.0) is None
    finally:
        again.close()


def test_removal_from_a_team_ends_the_stream_and_the_next_one_shows_only_the_rest(
    live_server, client, make_user, user, endpoint, make_todo
):
    bob = make_user("bob")
    teams.add_member(endpoint.team, bob)
    cookie = _cookie(client, bob)
    stream = Stream(live_server, cookie)
    try:
        assert endpoint.team_id in _until("ready", stream)["teams"]
        teams.remove_member(endpoint.team, bob, by=user)
        events, _ = _events_until_it_ends(
            stream, within=ENDS_WITHIN, during=lambda: make_todo("after bob left")
        )
        assert "signedout" not in [name for name, _ in events]  # still signed in
    finally:
        stream.close()
    # The browser's reconnect: his own team only, and nothing of alice's.
    again = Stream(live_server, cookie)
    try:
        ready = _until("ready", again)
        assert ready["teams"] == [bob.teams.get().pk]
        make_todo("after bob reconnected")
        assert _until("team", again, within=1.5) is None
    finally:
        again.close()


def test_a_password_change_ends_the_stream_and_its_session_no_longer_signs_in(
    live_server, client, user, endpoint, make_todo
):
    cookie = _cookie(client, user)
    stream = Stream(live_server, cookie)
    try:
        assert _until("ready", stream)
        user.set_password("a new password for alice")
        user.save()
        _events_until_it_ends(stream, within=ENDS_WITHIN, during=lambda: make_todo("after"))
    finally:
        stream.close()
    again = Stream(live_server, cookie)  # Django's session auth hash no longer matches
    try:
        assert again.status == 401
    finally:
        again.close()


def test_a_team_switch_that_drops_a_team_ends_the_streams_that_show_it(
    live_server, client, user, endpoint, make_todo
):
    ops = Team.objects.create(slug="ops", name="Ops")
    teams.add_member(ops, user)
    personal = endpoint.team
    cookie = _cookie(client, user)
    every_team = Stream(live_server, cookie)
    try:
        assert sorted(_until("ready", every_team)["teams"]) == sorted([personal.pk, ops.pk])
        client.post("/team/switch/", {"team": ops.slug})
        events, _ = _events_until_it_ends(
            every_team, within=ENDS_WITHIN, during=lambda: make_todo("of the dropped team")
        )
        assert "signedout" not in [name for name, _ in events]
    finally:
        every_team.close()
    just_ops = Stream(live_server, cookie)
    try:
        assert _until("ready", just_ops)["teams"] == [ops.pk]
        make_todo("not shown to the ops view")
        assert _until("team", just_ops, within=1.0) is None
        # Switching back to all teams drops none: the open stream stays.
        client.post("/team/switch/", {"team": ""})
        assert _until("ready", just_ops, within=live.CHECK_SECONDS + 1.5) is None
        assert not just_ops.ended
    finally:
        just_ops.close()


def test_a_forged_or_expired_session_cookie_gets_a_bare_401(live_server, client, user):
    cookie = _cookie(client, user)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE django_session SET expire_date = now() - interval '1 second'"
            " WHERE session_key = %s",
            [cookie],
        )
    for forged in [cookie, cookie[:-1] + ("a" if cookie[-1] != "a" else "b"), "x" * 4000]:
        stream = Stream(live_server, forged)
        try:
            assert stream.status == 401, forged[:40]
            assert b"text/plain" in stream.head and b"location:" not in stream.head.lower()
        finally:
            stream.close()
    assert _rows_of_streams(user) == []


def test_a_session_that_expires_while_its_stream_is_open_ends_it(
    live_server, client, user, endpoint
):
    cookie = _cookie(client, user)
    stream = Stream(live_server, cookie)
    try:
        assert _until("ready", stream)
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE django_session SET expire_date = now() WHERE session_key = %s", [cookie]
            )
        events, _ = _events_until_it_ends(stream, within=ENDS_WITHIN)
        assert [name for name, _ in events] == ["signedout"]
    finally:
        stream.close()


def test_the_cap_is_one_count_across_two_server_processes(
    live_server, client, user, settings, tmp_path
):
    """Two streams on this process and a third on a served one, for a cap of two: the
    third is refused, and let in once one of the first two has closed."""
    settings.SWITCHBOARD_BOARD_STREAMS_PER_USER = 2
    procs = Procs(tmp_path)
    env = {
        **base_env(),
        "DATABASE_URL": dburl.build(connection.settings_dict),
        "SECRET_KEY": settings.SECRET_KEY,  # the same session auth hash
        "SWITCHBOARD_BOARD_STREAMS_PER_USER": "2",
    }
    cookie = _cookie(client, user)
    held: list[Stream] = []
    try:
        _server, base = procs.serve(env, workers=1)
        other = SimpleNamespace(port=int(base.rsplit(":", 1)[1]))
        held += [Stream(live_server, cookie) for _ in range(2)]
        assert [s.status for s in held] == [200, 200]
        refused = Stream(other, cookie)
        assert refused.status == 429 and b"retry-after: 60" in refused.head.lower()
        refused.close()
        held.pop().close()
        elsewhere = _let_in(other, cookie)
        held.append(elsewhere)
        assert elsewhere.status == 200 and _until("ready", elsewhere)
        holders = {holder for _, holder, _, _ in _rows_of_streams(user)}
        assert len(holders) == 2  # one row held by each process
        # Full again, counted with the served process's row.
        here = Stream(live_server, cookie)
        here.close()
        assert here.status == 429
    finally:
        for stream in held:
            stream.close()
        procs.close()


def test_rows_go_when_their_streams_end_and_when_their_process_is_gone(
    live_server, client, user, endpoint
):
    with connection.cursor() as cursor:  # a process that died holding a stream of alice's
        cursor.execute(
            "INSERT INTO board_streams (holder, user_id, session_key, password_digest,"
            " team_ids, expires_at) VALUES ('gone:1', %s, 'x', '', '{}', now() - interval '1s')",
            [user.pk],
        )
    stream = Stream(live_server, _cookie(client, user))
    try:
        assert _until("ready", stream)
        deadline = time.monotonic() + ENDS_WITHIN
        while len(_rows_of_streams(user)) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        [(_id, holder, user_id, team_ids)] = _rows_of_streams(user)  # the lapsed row swept
        assert holder != "gone:1" and user_id == user.pk and team_ids == [endpoint.team_id]
    finally:
        stream.close()
    deadline = time.monotonic() + 3
    while _rows_of_streams(user) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _rows_of_streams(user) == []


def test_the_check_ends_only_the_streams_that_lost_their_sign_in(
    live_server, client, make_user, user, endpoint, make_todo
):
    """One check for all of a process's streams: bob's ends with his sign-out while alice's,
    on the same process and team, goes on hearing the team."""
    bob = make_user("bob")
    teams.add_member(endpoint.team, bob)
    alices = Stream(live_server, _cookie(client, user))
    bobs_client = Client()
    bobs = Stream(live_server, _cookie(bobs_client, bob))
    try:
        assert _until("ready", alices) and _until("ready", bobs)
        bobs_client.post("/logout/")
        _events_until_it_ends(bobs, within=ENDS_WITHIN)
        transitions.create_todo(Actor.agent(endpoint), title="alice still sees this")
        assert "alice still sees this" in repr(_until("team", alices, within=2.0))
        assert not alices.ended
    finally:
        alices.close()
        bobs.close()


def test_a_page_whose_sign_in_ended_says_so_and_shows_nothing_more(page, user, make_todo):
    """In a browser (static/board/board.js): the session ended elsewhere (another tab's
    sign-out deletes it, as here), and the open queue page says "Signed out" within a few
    seconds, shows no todo made after, and does not hammer the stream with reconnects."""
    from playwright.sync_api import expect

    from tests.board.conftest import sign_in

    sign_in(page, "alice")
    status = page.locator("#queue [data-live-status]")
    expect(status).to_contain_text("Live")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/live/" in r.url else None)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_session")
    expect(status).to_have_text("Signed out: reload to sign in", timeout=ENDS_WITHIN * 1000)
    make_todo("made after the sign-out")
    page.wait_for_timeout(1500)
    expect(page.locator("#queue [data-live-show]")).to_be_hidden()  # no "1 new"
    assert asked == []  # told, not reconnecting into the 401


def test_streams_whose_clients_left_while_they_were_let_in_hold_no_place(
    live_server, client, user, settings, monkeypatch
):
    """Tabs closed while their streams were being let in (held here on the person's lock):
    the row written after its client left goes again, and so does one whose response Django
    never began (after START_SECONDS). Else no one would ever release it, every check would
    renew it, and its place under the cap would be lost for good."""
    monkeypatch.setattr(live, "START_SECONDS", 1.0)
    settings.SWITCHBOARD_BOARD_STREAMS_PER_USER = 2
    cookie = _cookie(client, user)
    held = Stream(live_server, cookie)  # one place taken, and the check running
    request = (
        f"GET /live/?want=rows HTTP/1.1\r\nHost: localhost\r\nCookie: sessionid={cookie}\r\n\r\n"
    ).encode()
    try:
        assert _until("ready", held)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s, %s)", [live.STREAM_LOCK_CLASS, user.pk])
            try:
                leaving = [socket.create_connection(("127.0.0.1", live_server.port))]
                leaving += [socket.create_connection(("127.0.0.1", live_server.port))]
                leaving += [socket.create_connection(("127.0.0.1", live_server.port))]
                for sock in leaving:
                    sock.sendall(request)
                time.sleep(0.5)  # each waits on the lock to be let in
                for sock in leaving:
                    sock.close()  # and its client leaves
                time.sleep(0.5)
            finally:
                cursor.execute(
                    "SELECT pg_advisory_unlock(%s, %s)", [live.STREAM_LOCK_CLASS, user.pk]
                )
        time.sleep(0.5)  # let in now, one of them (the cap is two)
        deadline = time.monotonic() + live.START_SECONDS + 3
        while len(_rows_of_streams(user)) > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_rows_of_streams(user)) == 1
        second = Stream(live_server, cookie)  # the cap's second place is free
        second.close()
        assert second.status == 200
    finally:
        held.close()
