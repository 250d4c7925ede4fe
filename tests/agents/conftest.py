"""Fixtures of the agents' tests."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from switchboard.queues.sql import DOORBELL_CHANNEL


@pytest.fixture
def rings():
    """``rings()``: the endpoint ids rung on the doorbell's channel since the last call (a
    LISTEN connection of its own; each call listens half a second for what is still coming)."""
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(key, None)
    listener = psycopg.connect(**params, autocommit=True)
    listener.execute(f"LISTEN {DOORBELL_CHANNEL}")

    def heard() -> list[int]:
        return [int(n.payload) for n in listener.notifies(timeout=0.5)]

    yield heard
    listener.close()


@pytest.fixture
def sender(vend) -> str:
    """The token of the endpoint ``sender``, whose messages and todos go to ``worker``."""
    _, token = vend("sender")
    return token


@pytest.fixture
def worker(vend) -> str:
    """The token of the endpoint ``worker``, whose side a test plays over the HTTP API."""
    _, token = vend("worker")
    return token
