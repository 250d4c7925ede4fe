"""Fixtures shared by the ledger's tests (the project-wide ones are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.queues.receivers import receivers


@pytest.fixture
def receiver():
    """``receiver(statuses, ...)`` starts a webhook receiver on 127.0.0.1 (stopped after
    the test): see tests/queues/receivers.py."""
    with receivers() as start:
        yield start


@pytest.fixture
def allowed(settings):
    """Receivers here are on 127.0.0.1: let webhooks go there."""
    settings.SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE = True
    return settings
