"""Tool errors as the TypeScript MCP SDK 1.x reads them (``@modelcontextprotocol/sdk``
1.32.2, the line most TypeScript agents ship), driven by node against a live server.

1.x validates any ``structuredContent`` against the tool's output schema, even on a result
with ``isError`` (2.x and the Python SDK do not): an error result that carried the API's
error body there made the SDK throw ``McpError -32602 Structured content does not match the
tool's output schema`` instead of handing the agent its conflict. An error result is the
error body as text, with ``isError`` (docs/api.md, "Errors over MCP")."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.agents.node_packages import installed

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT = Path(__file__).with_name("ts_client")


@pytest.fixture(scope="session")
def node_client() -> Path:
    """The SDK installed from the npm registry into tests/agents/ts_client."""
    return installed(CLIENT, "@modelcontextprotocol/sdk")


def test_the_typescript_sdk_reads_conflict_not_found_and_invalid(live_server, vend, node_client):
    _, token = vend("typescript")
    run = subprocess.run(
        ["node", str(node_client)],
        env={**os.environ, "SWITCHBOARD_URL": live_server.url, "SWITCHBOARD_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    steps = {line["step"]: line for line in map(json.loads, run.stdout.splitlines())}

    assert "complete" in steps["tools"]["names"]
    assert steps["create"]["isError"] is False
    for step, code in (
        ("conflict", "conflict"),
        ("not_found", "not_found"),
        ("invalid", "invalid"),
        ("unknown_field", "invalid"),
    ):
        seen = steps[step]
        assert "thrown" not in seen, (step, seen)  # the SDK did not throw: the agent reads it
        assert seen["isError"] is True, (step, seen)
        assert seen["text"]["error"]["code"] == code, (step, seen)
        assert seen["structured"] is None, (step, seen)
    # Success still carries structuredContent, validated by the SDK against the schema.
    done = steps["complete"]
    assert done["isError"] is False and done["structured"]["todo"]["state"] == "done", done
