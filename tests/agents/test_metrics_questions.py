"""/metrics for asking a person (issue 43): todos waiting on people per endpoint, questions
asked and how they ended, and the time to answer, counted by the sweeper's fold exactly once,
and never a question's text or an answer."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from switchboard.queues import counters, db, sql, sweeper, transitions
from switchboard.queues.models import MetricCounter, QuestionEnding
from switchboard.queues.transitions import Actor

TOKEN = "metrics-token-for-tests-9c2d"
QUESTION = "MARKER-QUESTION-4b1e: drop billing.legacy_rate?"
ANSWER = "MARKER-ANSWER-4b1e"

pytestmark = pytest.mark.django_db(transaction=True)  # the live server reads committed rows


@pytest.fixture
def metrics_on(settings, monkeypatch):
    settings.SWITCHBOARD_METRICS_TOKEN = TOKEN
    monkeypatch.setattr(counters, "FOLD_LAG_SECONDS", 0.0)


@pytest.fixture
def scrape(live_server, metrics_on):
    """Scrape the served /metrics: {(sample name, sorted labels): value}, and its text."""
    with httpx.Client(base_url=live_server.url, timeout=30) as served:

        def scraped() -> tuple[dict[tuple[str, tuple], float], str]:
            response = served.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            assert response.status_code == 200
            text = response.content.decode()
            values = {
                (sample.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
            }
            return values, text

        yield scraped


def _ask(endpoint, make_todo, **question) -> int:
    todo = make_todo("migrate billing")
    transitions.claim(Actor.agent(endpoint), todo.id, claimant="run-7")
    transitions.release(Actor.agent(endpoint), todo.id, question=QUESTION, **question)
    return todo.id


def _waited(todo_id: int, seconds: float) -> None:
    """Backdate the question so that it was asked ``seconds`` before it ended."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todo_questions SET asked_at = ended_at - make_interval(secs => %s)"
            " WHERE todo_id = %s",
            [seconds, todo_id],
        )


def _waiting(values, endpoint) -> float:
    return values[("switchboard_waiting", (("endpoint", endpoint.agent_id), ("team", "alice")))]


def _ended(values, ending: str) -> float:
    return values[("switchboard_questions_ended_total", (("ending", ending),))]


def _answer_bucket(values, le: str) -> float:
    return values[("switchboard_time_to_answer_seconds_bucket", (("le", le),))]


def test_every_question_metric_is_there_at_zero(scrape, endpoint):
    values, _ = scrape()

    assert _waiting(values, endpoint) == 0
    assert values[("switchboard_questions_asked_total", ())] == 0
    for ending in QuestionEnding.values:
        assert _ended(values, ending) == 0
    assert values[("switchboard_time_to_answer_seconds_count", ())] == 0
    assert values[("switchboard_time_to_answer_seconds_sum", ())] == 0
    assert _answer_bucket(values, "+Inf") == 0
    assert _answer_bucket(values, "2.592e+06") == 0  # 30 days, the longest bound


def test_the_waiting_gauge_counts_each_endpoints_todos_waiting_on_people_now(
    scrape, endpoint, make_todo, make_endpoint, user
):
    other = make_endpoint("agent-b")
    first = _ask(endpoint, make_todo)
    _ask(endpoint, make_todo)
    make_todo("not asked")  # pending: not waiting

    values, _ = scrape()  # live, no fold needed
    assert _waiting(values, endpoint) == 2
    assert _waiting(values, other) == 0
    assert values[("switchboard_todos", (("state", "waiting"),))] == 2

    transitions.answer(Actor.human(user), first, value="go ahead")
    values, _ = scrape()
    assert _waiting(values, endpoint) == 1


def test_a_revoked_endpoint_has_no_waiting_gauge(scrape, endpoint, make_todo, make_endpoint):
    other = make_endpoint("agent-b")
    _ask(other, lambda title: make_todo(title, on=other))
    transitions.revoke_endpoint(None, other)

    values, _ = scrape()
    assert _waiting(values, endpoint) == 0
    assert not any(
        name == "switchboard_waiting" and ("endpoint", "agent-b") in labels
        for name, labels in values
    )


