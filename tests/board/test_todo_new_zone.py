"""New todo's "Not before" in the browser's time zone: with JavaScript the input is shown and
typed in that zone and sent with its UTC offset (static/board/time.js); without it the input
is UTC and says so. The server takes either (board/forms.py UtcDateTimeField)."""

from __future__ import annotations

import datetime
import re

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from switchboard.queues.models import Todo
from tests.board.conftest import sign_in

LA = "America/Los_Angeles"


def _form(endpoint) -> dict:
    return {"endpoint": endpoint.pk, "title": "rebuild docs", "priority": 0, "max_attempts": 3}


def test_a_value_with_its_offset_is_that_instant(logged_in, endpoint, settings):
    settings.TIME_ZONE = "Asia/Tokyo"  # the server's zone must not matter
    data = {**_form(endpoint), "not_before": "2030-01-02T09:30-08:00"}
    assert logged_in.post(reverse("todo-new"), data).status_code == 302
    assert Todo.objects.get().not_before == datetime.datetime(
        2030, 1, 2, 17, 30, tzinfo=datetime.UTC
    )


def test_a_refused_form_shows_the_instant_again_in_utc(logged_in, endpoint):
    data = {**_form(endpoint), "title": "", "not_before": "2030-01-02T09:30-08:00"}
    response = logged_in.post(reverse("todo-new"), data)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'value="2030-01-02T17:30"' in page and "data-local-datetime" in page
    assert "Not before (UTC)" in page and "Read as UTC" in page  # as a browser without script


@pytest.fixture
def zoned_page(browser, live_server):
    def open_page(*, javascript: bool):
        context = browser.new_context(
            base_url=live_server.url, timezone_id=LA, java_script_enabled=javascript
        )
        page = context.new_page()
        page.set_default_timeout(10_000)
        contexts.append(context)
        return page

    contexts = []
    yield open_page
    for context in contexts:
        context.close()


def _not_before(page, endpoint):
    """New todo, signed in, its endpoint picked (none is picked for you): the "Not before"
    input and its label."""
    sign_in(page, "alice")
    page.goto(reverse("todo-new"))
    page.get_by_label("Endpoint").select_option(str(endpoint.pk))
    field = page.locator("input[data-local-datetime]")
    return field, page.locator("label", has=field)


@pytest.mark.django_db(transaction=True)
def test_with_javascript_it_is_typed_in_the_browsers_zone(zoned_page, user, endpoint):
    page = zoned_page(javascript=True)
    field, label = _not_before(page, endpoint)
    expect(label.locator("[data-local-label]")).to_have_text(re.compile(r"^Not before \(P[SD]T\)$"))
    expect(label.locator("[data-local-hint]")).to_contain_text(f"your browser's time zone, {LA}")
    # Refused (no title): the value comes back in the same zone as typed.
    field.fill("2030-01-02T09:30")
    page.get_by_role("button", name="Create todo").click()
    expect(page.locator("input[data-local-datetime]")).to_have_value("2030-01-02T09:30")
    page.get_by_label("Title").fill("zoned")
    page.get_by_role("button", name="Create todo").click()
    expect(page).to_have_url(re.compile(r"/todos/\d+/$"))
    assert Todo.objects.get(title="zoned").not_before == datetime.datetime(
        2030, 1, 2, 17, 30, tzinfo=datetime.UTC
    )


@pytest.mark.django_db(transaction=True)
def test_without_javascript_it_is_utc_and_says_so(zoned_page, user, endpoint):
    page = zoned_page(javascript=False)
    field, label = _not_before(page, endpoint)
    expect(label.locator("[data-local-label]")).to_have_text("Not before (UTC)")
    expect(label.locator("[data-local-hint]")).to_contain_text("Read as UTC")
    page.get_by_label("Title").fill("in utc")
    field.fill("2030-01-02T09:30")
    page.get_by_role("button", name="Create todo").click()
    expect(page).to_have_url(re.compile(r"/todos/\d+/$"))
    assert Todo.objects.get(title="in utc").not_before == datetime.datetime(
        2030, 1, 2, 9, 30, tzinfo=datetime.UTC
    )
