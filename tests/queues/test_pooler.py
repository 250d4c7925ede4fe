"""A prepared statement lost between connections (a transaction pooler in front of PostgreSQL)
is said plainly, with the setting to change, and /healthz says the node is misconfigured;
the start-up check finds no pooler in front of the test database (tests/deploy finds one)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

from switchboard.queues.db import pooler
from switchboard.queues.errors import from_database_error


@pytest.fixture
def lost(monkeypatch):
    fresh = pooler.Lost()
    monkeypatch.setattr(pooler, "lost", fresh)
    return fresh


def _missing_prepared_statement() -> DatabaseError:
    with pytest.raises(DatabaseError) as raised:
        with connection.cursor() as cursor:
            cursor.execute("EXECUTE switchboard_never_prepared")
    return raised.value


@pytest.mark.django_db(transaction=True)
def test_a_lost_prepared_statement_is_said_once_with_the_fix(lost, caplog, client):
    error = _missing_prepared_statement()
    answers = [from_database_error(error, verb="claim_next") for _ in range(3)]

    assert {a.code for a in answers} == {"unavailable"}
    assert "loses prepared statements" in answers[0].message
    said = [r.getMessage() for r in caplog.records if "lost a prepared statement" in r.getMessage()]
    assert len(said) == 1 and "SWITCHBOARD_PREPARED_STATEMENTS=0" in said[0]
    health = client.get("/healthz")
    assert health.status_code == 503 and b"misconfigured" in health.content


@pytest.mark.django_db(transaction=True)
def test_other_database_errors_are_not_taken_for_a_pooler(lost):
    with pytest.raises(DatabaseError) as raised:
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM todos")
    from_database_error(raised.value, verb="list_todos")
    assert lost.seen is False


@pytest.mark.django_db(transaction=True)
def test_with_no_pooler_in_front_prepared_statements_survive():
    assert pooler.prepared_statements_survive() is None
