"""Asking a person (issue 43) in admin: operators see how many questions wait on people and
how the last day's ended, per endpoint, and never a question, its choices or form, or an
answer."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse

from switchboard.queues import endpoints, transitions
from switchboard.queues.models import TodoQuestion
from switchboard.queues.transitions import Actor
from tests.queues.test_admin import _crawl, operator, signed_in, staff, superuser  # noqa: F401

MARKERS = {
    "waiting question": "MARKER-Q-WAITING-51c9",
    "answered question": "MARKER-Q-ANSWERED-51c9",
    "choice": "MARKER-CHOICE-51c9",
    "form title": "MARKER-FORM-TITLE-51c9",
    "form option": "MARKER-FORM-OPTION-51c9",
    "free answer": "MARKER-FREE-ANSWER-51c9",
    "unanswered question": "MARKER-Q-UNANSWERED-51c9",
    "withdrawn question": "MARKER-Q-WITHDRAWN-51c9",
}


def _ask(endpoint, title: str, text: str, **question) -> int:
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(agent, title=title)
    transitions.claim(agent, todo.id, claimant="run-3")
    transitions.release(agent, todo.id, question=text, **question)
    return todo.id


@pytest.fixture
def asked(team, user):
    """Two endpoints' questions, each way a question can stand, every text marked: on
    ``asker``, two waiting (a choice and a form), two answered (a choice, free text), one
    unanswered (its time ran out) and one withdrawn (canceled); on ``quiet``, one answered two
    days ago (not in the last day)."""
    asker, _ = endpoints.vend(team, "asker")
    quiet, _ = endpoints.vend(team, "quiet")
    person = Actor.human(user)
    _ask(asker, "waits on a choice", MARKERS["waiting question"], choices=["a", MARKERS["choice"]])
    _ask(
        asker,
        "waits on a form",
        MARKERS["waiting question"],
        answer_schema={
            "type": "object",
            "properties": {
                "rate": {"type": "string", "title": MARKERS["form title"]},
                "plan": {"type": "string", "enum": ["basic", MARKERS["form option"]]},
            },
        },
    )
    chosen = _ask(asker, "answered", MARKERS["answered question"], choices=[MARKERS["choice"], "b"])
    transitions.answer(person, chosen, value=MARKERS["choice"])
    free = _ask(asker, "answered freely", MARKERS["answered question"])
    transitions.answer(person, free, value=MARKERS["free answer"])
    expired = _ask(asker, "no answer", MARKERS["unanswered question"], answer_within_seconds=60)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todo_questions SET expires_at = asked_at WHERE todo_id = %s", [expired]
        )
    assert len(transitions.expire_questions()) == 1
    withdrawn = _ask(asker, "canceled", MARKERS["withdrawn question"])
    transitions.cancel(person, withdrawn)
    old = _ask(quiet, "answered long ago", MARKERS["answered question"])
    transitions.answer(person, old, value=MARKERS["free answer"])
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todo_questions SET asked_at = asked_at - interval '2 days 1 hour',"
            " ended_at = ended_at - interval '2 days' WHERE todo_id = %s",
            [old],
        )
    return asker, quiet


def test_no_admin_page_shows_a_question_or_an_answer(client, staff, asked):  # noqa: F811
    pages = _crawl(client, ["/admin/"])

    leaks = [
        (url, name) for url, (_, body) in pages.items() for name, text in MARKERS.items()
        if text in body
    ]  # fmt: skip
    assert leaks == []
    # The crawl reached every asked todo's page and the counts, and the texts are stored.
    for todo_id in TodoQuestion.objects.values_list("todo_id", flat=True):
        assert pages[reverse("admin:queues_todo_change", args=[todo_id])][0] == 200
    health_status, health_page = pages[reverse("admin:queue-health")]
    assert health_status == 200 and 'class="questions-waiting">2<' in health_page
    stored = TodoQuestion.objects.values_list("text", "answer")
    assert {MARKERS["waiting question"], MARKERS["answered question"]} <= {t for t, _ in stored}
    assert MARKERS["free answer"] in {a for _, a in stored}


def test_queue_health_counts_questions_per_endpoint(signed_in, asked):  # noqa: F811
    asker, quiet = asked
    rows = list(TodoQuestion.objects.values("todo__endpoint_id", "ended_at", "ending"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        [(now,)] = cursor.fetchall()
    day = Counter(
        (row["todo__endpoint_id"], row["ending"])
        for row in rows
        if row["ended_at"] is not None and row["ended_at"] > now - timedelta(days=1)
    )
    open_now = Counter(row["todo__endpoint_id"] for row in rows if row["ended_at"] is None)

    response = signed_in.get(reverse("admin:queue-health"))

    assert response.status_code == 200
    health = response.context["health"]
    by_endpoint = {row.endpoint_id: row.questions for row in health.endpoints}
    for endpoint in (asker, quiet):
        counted = by_endpoint[endpoint.pk]
        assert counted.waiting == open_now[endpoint.pk]
        assert counted.answered_last_day == day[(endpoint.pk, "answered")]
        assert counted.unanswered_last_day == day[(endpoint.pk, "unanswered")]
        assert counted.withdrawn_last_day == day[(endpoint.pk, "withdrawn")]
    # What the seeding made, so the independent count is not vacuous.
    assert (by_endpoint[asker.pk].waiting, by_endpoint[asker.pk].answered_last_day) == (2, 2)
    assert by_endpoint[asker.pk].unanswered_last_day == 1
    assert by_endpoint[asker.pk].withdrawn_last_day == 1
    assert not by_endpoint[quiet.pk].any  # its one answer is two days old
    assert health.questions.waiting == 2 and health.questions.answered_last_day == 2
    assert timedelta(0) <= health.questions.oldest_waiting_age < timedelta(minutes=5)
    assert health.by_state["waiting"] == 2  # the todos waiting on people, in the state table

    body = response.content.decode()
    assert 'class="questions-waiting">2<' in body
    assert 'class="questions-answered-day">2 answered<' in body
    assert 'class="questions-unanswered-day">1<' in body
    assert 'class="questions-withdrawn-day">1<' in body
    questions_table = body.split('id="questions"')[1].split("</table>")[0]
    assert "alice/asker" in questions_table and "alice/quiet" not in questions_table
    assert f"?endpoint={asker.pk}&amp;state__exact=waiting" in questions_table


def test_queue_health_with_no_questions_says_so(signed_in, endpoint):  # noqa: F811
    body = signed_in.get(reverse("admin:queue-health")).content.decode()

    assert 'class="questions-waiting">0<' in body
    assert "No question waiting, none ended in the last day." in body


def test_questions_add_one_query_to_queue_health_whatever_their_number(
    signed_in,  # noqa: F811
    asked,
    django_assert_num_queries,
):
    asker, _ = asked
    # session, user; todos by endpoint and state; their endpoints; attempts by outcome;
    # questions by endpoint; outbox; sweeper
    with django_assert_num_queries(8):
        signed_in.get(reverse("admin:queue-health"))
    for n in range(20):
        _ask(asker, f"more {n}", "another question")
    with django_assert_num_queries(8):
        response = signed_in.get(reverse("admin:queue-health"))
    assert response.context["health"].questions.waiting == 22
