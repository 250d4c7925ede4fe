"""The first run: someone with no endpoint is walked through vending one (in place), a
filled-in curl, Python and MCP snippet for this server, and a first todo. The curl command is
run as the page shows it, against the live server."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from django.test import Client
from playwright.sync_api import expect

from switchboard.queues.models import Endpoint, Todo
from tests.board.conftest import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl on this machine")
def test_the_walkthrough_leads_to_a_working_curl_call(page, user, fast_refresh, live_server):
    sign_in(page, "alice")
    page.evaluate("window.__sameDocument = true")
    walkthrough = page.locator("#first-run")
    expect(walkthrough).to_contain_text("Vend an endpoint")
    expect(page.locator("#queue")).to_contain_text("No todos yet")
    walkthrough.get_by_label("Agent id").fill("first-agent")
    walkthrough.get_by_role("button", name="Vend endpoint").click()

    # In place: step 2, the token once, snippets filled in with this server and the token.
    expect(page.locator("#first-run-token")).to_be_visible()
    expect(walkthrough).to_contain_text("it is shown once and will not be shown again")
    assert page.evaluate("window.__sameDocument") is True
    endpoint = Endpoint.objects.get(agent_id="first-agent")
    assert endpoint.team == user.teams.get(personal=True)
    token = page.locator("#first-run-token").inner_text().strip()
    curl = page.locator(f"#curl-{endpoint.pk}").inner_text()
    assert live_server.url in curl and token in curl
    python = page.locator(f"#python-{endpoint.pk}").inner_text()
    assert f'Client("{live_server.url}", "{token}")' in python
    mcp = json.loads(page.locator(f"#mcp-{endpoint.pk}").inner_text())
    assert mcp["mcpServers"]["switchboard"]["url"] == f"{live_server.url}/mcp"

    # The curl call as the page shows it: a todo on the new queue, and the queue shows it.
    done = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)["todo"]
    assert made["title"] == "my first todo" and made["endpoint"] == "first-agent"
    expect(page.locator(f"#todo-{made['id']}")).to_contain_text("my first todo")

    # Step 3 from the Board itself.
    walkthrough.get_by_label("Title").fill("and one from the Board")
    walkthrough.get_by_role("button", name="Create the todo").click()
    expect(walkthrough.locator("#first-todo-result")).to_contain_text("and one from the Board")
    expect(page.locator("table.queue tbody tr")).to_have_count(2)
    assert Todo.objects.filter(endpoint=endpoint).count() == 2
    assert page.js_errors == []


def test_without_javascript_the_walkthrough_posts_to_the_token_page(user):
    client = Client()
    client.force_login(user)
    page = client.get("/").content.decode()
    assert 'action="/endpoints/new/"' in page and 'name="first_run"' in page
    response = client.post(
        "/endpoints/new/",
        {
            "agent_id": "plain",
            "team": user.teams.get().slug,
            "verbs": ["create_todo", "claim_next"],
            "first_run": "1",
        },
    )
    body = response.content.decode()
    assert response.status_code == 200 and "shown once" in body
    assert "/api/v1/create_todo" in body and "Authorization: Bearer " in body
    assert response["Cache-Control"].startswith("max-age=0")


def test_a_bad_agent_id_is_said_in_place(user):
    client = Client()
    client.force_login(user)
    response = client.post(
        "/endpoints/new/",
        {"agent_id": "Not A Slug", "team": user.teams.get().slug, "first_run": "1"},
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="first-run",
    )
    body = response.content.decode()
    assert response.status_code == 400
    assert body.lstrip().startswith("<section") and 'id="first-run"' in body
    assert "Use a slug" in body and "Not A Slug" in body
    assert not Endpoint.objects.exists()
