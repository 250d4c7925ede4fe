"""Smaller things that read wrong, each fixed: the favicon, an oversized todo body, whose
personal team it is, state names, and one time format on every page including admin."""

from __future__ import annotations

import logging
import re

from django.contrib.staticfiles import finders
from django.test import Client

from switchboard.board.templatetags.board import when
from switchboard.queues import transitions
from switchboard.queues.admin.common import time_html
from switchboard.queues.bounds import BODY_MAX_BYTES
from switchboard.queues.models import Membership, Todo
from switchboard.queues.transitions import Actor


def test_the_favicon_is_linked_and_favicon_ico_answers_without_a_warning(
    signed_in, caplog, endpoint
):
    page = signed_in.get("/").content.decode()
    assert '<link rel="icon" href="/static/board/favicon.svg" type="image/svg+xml">' in page
    assert finders.find("board/favicon.svg")
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = Client().get("/favicon.ico")  # signed out, as a browser asks for it
    assert response.status_code == 301 and response["Location"] == "/static/board/favicon.svg"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    admin = Client()
    admin.force_login(_staff(endpoint))
    assert 'rel="icon"' in admin.get("/admin/").content.decode()


def _staff(endpoint):
    user = endpoint.team.members.get()
    user.is_staff = user.is_superuser = True
    user.save()
    return user


def test_a_body_over_the_cap_is_a_form_error_that_keeps_what_was_typed(signed_in, endpoint):
    form = signed_in.get("/todos/new/").content.decode()
    assert "at most 64 KiB" in form and f'data-max-bytes="{BODY_MAX_BYTES}"' in form
    body = "notes line\n" * (BODY_MAX_BYTES // 11 + 200)  # about 66 KiB
    response = signed_in.post(
        "/todos/new/",
        {"endpoint": endpoint.pk, "title": "big", "body": body, "priority": 0, "max_attempts": 5},
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert "a todo&#x27;s body holds at most 64 KiB" in page
    assert body.strip() in page  # the textarea still holds it
    assert not Todo.objects.exists()


def test_a_request_over_a_mebibyte_gets_the_boards_page_not_a_bare_400(signed_in, endpoint):
    response = signed_in.post(
        "/todos/new/", {"endpoint": endpoint.pk, "title": "huge", "body": "x" * (1024 * 1024 + 10)}
    )
    page = response.content.decode()
    assert response.status_code == 400
    assert "Bad Request (400)" not in page and "Nothing was saved" in page
    assert "64 KiB" in page and 'href="/static/board/board.css"' in page
    assert not Todo.objects.exists()


def test_someone_elses_personal_team_is_not_called_yours(user, make_user):
    alice_team = user.teams.get()
    bob = make_user("bob")
    Membership.objects.create(team=alice_team, user=bob)
    as_bob = Client()
    as_bob.force_login(bob)
    page = as_bob.get(f"/team/?team={alice_team.slug}").content.decode()
    assert "your personal team" not in page and "alice’s personal team" in page
    assert "your personal team" in as_bob.get("/team/?team=bob").content.decode()
    as_alice = Client()
    as_alice.force_login(user)
    assert "your personal team" in as_alice.get("/team/").content.decode()


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_states_read_in_words_on_every_page(signed_in, endpoint, make_todo):
    agent = Actor.agent(endpoint)
    todo = make_todo("fails once")
    transitions.claim(agent, todo.id)
    transitions.fail(agent, todo.id)
    dead = make_todo("fails for good", max_attempts=1)
    transitions.claim(agent, dead.id)
    transitions.fail(agent, dead.id)
    for path in (f"/endpoints/{endpoint.pk}/", "/endpoints/", "/", f"/todos/{todo.id}/"):
        text = _text(signed_in.get(path).content.decode())
        assert "retry_wait" not in text, path
        assert not re.search(r"\bdead [0-9]", text), path  # "dead letter 1", not "dead 1"
    detail = _text(signed_in.get(f"/endpoints/{endpoint.pk}/").content.decode())
    assert "retry wait 1" in detail and "dead letter 1" in detail


def test_one_time_format_on_the_board_and_in_admin(signed_in, endpoint, make_todo):
    todo = make_todo("timed")
    stored = Todo.objects.get(pk=todo.id)
    assert str(when(stored.created_at)) == str(time_html(stored.created_at))
    assert re.fullmatch(
        r'<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z" data-when="full" '
        r'title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>',
        str(when(stored.created_at)),
    )
    admin = Client()
    admin.force_login(_staff(endpoint))
    changelist = admin.get("/admin/queues/todo/").content.decode()
    assert str(time_html(stored.created_at)) in changelist
    assert not re.search(r"[A-Z][a-z]{2}\. \d+, \d{4}, \d+:\d\d [ap]\.m\.", changelist)
    change = admin.get(f"/admin/queues/todo/{todo.id}/change/").content.decode()
    assert str(time_html(stored.created_at)) in change and "board/time.js" in change
    # The endpoints page and Activity: no "0 minutes ago", no "Times in UTC".
    endpoints = signed_in.get("/endpoints/").content.decode()
    assert "minutes ago" not in endpoints and 'data-when="ago"' in endpoints
    assert "Times in UTC" not in signed_in.get("/activity/").content.decode()
