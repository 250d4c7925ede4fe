"""The transitions' tests run with the settings the state table's numbers assume."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 10
    settings.SWITCHBOARD_RETRY_MAX_SECONDS = 3600
    settings.SWITCHBOARD_LEASE_SECONDS = 300
    settings.SWITCHBOARD_OWNER_LEASE_SECONDS = 1800
