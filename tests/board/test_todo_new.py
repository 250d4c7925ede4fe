"""The new todo form."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from switchboard.queues import transitions
from switchboard.queues.models import Todo, TodoEvent


def _form(endpoint, **extra) -> dict:
    return {
        "endpoint": endpoint.pk,
        "title": "rebuild docs",
        "body": "make html",
        "priority": 5,
        "max_attempts": 3,
        "not_before": "",
        **extra,
    }


def test_form_offers_active_endpoints_and_preselects_from_the_query(
    logged_in, endpoint, make_endpoint, settings
):
    other = make_endpoint("agent-b")
    gone = make_endpoint("agent-gone")
    transitions.revoke_endpoint(None, gone)
    response = logged_in.get(f"{reverse('todo-new')}?endpoint={other.pk}")
    form = response.context["form"]
    assert set(form.fields["endpoint"].queryset) == {endpoint, other}
    assert form["endpoint"].value() == other.pk
    assert form["max_attempts"].value() == settings.SWITCHBOARD_MAX_ATTEMPTS
    body = response.content.decode()
    assert "Not before (UTC)" in body and 'type="datetime-local"' in body


def test_creates_the_todo_with_its_creator_and_a_create_event(logged_in, endpoint, user):
    response = logged_in.post(reverse("todo-new"), _form(endpoint))
    todo = Todo.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("todo-detail", args=[todo.pk])
    assert (todo.endpoint, todo.title, todo.body, todo.priority, todo.max_attempts) == (
        endpoint,
        "rebuild docs",
        "make html",
        5,
        3,
    )
    assert todo.created_by == user and todo.state == "pending" and todo.not_before is None
    event = TodoEvent.objects.get(kind="create")
    assert event.todo_id == todo.pk and event.actor_user == user
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        f"Todo #{todo.pk} created on agent-a."
    ]


def test_not_before_is_read_as_utc(logged_in, endpoint, settings):
    settings.TIME_ZONE = "America/New_York"  # the server's zone must not matter
    logged_in.post(reverse("todo-new"), _form(endpoint, not_before="2030-01-02T03:04"))
    assert Todo.objects.get().not_before == datetime.datetime(2030, 1, 2, 3, 4, tzinfo=datetime.UTC)


def test_an_endpoint_of_another_team_is_refused(logged_in, make_user, vend):
    bob = make_user("bob")
    foreign, _ = vend("bobs-agent", team=bob.teams.get())
    response = logged_in.post(reverse("todo-new"), _form(foreign))
    assert response.status_code == 400 and "endpoint" in response.context["form"].errors
    assert not Todo.objects.exists() and not TodoEvent.objects.filter(kind="create").exists()


def test_a_revoked_endpoint_is_refused(logged_in, endpoint):
    transitions.revoke_endpoint(None, endpoint)
    response = logged_in.post(reverse("todo-new"), _form(endpoint))
    assert response.status_code == 400 and "endpoint" in response.context["form"].errors
    assert not Todo.objects.exists()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("priority", "101"),
        ("priority", "-101"),
        ("priority", "high"),
        ("max_attempts", "0"),
        ("max_attempts", "1001"),
        ("title", ""),
        ("title", "x" * 501),
        ("not_before", "tomorrow"),
    ],
)
def test_bad_input_is_a_form_error_and_writes_nothing(logged_in, endpoint, field, value):
    response = logged_in.post(reverse("todo-new"), _form(endpoint, **{field: value}))
    assert response.status_code == 400 and field in response.context["form"].errors
    assert not Todo.objects.exists() and not TodoEvent.objects.filter(kind="create").exists()


def test_a_title_of_only_spaces_is_a_form_error(logged_in, endpoint):
    response = logged_in.post(reverse("todo-new"), _form(endpoint, title="   "))
    assert response.status_code == 400 and "title" in response.context["form"].errors
    assert not Todo.objects.exists()


def test_without_an_active_endpoint_the_page_points_to_vending(logged_in, team):
    body = logged_in.get(reverse("todo-new")).content.decode()
    assert "There is no active endpoint" in body and reverse("endpoint-list") in body


def test_a_post_without_a_csrf_token_is_refused(user, endpoint):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(reverse("todo-new"), _form(endpoint)).status_code == 403
    assert not Todo.objects.exists()
