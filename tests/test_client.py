"""switchboard.client beyond the verbs (which the API tests cover), and docs/api.md's MCP
example run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from queues import transitions
from queues.models import TodoAttempt
from queues.transitions import Actor
from switchboard.client import LONG_POLL_MARGIN_SECONDS, Client, read_timeout
from tests.unanswered import first_connection_unanswered

API_DOCS = Path(__file__).parent.parent / "docs" / "api.md"


def test_a_call_after_a_timed_out_one_gets_a_fresh_connection():
    """A server that never answers the first connection and answers the second: the call
    after the timeout must not reuse the connection left mid-request."""
    with first_connection_unanswered() as url:
        client = Client(url, "token", timeout=0.5)
        with pytest.raises(TimeoutError):
            client.list_todos()

        assert client.list_todos() == {"todos": []}


def test_a_long_poll_is_read_for_longer_than_its_wait():
    assert read_timeout(45, "claim_next", {"wait_seconds": 30}) == 30 + LONG_POLL_MARGIN_SECONDS
    assert read_timeout(5, "claim_next", {"wait_seconds": 1}) == 1 + LONG_POLL_MARGIN_SECONDS
    assert read_timeout(5, "claim_next", {}) == 5
    assert read_timeout(5, "list_todos", {"wait_seconds": 30}) == 5


def _mcp_example() -> str:
    text = API_DOCS.read_text()
    start = text.index("With the official Python SDK")
    return re.search(r"```python\n(.*?)```", text[start:], re.DOTALL).group(1)


@pytest.mark.django_db(transaction=True)
def test_the_docs_mcp_example_runs_as_written_and_outlives_httpx2s_default_timeout(
    live_server, vend
):
    """docs/api.md's MCP example, run as a script against the live server: it claims a todo;
    on an empty queue it long-polls to the end of its wait (cut to 7 s from 20 to keep the
    test short), past httpx2's 5 s default read timeout, and prints a null todo."""
    endpoint, token = vend("mcp-reader")
    script = _mcp_example()
    assert "WAIT = 20" in script and "asyncio.run(main(" in script
    script = script.replace("WAIT = 20", "WAIT = 7")
    env = {**os.environ, "SWITCHBOARD_URL": live_server.url, "SWITCHBOARD_TOKEN": token}

    def run_example() -> subprocess.CompletedProcess:
        ran = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
        )
        assert ran.returncode == 0, ran.stderr
        return ran

    transitions.create_todo(Actor.agent(endpoint), title="for the mcp example")
    assert "for the mcp example" in run_example().stdout
    assert TodoAttempt.objects.get().claimant == "mcp/run-1"

    started = time.monotonic()
    assert "{'todo': None" in run_example().stdout
    assert time.monotonic() - started >= 7
