"""Fixtures for the deploy tests: the shipped configurations of deploy/ run for real (Debian's
HAProxy, nginx and PgBouncer, installed by .ci/run), in front of ``switchboard serve`` nodes
on the test database. A missing program skips with its name and how to install it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.crash.conftest import crash_env, procs, test_db_url  # noqa: F401  (fixtures)

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def program(name: str, package: str | None = None) -> str:
    """The path of a Debian program the test runs, or a skip saying how to install it."""
    found = shutil.which(name) or shutil.which(f"/usr/sbin/{name}")
    if found is None:
        pytest.skip(f"{name} is not installed (apt-get install {package or name})")
    return found
