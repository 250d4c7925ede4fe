"""/metrics: the token, the counters kept in the database, claim latency, and a second process
that agrees with the first."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import httpx
import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from switchboard import dburl
from switchboard.queues import counters, endpoints, sweeper, transitions
from switchboard.queues.models import MetricCounter, Outcome, TodoState
from switchboard.queues.transitions import Actor
from tests.agents.api_helpers import statements_run
from tests.crash.harness import free_port
from tests.queues.helpers import lapse_lease

TOKEN = "metrics-token-for-tests-5b1e"
SWITCHBOARD = str(Path(sys.executable).with_name("switchboard"))


@pytest.fixture
def metrics_on(settings, monkeypatch):
    settings.SWITCHBOARD_METRICS_TOKEN = TOKEN
    monkeypatch.setattr(counters, "FOLD_LAG_SECONDS", 0.0)
    counters.claim_latency.take()  # other tests' claims are not this test's
    yield
    counters.claim_latency.take()


pytestmark = pytest.mark.django_db(transaction=True)  # the live server reads committed rows


@pytest.fixture
def client(live_server):
    """The served front (the metrics are the agents' front door's, on the event loop)."""
    with httpx.Client(base_url=live_server.url, timeout=30) as served:
        yield served


def scrape(client, token: str = TOKEN):
    return client.get("/metrics", headers={"Authorization": f"Bearer {token}"})


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def closed(values: dict, outcome: str) -> float:
    return values[("switchboard_attempts_closed_total", (("outcome", outcome),))]


def _reaped_attempt(endpoint) -> None:
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title="dies mid-lease")
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)
    assert len(transitions.reap_lapsed()) == 1


# ---------------------------------------------------------------------------------------
# The token


def test_without_a_token_setting_metrics_is_an_unknown_url(client, settings):
    settings.SWITCHBOARD_METRICS_TOKEN = ""
    unknown = client.get("/no-such-page-at-all")

    for headers in ({}, {"Authorization": "Bearer anything"}):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 404 == unknown.status_code
        assert response.content == unknown.content
        assert response.headers["Content-Type"] == unknown.headers["Content-Type"]


def test_without_a_token_setting_the_served_metrics_is_an_unknown_url(live_server, settings):
    """Unset, /metrics is the site's, which has no such page: the same 404 page as any
    unknown URL (once, the front's Http404 escaped as a 500)."""
    settings.SWITCHBOARD_METRICS_TOKEN = ""
    unknown = _get(f"{live_server.url}/no-such-page-at-all")
    for token in ("", "anything"):
        assert _get(f"{live_server.url}/metrics", token) == unknown
    assert unknown[0] == 404


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer", f"Bearer {TOKEN}x"]
)
def test_without_the_right_token_metrics_are_refused(client, metrics_on, authorization):
    headers = {"Authorization": authorization} if authorization else {}
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert b"switchboard_" not in response.content


def test_with_the_token_every_metric_is_there_zeros_included(client, metrics_on):
    response = scrape(client)

    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/plain; version=")
    assert response.headers["Cache-Control"] == "no-store"
    values = samples(response.content.decode())
    for outcome in Outcome.values:
        assert closed(values, outcome) == 0
    for state in TodoState.values:
        assert values[("switchboard_todos", (("state", state),))] == 0
    assert values[("switchboard_lease_expired_total", ())] == 0
    assert values[("switchboard_claim_latency_seconds_count", ())] == 0
    assert values[("switchboard_claim_latency_seconds_bucket", (("le", "+Inf"),))] == 0
    assert values[("switchboard_sweeper_lag_seconds", ())] == float("inf")  # never ran
    assert values[("switchboard_outbox_pending", (("kind", "dead_letter"),))] == 0


# ---------------------------------------------------------------------------------------
# Counters from the database


