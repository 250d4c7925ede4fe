"""An endpoint's schedules on its Board page (issue 44): a person of its team adds one (the
next runs shown), edits it, pauses, resumes and removes it, each audited; a bad field is a
400 with the form as typed and the reason; another team's schedule answers like an unknown
one; CSRF; hostile names and templates are inert; the sweeper's todo is linked as the last
run. And in a browser: added from the form, the next runs read in the viewer's zone."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect

from switchboard.queues import schedules
from switchboard.queues.models import Schedule, TodoEvent
from tests.board.conftest import sign_in
from tests.board.test_endpoint_page import _messages
from tests.queues.helpers import schedule_audit

HOSTILE = '<img src=x onerror="alert(1)">'
NIGHTLY = {
    "op": "add",
    "name": "nightly triage",
    "cron": "0 9 * * 1-5",
    "timezone": "Europe/Berlin",
    "title_template": "Triage the issues of {date}",
    "body_template": "",
    "priority": "0",
    "catch_up": "none",
}


def _post(client, endpoint, **fields):
    return client.post(reverse("endpoint-schedules", args=[endpoint.pk]), fields)


def test_a_person_adds_edits_pauses_resumes_and_removes_a_schedule(logged_in, user, endpoint):
    detail = reverse("endpoint-detail", args=[endpoint.pk])
    assert "Add a schedule" in logged_in.get(detail).content.decode()

    response = _post(logged_in, endpoint, **NIGHTLY)
    assert response.status_code == 302 and _messages(response) == ["Schedule added."]
    schedule = Schedule.objects.get(endpoint=endpoint)
    page = logged_in.get(detail).content.decode()
    assert "nightly triage" in page and "0 9 * * 1-5" in page and "Next:" in page
    assert page.count("<time") >= 3  # the next three runs, each in the reader's time

    edit_form = logged_in.get(f"{detail}?edit={schedule.pk}").content.decode()
    assert 'value="0 9 * * 1-5"' in edit_form and 'name="schedule"' in edit_form
    edited = {**NIGHTLY, "op": "edit", "schedule": schedule.pk, "cron": "", "every_minutes": "90"}
    assert _messages(_post(logged_in, endpoint, **edited)) == ["Schedule saved."]
    schedule.refresh_from_db()
    assert (schedule.cron, schedule.interval_seconds) == ("", 5400)

    assert _messages(_post(logged_in, endpoint, op="pause", schedule=schedule.pk))[0].startswith(
        "Schedule paused"
    )
    assert "Makes nothing while paused." in logged_in.get(detail).content.decode()
    again = _post(logged_in, endpoint, op="pause", schedule=schedule.pk)
    assert _messages(again) == ["It was already paused; nothing changed."]
    _post(logged_in, endpoint, op="resume", schedule=schedule.pk)
    assert not Schedule.objects.get(pk=schedule.pk).paused
    _post(logged_in, endpoint, op="remove", schedule=schedule.pk)
    assert not Schedule.objects.filter(pk=schedule.pk).exists()
    # Oldest first (schedule_audit orders by id): unordered, the rows came back in the heap's
    # order, once with the remove first (a newcomer's clean clone).
    assert schedule_audit() == [
        "schedule_add",
        "schedule_edit",
        "schedule_pause",
        "schedule_resume",
        "schedule_remove",
    ]


@pytest.mark.parametrize(
    "bad, said",
    [
        ({"cron": "61 * * * *"}, "minute"),
        ({"cron": "", "every_minutes": ""}, ""),
        ({"timezone": "Mars/Olympus"}, "zone"),
        ({"title_template": "Triage {secret}"}, "{secret}"),
        ({"name": ""}, ""),
        ({"priority": "1000"}, ""),
    ],
)
def test_a_bad_schedule_is_a_400_that_keeps_what_was_typed(logged_in, endpoint, bad, said):
    response = _post(logged_in, endpoint, **{**NIGHTLY, **bad})
    body = response.content.decode()
    assert response.status_code == 400
    assert said.lower() in body.lower()
    assert 'value="nightly triage"' in body or bad.get("name") == ""
    assert not Schedule.objects.exists()
    assert not TodoEvent.objects.filter(kind="schedule_add").exists()


def test_a_second_schedule_of_one_name_is_refused(logged_in, endpoint):
    _post(logged_in, endpoint, **NIGHTLY)
    response = _post(logged_in, endpoint, **NIGHTLY)
    assert (
        response.status_code == 400 and "already has a schedule named" in response.content.decode()
    )
    assert Schedule.objects.count() == 1


def test_another_teams_schedule_answers_like_an_unknown_one(logged_in, endpoint, make_user, vend):
    bob = make_user("bob")
    theirs, _ = vend("bobs-agent", team=bob.teams.get())
    foreign = schedules.add(
        theirs, by=bob, **{k: v for k, v in NIGHTLY.items() if k != "op" and k != "priority"}
    )
    answers = []
    for schedule_id in (foreign.pk, foreign.pk + 1000, "x"):
        for op in ("pause", "remove", "resume"):
            response = _post(logged_in, endpoint, op=op, schedule=schedule_id)
            answers.append((response.status_code, response.content))
    assert {status for status, _ in answers} == {404} and len({body for _, body in answers}) == 1
    # Its own endpoint's page, posted with another endpoint's id, is the same 404.
    seen = _post(logged_in, theirs, **NIGHTLY)
    assert seen.status_code == 404
    assert Schedule.objects.get(pk=foreign.pk).paused_at is None


def test_the_schedule_forms_need_their_csrf_token(user, endpoint):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert _post(strict, endpoint, **NIGHTLY).status_code == 403
    assert not Schedule.objects.exists()


def test_hostile_names_and_templates_are_inert(logged_in, endpoint):
    _post(logged_in, endpoint, **{**NIGHTLY, "name": HOSTILE, "title_template": f"t {HOSTILE}"})
    page = logged_in.get(reverse("endpoint-detail", args=[endpoint.pk])).content.decode()
    assert HOSTILE not in page and "&lt;img src=x" in page


@pytest.mark.django_db(transaction=True)
def test_a_schedule_added_in_a_browser_shows_its_next_runs(page, user, endpoint, tmp_path):
    sign_in(page, "alice")
    page.goto(f"/endpoints/{endpoint.pk}/")
    page.locator(".schedule-add summary").click()
    form = page.locator(".schedule-add form")
    form.get_by_label("Name", exact=True).fill("nightly triage")
    form.get_by_role("textbox", name="Cron").fill("0 9 * * 1-5")
    form.get_by_role("textbox", name="Time zone").fill("Europe/Berlin")
    form.get_by_role("textbox", name="Title").fill("Triage the issues of {date}")
    form.get_by_role("button", name="Add schedule").click()
    expect(page.locator(".schedule-list .schedule")).to_have_count(1)
    expect(page.locator(".schedule-runs time")).to_have_count(3)
    page.locator("#schedules").screenshot(path=tmp_path / "endpoint-schedules.png")  # as in docs/
    assert page.js_errors == []
