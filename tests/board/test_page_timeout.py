"""Every Board and admin page's statements are bounded (SWITCHBOARD_PAGE_TIMEOUT_SECONDS):
a page whose statement runs past it is a 503 page that says so, never a 500 or a connection
held for minutes, and the connection goes back to the pool without the bound. The second hardening round: no page may hold
a connection and a core for longer than its bound whatever its filters."""

from __future__ import annotations

import pytest
from django.db import connection

from switchboard.board.views import queue as queue_view
from tests.board.pages import slow_queue_reads

pytestmark = pytest.mark.django_db(transaction=True)  # autocommit, as served


def _timeout_now() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        return cursor.fetchone()[0]


def test_a_page_past_its_bound_is_stopped_and_says_so(signed_in, settings, monkeypatch):
    settings.SWITCHBOARD_PAGE_TIMEOUT_SECONDS = 1
    real = slow_queue_reads(monkeypatch, 10)
    page = signed_in.get("/queue/")
    assert page.status_code == 503
    text = page.content.decode()
    assert "This page took too long" in text and "longer than 1 s" in text
    assert page["Cache-Control"] == "no-store"
    assert _timeout_now() == "0"  # the connection goes back as it came
    monkeypatch.setattr(queue_view, "board_queue", real)
    assert signed_in.get("/queue/").status_code == 200  # and serves the next page


def test_a_pages_statements_run_under_the_bound(signed_in, settings, monkeypatch):
    settings.SWITCHBOARD_PAGE_TIMEOUT_SECONDS = 7
    seen = []
    real = queue_view.board_queue

    def watched(*args, **kwargs):
        seen.append(_timeout_now())
        return real(*args, **kwargs)

    monkeypatch.setattr(queue_view, "board_queue", watched)
    assert signed_in.get("/queue/").status_code == 200
    assert seen == ["7s"]
    assert _timeout_now() == "0"
    connection.close()  # a page that opens its connection itself gets the bound as it opens
    assert signed_in.get("/queue/").status_code == 200
    assert seen[-1] == "7s"
    assert _timeout_now() == "0"
    settings.SWITCHBOARD_PAGE_TIMEOUT_SECONDS = 0  # off: nothing set
    assert signed_in.get("/queue/").status_code == 200
    assert seen[-1] == "0"