def test_a_reaped_attempt_is_counted_after_the_sweepers_fold(client, metrics_on, endpoint):
    _reaped_attempt(endpoint)
    before = samples(scrape(client).content.decode())
    assert closed(before, "reaped") == 0  # not folded yet

    sweeper.sweep_once()

    values = samples(scrape(client).content.decode())
    assert closed(values, "reaped") == 1
    assert values[("switchboard_lease_expired_total", ())] == 1
    assert values[("switchboard_todos", (("state", "pending"),))] == 1
    assert 0 <= values[("switchboard_sweeper_lag_seconds", ())] < 30
    assert values[("switchboard_sweeper_passes_total", ())] == 1


def test_the_fold_waits_for_endings_younger_than_its_lag(endpoint, agent, make_todo):
    todo = make_todo()
    transitions.claim(agent, todo.id)
    transitions.complete(agent, todo.id)

    assert counters.fold_attempt_endings(lag_seconds=60) == {}  # ended just now: too young
    assert counters.fold_attempt_endings(lag_seconds=0) == {"completed": 1}
    assert counters.fold_attempt_endings(lag_seconds=0) == {}  # counted once
    assert MetricCounter.objects.get(name="attempts_closed_total", label="completed").value == 1


def test_the_first_fold_counts_every_ending_kept(endpoint, agent, make_todo, settings):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    for _ in range(3):
        todo = make_todo()
        transitions.claim(agent, todo.id)
        transitions.fail(agent, todo.id)
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE todo_attempts SET ended_at = ended_at - interval '400 days'")

    assert counters.fold_attempt_endings(lag_seconds=0) == {"failed": 3, "completed": 3}


# ---------------------------------------------------------------------------------------
# Claim latency


def test_claims_are_timed_into_buckets_and_flushed_in_one_statement(
    metrics_on, endpoint, agent, make_todo, django_assert_num_queries
):
    counters.claim_latency.observe(0.001)  # on a bound: counted in that bucket (le)
    counters.claim_latency.observe(0.003)
    counters.claim_latency.observe(7.0)  # over the largest bound: +Inf only

    with django_assert_num_queries(1):  # one statement
        assert counters.flush_claim_latency() is True
    assert counters.flush_claim_latency() is False  # nothing left

    stored = dict(
        MetricCounter.objects.filter(name__startswith="claim_latency").values_list("label", "value")
    )
    assert stored["le=0.001"] == 1
    assert stored["le=0.0025"] == 1
    assert stored["le=0.005"] == 2
    assert stored["le=2.5"] == 2
    counts = MetricCounter.objects.get(name="claim_latency_count").value
    total = MetricCounter.objects.get(name="claim_latency_sum").value
    assert counts == 3 and total == pytest.approx(7.004)


def test_claim_latency_adds_no_query_to_a_claim(client, settings, metrics_on, vend, monkeypatch):
    endpoint, token = vend("timed")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def claim_next_statements() -> list[str]:
        transitions.create_todo(Actor.agent(endpoint), title="work")
        with statements_run(monkeypatch) as names:
            response = client.post("/api/v1/claim_next", content=b"{}", headers=headers)
        assert response.status_code == 200 and response.json()["todo"] is not None
        return [name for name in names if name != "endpoint_by_token"]  # the cache's, if any

    settings.SWITCHBOARD_METRICS_TOKEN = ""
    off = claim_next_statements()
    settings.SWITCHBOARD_METRICS_TOKEN = TOKEN
    on = claim_next_statements()

    assert on == off == ["claim_next"]
    assert counters.claim_latency.pending  # observed, in memory


def test_a_long_poll_is_one_observation_without_its_waiting(metrics_on, endpoint, agent):
    from switchboard.agents import schemas, waiting
    from switchboard.agents.verbs import REGISTRY
    from switchboard.queues import db

    async def long_poll() -> dict:
        try:
            params = schemas.ClaimNext(wait_seconds=1)
            return await waiting.call(endpoint, REGISTRY["claim_next"], params)
        finally:
            await db.close_async_pool()

    started = time.monotonic()
    answer = asyncio.run(long_poll())
    waited = time.monotonic() - started

    assert answer["todo"] is None and waited >= 1
    deltas = counters.claim_latency.take()
    assert deltas is not None and sum(deltas.counts) == 1
    assert deltas.total < waited / 2


