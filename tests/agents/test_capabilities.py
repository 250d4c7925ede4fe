"""GET /api/v1/: what the server is and can do, without a token (a relay checks it)."""

from __future__ import annotations

import httpx
import pytest

from switchboard.agents.verbs import REGISTRY
from switchboard.queues import bounds

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server):
    with httpx.Client(base_url=live_server.url, timeout=30) as served:
        yield served


def test_the_capability_document_needs_no_token_and_names_attempt_history(client):
    response = client.get("/api/v1/")
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    doc = response.json()
    assert doc["name"] == "switchboard" and doc["api"] == "v1" and doc["version"]
    assert doc["features"]["attempt_history"] is True
    assert doc["features"]["fences"] is True and doc["features"]["rounds"] is True
    assert doc["features"]["long_poll"]["max_wait_seconds"] == 30
    assert doc["verbs"] == list(REGISTRY)
    assert doc["limits"]["summary_bytes"] == bounds.SUMMARY_MAX_BYTES
    assert doc["limits"]["body_bytes"] == 64 * 1024


def test_the_openapi_info_carries_the_same_features(client):
    info = client.get("/api/v1/openapi.json").json()["info"]
    assert info["x-switchboard"]["features"] == client.get("/api/v1/").json()["features"]


def test_the_capability_document_is_get_only(client):
    response = client.post("/api/v1/", content=b"{}", headers={"Content-Type": "application/json"})
    assert response.status_code == 405 and response.headers["Allow"] == "GET, HEAD"
    assert response.json()["error"]["code"] == "invalid"


def test_it_holds_nothing_about_a_tenant(client, vend):
    _, token = vend("secretive-agent")
    body = client.get("/api/v1/").text
    assert "secretive-agent" not in body and "alice" not in body and token not in body
