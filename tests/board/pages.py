"""Helpers for the Board's page tests (Django's test client, no browser)."""

from __future__ import annotations

from django.contrib.messages import get_messages
from django.test import Client

# A request as htmx sends it for the drawer.
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "drawer-panel"}


def seen(user, todo_id: int) -> str:
    """The stamp the drawer's forms carry: what the person saw of the todo."""
    from switchboard.board.drawer import seen_stamp
    from switchboard.queues.selectors import board_todo

    return seen_stamp(board_todo(user, todo_id).todo)


def messages(response) -> list[str]:
    """The flash messages a response left for the next page."""
    return [str(m) for m in get_messages(response.wsgi_request)]


def signed_in(user) -> Client:
    """A fresh client signed in as ``user``."""
    client = Client()
    client.force_login(user)
    return client


def assert_shown_once(response, client: Client, value: str, copy_id: str) -> None:
    """A credential the page shows once (an endpoint token, a signing secret): on the page with
    a copy button, never cached, and nowhere else the client keeps (its session, a message,
    a cookie)."""
    body = response.content.decode()
    assert value in body and "will not be shown again" in body
    assert f'data-copy="{copy_id}"' in body and f'id="{copy_id}"' in body
    assert "no-store" in response["Cache-Control"]
    assert value not in str(dict(client.session.items()))
    assert all(value not in m for m in messages(response))
    assert all(value not in morsel.value for morsel in response.cookies.values())


def slow_queue_reads(monkeypatch, seconds: float):
    """Make the queue page's read sleep ``seconds`` in PostgreSQL first (a real pg_sleep, so a
    statement timeout cancels it); returns the real read, to put back."""
    from django.db import connection

    from switchboard.board.views import queue as queue_view

    real = queue_view.board_queue

    def slow(*args, **kwargs):
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(%s)", [seconds])
        return real(*args, **kwargs)

    monkeypatch.setattr(queue_view, "board_queue", slow)
    return real