def test_answered_unanswered_and_withdrawn_questions_are_counted_after_the_fold(
    scrape, endpoint, make_todo, user
):
    person = Actor.human(user)
    quick = _ask(endpoint, make_todo)
    transitions.answer(person, quick, value=ANSWER)
    _waited(quick, 45)  # in le=60, not in le=30
    slow = _ask(endpoint, make_todo)
    transitions.answer(person, slow, value=ANSWER)
    _waited(slow, 2 * 3600)  # in le=14400, not in le=3600
    expired = _ask(endpoint, make_todo, answer_within_seconds=60)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todo_questions SET expires_at = asked_at WHERE todo_id = %s", [expired]
        )
    assert len(transitions.expire_questions()) == 1
    withdrawn = _ask(endpoint, make_todo)
    transitions.cancel(person, withdrawn)
    _ask(endpoint, make_todo)  # still waiting: asked, not ended

    before, _ = scrape()
    assert before[("switchboard_questions_asked_total", ())] == 0  # not folded yet
    assert _ended(before, "answered") == 0

    sweeper.sweep_once()

    values, _ = scrape()
    assert values[("switchboard_questions_asked_total", ())] == 5
    assert values[("switchboard_attempts_closed_total", (("outcome", "asked"),))] == 5
    assert _ended(values, "answered") == 2
    assert _ended(values, "unanswered") == 1
    assert _ended(values, "withdrawn") == 1
    assert values[("switchboard_time_to_answer_seconds_count", ())] == 2
    assert values[("switchboard_time_to_answer_seconds_sum", ())] == pytest.approx(7245, abs=1)
    assert _answer_bucket(values, "30.0") == 0
    assert _answer_bucket(values, "60.0") == 1
    assert _answer_bucket(values, "3600.0") == 1
    assert _answer_bucket(values, "14400.0") == 2
    assert _answer_bucket(values, "+Inf") == 2
    assert _waiting(values, endpoint) == 1

    sweeper.sweep_once()  # counted once
    again, _ = scrape()
    assert _ended(again, "answered") == 2
    assert again[("switchboard_time_to_answer_seconds_count", ())] == 2


def test_the_fold_counts_a_question_once_and_writes_nothing_when_idle(endpoint, make_todo, user):
    todo = _ask(endpoint, make_todo)
    transitions.answer(Actor.human(user), todo, value="yes")

    assert counters.fold_attempt_endings(lag_seconds=60) == {}  # too young: neither counted
    assert not MetricCounter.objects.filter(name=counters.QUESTIONS_ENDED).exists()
    counters.fold_attempt_endings(lag_seconds=0)
    stored = dict(
        MetricCounter.objects.filter(name=counters.QUESTIONS_ENDED).values_list("label", "value")
    )
    assert stored == {"answered": 1}
    rows = MetricCounter.objects.count()
    counters.fold_attempt_endings(lag_seconds=0)
    assert MetricCounter.objects.count() == rows
    assert MetricCounter.objects.get(name=counters.TIME_TO_ANSWER.count).value == 1
    # The statement, run on its own over an empty window, adds nothing and says so.
    [(until,)] = db.fetch(sql.FOLD_HORIZON, {"lag": 0})
    assert (
        db.fetch(
            sql.FOLD_QUESTION_ENDINGS,
            {
                "since": until,
                "until": until,
                "ended_name": counters.QUESTIONS_ENDED,
                **counters.TIME_TO_ANSWER.names(),
            },
        )
        == []
    )


def test_metrics_never_show_a_question_or_an_answer(scrape, endpoint, make_todo, user):
    answered = _ask(endpoint, make_todo, choices=[ANSWER, "stop"])
    transitions.answer(Actor.human(user), answered, value=ANSWER)
    _ask(endpoint, make_todo)
    sweeper.sweep_once()

    values, text = scrape()

    assert _ended(values, "answered") == 1
    assert "MARKER" not in text
    assert "migrate billing" not in text  # nor a todo's title
