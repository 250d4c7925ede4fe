"""Admission (SWITCHBOARD_CLAIMS_PER_MINUTE): each committed claim of an endpoint is one
unit; over the limit a claim answers rate_limited with retry_after and writes nothing."""

from __future__ import annotations

import pytest
from django.db import connection

from switchboard.queues import transitions
from switchboard.queues.errors import Conflict, RateLimited
from switchboard.queues.models import Endpoint, Todo, TodoAttempt
from switchboard.queues.transitions import Actor
from tests.agents.api_helpers import check_shape, post
from tests.queues.helpers import run_together


@pytest.fixture
def limit(settings):
    settings.SWITCHBOARD_CLAIMS_PER_MINUTE = 3
    return 3


def _ledger():
    return (
        sorted(Todo.objects.values_list("id", "state", "last_attempt_seq")),
        TodoAttempt.objects.count(),
        list(
            Endpoint.objects.order_by("id").values_list("admission_window_at", "admission_claims")
        ),
    )


def test_the_claim_over_the_limit_is_refused_and_writes_nothing(limit, endpoint, make_todo):
    todos = [make_todo(f"t{n}") for n in range(5)]
    agent = Actor.agent(endpoint)
    for todo in todos[:2]:
        transitions.claim(agent, todo.id)
    assert transitions.claim_next(Actor.agent(endpoint)) is not None
    before = _ledger()
    with pytest.raises(RateLimited) as refused:
        transitions.claim_next(Actor.agent(endpoint))
    assert 0 < refused.value.extra["retry_after"] <= 60
    with pytest.raises(RateLimited):
        transitions.claim(agent, todos[4].id)
    assert _ledger() == before
    endpoint.refresh_from_db()
    assert endpoint.admission_claims == 3


def test_only_committed_claims_are_charged(limit, endpoint, make_todo, user):
    agent = Actor.agent(endpoint)
    assert transitions.claim_next(Actor.agent(endpoint)) is None  # nothing to claim: free
    todo = make_todo()
    transitions.claim(agent, todo.id)
    with pytest.raises(Conflict):
        transitions.claim(agent, todo.id)  # not claimable: free
    transitions.release(agent, todo.id)
    for _ in range(3):  # a person's claims are never charged nor limited
        transitions.claim(Actor.human(user), todo.id)
        transitions.release(Actor.human(user), todo.id)
    endpoint.refresh_from_db()
    assert endpoint.admission_claims == 1


def test_a_new_minute_opens_a_new_window(limit, endpoint, make_todo):
    for n in range(4):
        make_todo(f"t{n}")
    for _ in range(3):
        transitions.claim_next(Actor.agent(endpoint))
    with pytest.raises(RateLimited):
        transitions.claim_next(Actor.agent(endpoint))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE endpoints SET admission_window_at = admission_window_at"
            " - interval '61 seconds' WHERE id = %s",
            [endpoint.pk],
        )
    assert transitions.claim_next(Actor.agent(endpoint)) is not None
    endpoint.refresh_from_db()
    assert endpoint.admission_claims == 1


def test_off_by_default_writes_nothing_to_the_endpoint(endpoint, make_todo):
    make_todo()
    transitions.claim_next(Actor.agent(endpoint))
    endpoint.refresh_from_db()
    assert (endpoint.admission_window_at, endpoint.admission_claims) == (None, 0)


def test_over_http_the_n_plus_first_claim_is_429_with_retry_after(
    limit, live_server, vend, make_todo
):
    endpoint, token = vend("limited")
    for n in range(4):
        make_todo(f"t{n}", on=endpoint)
    for _ in range(3):
        ok = post(live_server.url, "claim_next", {}, token=token)
        assert ok.status_code == 200 and ok.json()["todo"] is not None
    before = _ledger()
    refused = post(live_server.url, "claim_next", {}, token=token)
    body = check_shape("claim_next", refused)
    assert refused.status_code == 429 and body["error"]["code"] == "rate_limited"
    assert 0 < body["error"]["retry_after"] <= 60
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert _ledger() == before


@pytest.mark.django_db(transaction=True)
def test_concurrent_claimers_get_exactly_the_limit(settings, vend, make_todo):
    settings.SWITCHBOARD_CLAIMS_PER_MINUTE = 5
    endpoint, _ = vend("busy")
    for n in range(20):
        make_todo(f"t{n}", on=endpoint)
    outcomes: list[str] = []

    def worker(_n: int) -> None:
        for _ in range(3):
            try:
                claimed = transitions.claim_next(Actor.agent(endpoint))
                outcomes.append("claimed" if claimed else "empty")
            except RateLimited:
                outcomes.append("refused")

    assert run_together(worker, 8) == []
    assert outcomes.count("claimed") == 5 and outcomes.count("refused") == 19
    assert TodoAttempt.objects.count() == 5