def test_metrics_query_count_does_not_grow_with_rows(
    client, metrics_on, endpoint, agent, make_todo, monkeypatch
):
    sweeper.sweep_once()
    scrape_reads = [
        "metric_counters",
        "todos_by_state",
        "endpoints_waiting",
        "outbox_pending",
        "sweeper_lag",
        "endpoints_oldest_claimable",
    ]
    with statements_run(monkeypatch) as names:
        scrape(client)
    assert names == scrape_reads
    for _ in range(30):
        todo = make_todo()
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
    sweeper.sweep_once()
    with statements_run(monkeypatch) as names:
        response = scrape(client)
    assert names == scrape_reads
    assert closed(samples(response.content.decode()), "completed") == 30
    counters.claim_latency.observe(0.002)
    with statements_run(monkeypatch) as names:  # and the flush of this process's claims
        scrape(client)
    assert names == ["add_counters", *scrape_reads]


# ---------------------------------------------------------------------------------------
# A second process agrees (subprocesses: committed rows, outside a test transaction)


def _get(url: str, token: str = TOKEN) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def second_process(django_db_setup, django_db_blocker, tmp_path_factory):
    """``switchboard serve`` (gunicorn, one worker) on the test database, with the token."""
    with django_db_blocker.unblock():
        database_url = dburl.build(connection.settings_dict)
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DJANGO_SETTINGS_MODULE", "SECRET_KEY", "DEBUG"}
    }
    env.update(
        DATABASE_URL=database_url,
        SWITCHBOARD_DEV="1",
        SWITCHBOARD_METRICS_TOKEN=TOKEN,
        SWITCHBOARD_WEB_WORKERS="1",
    )
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [SWITCHBOARD, "serve", "--port", str(port)],
            env=env,
            cwd=log.parent,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if _get(url)[0] == 200:
                    break
            except (urllib.error.URLError, ConnectionError):
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.slow
def test_a_fresh_second_process_reports_the_same_reaped_count(
    client, metrics_on, team, second_process
):
    endpoint, _ = endpoints.vend(team, "reaped-agent")
    _reaped_attempt(endpoint)
    sweeper.sweep_once()
    here = samples(scrape(client).content.decode())

    status, text = _get(second_process)

    assert status == 200
    there = samples(text)
    assert closed(here, "reaped") == closed(there, "reaped") == 1
    assert there[("switchboard_lease_expired_total", ())] == 1


@pytest.mark.slow
def test_claim_latency_over_http_agrees_in_a_second_process(
    metrics_on, team, live_server, second_process
):
    endpoint, token = endpoints.vend(team, "timed-agent")
    status, text = _get(f"{live_server.url}/metrics")
    assert status == 200
    count_before = samples(text)[("switchboard_claim_latency_seconds_count", ())]

    claims = 5
    for n in range(claims):
        transitions.create_todo(Actor.agent(endpoint), title=f"work {n}")
        request = urllib.request.Request(
            f"{live_server.url}/api/v1/claim_next",
            data=b"{}",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.load(response)["todo"] is not None

    status, text = _get(f"{live_server.url}/metrics")  # flushes this process's deltas
    here = samples(text)
    status_there, text_there = _get(second_process)
    there = samples(text_there)

    assert status == status_there == 200
    count = here[("switchboard_claim_latency_seconds_count", ())]
    assert count == count_before + claims
    assert there[("switchboard_claim_latency_seconds_count", ())] == count
    assert there[("switchboard_claim_latency_seconds_bucket", (("le", "+Inf"),))] == count
    assert there[("switchboard_claim_latency_seconds_sum", ())] == pytest.approx(
        here[("switchboard_claim_latency_seconds_sum", ())]
    )
    assert there[("switchboard_claim_latency_seconds_sum", ())] > 0
