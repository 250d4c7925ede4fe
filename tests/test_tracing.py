"""OpenTelemetry (issue 46, docs/tracing.md): a span for every agent verb, HTTP or MCP, the
child of the agent's own `traceparent`, with the todo, attempt, endpoint, team and outcome
as attributes and no user text; the Python client sends its current trace (or TRACEPARENT)
so the server's spans sit under the agent's; a served `switchboard serve` with
SWITCHBOARD_OTEL=1 exports to a real OTLP/HTTP receiver started here, with the Django and
psycopg instrumentation of the OpenTelemetry project under the Board's and the verbs'
spans. Off (the default), nothing of it runs: queues/tracing.ON is False."""

from __future__ import annotations

import http.server
import json
import re
import secrets
import threading
import urllib.parse
import urllib.request

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from switchboard.client import Client
from switchboard.queues import tracing
from switchboard.queues.models import Todo, TodoAttempt
from tests import loopback
from tests.crash.harness import free_port
from tests.shell import shell_env
from tests.test_cli import _serving

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "words nobody may see in a trace"


class _Gate(SimpleSpanProcessor):
    """Exports only while a test of this module runs (the provider is the process's)."""

    open = False

    def on_end(self, span) -> None:
        if _Gate.open:
            super().on_end(span)


EXPORTED = InMemorySpanExporter()


@pytest.fixture
def spans(monkeypatch):
    """Tracing on, spans kept in memory: the process's tracer provider is set once."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(_Gate(EXPORTED))
        trace.set_tracer_provider(provider)
    monkeypatch.setattr(tracing, "ON", True)
    EXPORTED.clear()
    _Gate.open = True
    yield EXPORTED
    _Gate.open = False
    EXPORTED.clear()


def _parent() -> tuple[str, str, str]:
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def _post(base: str, verb: str, token: str, body: dict, **headers: str) -> dict:
    request = urllib.request.Request(
        f"{base}/api/v1/{verb}",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return json.loads(error.read())


def _finished(exporter, name: str, count: int = 1) -> list:
    """The finished spans named ``name`` (the request's server span ends after its answer
    went out, so wait for it a moment)."""
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = [s for s in exporter.get_finished_spans() if s.name == name]
        if len(found) >= count:
            return found
        time.sleep(0.02)
    return [s for s in exporter.get_finished_spans() if s.name == name]


def _no_user_text(exported) -> None:
    for span in exported:
        for value in span.attributes.values():
            assert SECRET not in str(value), (span.name, span.attributes)


def test_each_verb_is_a_span_under_the_agents_traceparent_with_ids_and_no_text(
    spans, live_server, vend, logged_in, settings
):
    endpoint, token = vend("traced")
    trace_id, span_id, parent = _parent()
    made = _post(
        live_server.url, "create_todo", token, {"title": SECRET, "body": SECRET}, traceparent=parent
    )
    todo_id = made["todo"]["id"]
    claimed = _post(live_server.url, "claim_next", token, {}, traceparent=parent)
    stale = _post(
        live_server.url,
        "complete",
        token,
        {"todo_id": todo_id, "attempt_seq": 99},
        traceparent=parent,
    )
    assert stale["error"]["code"] == "conflict"

    [server] = _finished(spans, "POST /api/v1/{verb}", 3)[:1]
    assert format(server.context.trace_id, "032x") == trace_id
    assert format(server.parent.span_id, "016x") == span_id
    assert server.kind == trace.SpanKind.SERVER
    [create] = _finished(spans, "switchboard create_todo")
    assert create.parent.span_id == server.context.span_id
    assert create.attributes["switchboard.verb"] == "create_todo"
    assert create.attributes["switchboard.endpoint"] == "traced"
    assert create.attributes["switchboard.team"] == endpoint.team_id
    assert create.attributes["switchboard.todo.id"] == todo_id
    assert create.attributes["switchboard.outcome"] == "ok"
    [claim] = _finished(spans, "switchboard claim_next")
    assert claim.attributes["switchboard.attempt.seq"] == claimed["attempt_seq"] == 1
    assert claim.attributes["switchboard.todo.state"] == "claimed"
    [complete] = _finished(spans, "switchboard complete")
    assert complete.attributes["switchboard.outcome"] == "conflict"
    assert complete.attributes["switchboard.attempt.seq"] == 99
    assert {format(s.context.trace_id, "032x") for s in spans.get_finished_spans()} == {trace_id}
    _no_user_text(spans.get_finished_spans())

    # The attempt records the agent's trace; the drawer links it where a trace URL is set.
    assert TodoAttempt.objects.get(todo_id=todo_id, seq=1).trace_id == trace_id
    page = logged_in.get(f"/todos/{todo_id}/?attempt=1").content.decode()
    assert f"<code>{trace_id}</code>" in page
    settings.SWITCHBOARD_TRACE_URL = "https://traces.example/trace/{trace_id}"
    page = logged_in.get(f"/todos/{todo_id}/?attempt=1").content.decode()
    assert f'<a href="https://traces.example/trace/{trace_id}" rel="noopener noreferrer">' in page


def test_an_mcp_tool_call_is_a_span_too(spans, live_server, vend):
    _, token = vend("mcp-traced")
    trace_id, _, parent = _parent()
    response = loopback.post(
        f"{live_server.url}/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "create_todo", "arguments": {"title": SECRET}},
        },
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "traceparent": parent,
        },
        timeout=30,
    )
    assert response.status_code == 200, response.text
    [call] = _finished(spans, "switchboard create_todo")
    [server] = _finished(spans, "POST /mcp")
    assert call.parent.span_id == server.context.span_id
    assert format(call.context.trace_id, "032x") == trace_id
    assert call.attributes["switchboard.endpoint"] == "mcp-traced"
    _no_user_text(spans.get_finished_spans())


def test_the_client_sends_its_current_trace_or_traceparent(spans, live_server, vend, monkeypatch):
    _, token = vend("client-traced")
    sb = Client(live_server.url, token)
    tracer = trace.get_tracer("an agent")
    with tracer.start_as_current_span("the agent's step") as step:
        sb.create_todo(title="in the agent's trace")
    [server] = _finished(spans, "POST /api/v1/{verb}")
    assert server.context.trace_id == step.get_span_context().trace_id
    assert server.parent.span_id == step.get_span_context().span_id

    # No span current: TRACEPARENT from the environment (the relay's hand-off).
    spans.clear()
    trace_id, span_id, parent = _parent()
    monkeypatch.setenv("TRACEPARENT", parent)
    sb.create_todo(title="under TRACEPARENT")
    [server] = _finished(spans, "POST /api/v1/{verb}")
    assert format(server.context.trace_id, "032x") == trace_id
    assert format(server.parent.span_id, "016x") == span_id


def test_off_by_default_nothing_is_traced(live_server, vend):
    assert tracing.ON is False  # this run's environment sets no SWITCHBOARD_OTEL
    with tracing.request("x", {}) as span:
        assert span is None
    _, token = vend("untraced")
    _, _, parent = _parent()
    made = _post(live_server.url, "create_todo", token, {"title": "plain"}, traceparent=parent)
    _post(live_server.url, "claim_next", token, {}, traceparent=parent)
    assert TodoAttempt.objects.get(todo_id=made["todo"]["id"]).trace_id == ""


# --- A real OTLP/HTTP receiver and a served process -----------------------------------------


class _Receiver(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Collect)
        self.requests: list = []
        self.arrived = threading.Condition()


class _Collect(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers["Content-Length"]))
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        with self.server.arrived:
            self.server.requests.append((self.path, self.headers["Content-Type"], message))
            self.server.arrived.notify_all()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def _exported(receiver: _Receiver) -> list:
    """Every span the receiver has, as (name, trace id, span id, parent id, attributes)."""
    found = []
    for _, _, message in receiver.requests:
        for resource in message.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {a.key: a.value for a in span.attributes}
                    found.append(
                        (
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            attributes,
                            scope.scope.name,
                        )
                    )
    return found


def _actions(receiver: _Receiver) -> dict:
    """The exported spans that carry a Board action, by the action's name."""
    return {
        s[4]["switchboard.action"].string_value: s
        for s in _exported(receiver)
        if "switchboard.action" in s[4]
    }


def test_a_served_switchboard_exports_to_an_otlp_receiver(tmp_path, vend, make_user, settings):
    from django.conf import global_settings

    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS  # the server's own
    person = make_user("tracy")
    endpoint, token = vend("served-traced", team=person.teams.get())
    receiver = _Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    port = free_port()
    env = {
        **shell_env(),
        "SWITCHBOARD_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.server_port}",
        "OTEL_SERVICE_NAME": "switchboard-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "SWITCHBOARD_WEB_WORKERS": "1",
    }
    base = f"http://127.0.0.1:{port}"
    trace_id, span_id, parent = _parent()
    try:
        with _serving(["serve"], port, env, tmp_path / "serve.log"):
            made = _post(base, "create_todo", token, {"title": SECRET}, traceparent=parent)
            todo_id = made["todo"]["id"]
            # A person's Board action: sign in, open the todo, claim it.
            opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
            with opener.open(f"{base}/login/", timeout=30) as response:
                csrf = re.search(
                    r'name="csrfmiddlewaretoken" value="([^"]+)"', response.read().decode()
                )[1]
            form = {"csrfmiddlewaretoken": csrf, "username": "tracy", "password": "pw-for-tests"}
            opener.open(f"{base}/login/", data=urllib.parse.urlencode(form).encode(), timeout=30)
            with opener.open(f"{base}/todos/{todo_id}/", timeout=30) as response:
                page = response.read().decode()
            seen = re.search(r'name="seen" value="([^"]+)"', page)[1]
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
            claim = {"csrfmiddlewaretoken": csrf, "seen": seen}
            opener.open(
                f"{base}/todos/{todo_id}/claim/",
                data=urllib.parse.urlencode(claim).encode(),
                timeout=30,
            )
            # Another kind of Board action: pausing the endpoint, from its page.
            with opener.open(f"{base}/endpoints/{endpoint.pk}/", timeout=30) as response:
                page = response.read().decode()
            csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
            pause = urllib.parse.urlencode({"csrfmiddlewaretoken": csrf}).encode()
            opener.open(f"{base}/endpoints/{endpoint.pk}/pause/", data=pause, timeout=30)
            with receiver.arrived:
                receiver.arrived.wait_for(
                    lambda: (
                        {"claim", "endpoint-pause"} <= _actions(receiver).keys()
                        and any(s[0] == "switchboard create_todo" for s in _exported(receiver))
                    ),
                    timeout=20,
                )
    finally:
        receiver.shutdown()
    assert Todo.objects.get(pk=todo_id).state == "claimed"
    spans = _exported(receiver)
    assert {path for path, _, _ in receiver.requests} == {"/v1/traces"}
    assert {kind for _, kind, _ in receiver.requests} == {"application/x-protobuf"}
    resource = receiver.requests[0][2].resource_spans[0].resource
    assert any(
        a.key == "service.name" and a.value.string_value == "switchboard-under-test"
        for a in resource.attributes
    )
    [verb] = [s for s in spans if s[0] == "switchboard create_todo"]
    assert verb[1] == trace_id  # the agent's trace, continued
    assert verb[4]["switchboard.todo.id"].int_value == todo_id
    [server] = [s for s in spans if s[2] == verb[3]]
    assert server[3] == span_id  # the request span's parent: the agent's span
    # psycopg's spans (the OpenTelemetry project's instrumentation) under the verb.
    assert any(
        s[5].startswith("opentelemetry.instrumentation.psycopg") and s[1] == trace_id for s in spans
    )
    # The Board's action: Django's instrumentation's span, with the action's ids.
    actions = _actions(receiver)
    assert {"login", "claim", "endpoint-pause"} <= actions.keys()  # every Board POST
    claim_span, pause_span = actions["claim"], actions["endpoint-pause"]
    assert claim_span[5].startswith("opentelemetry.instrumentation.django")
    assert claim_span[4]["switchboard.todo.id"].int_value == todo_id
    assert claim_span[4]["switchboard.outcome"].string_value == "ok"
    assert pause_span[4]["switchboard.endpoint.id"].int_value == endpoint.pk
    assert pause_span[4]["switchboard.status"].int_value == 302  # back to the endpoint's page
    endpoint.refresh_from_db()
    assert endpoint.paused_at is not None
    for span in spans:
        assert SECRET not in str(span[4])


def test_the_async_client_sends_traceparent_too(spans, live_server, vend, monkeypatch):
    import asyncio

    from switchboard.client import AsyncClient

    _, token = vend("async-traced")
    trace_id, span_id, parent = _parent()
    monkeypatch.setenv("TRACEPARENT", parent)

    async def send():
        async with AsyncClient(live_server.url, token) as sb:
            await sb.create_todo(title="from asyncio")

    asyncio.run(send())
    [server] = _finished(spans, "POST /api/v1/{verb}")
    assert format(server.context.trace_id, "032x") == trace_id
    assert format(server.parent.span_id, "016x") == span_id


def test_a_tracestate_alone_is_not_sent(monkeypatch):
    from switchboard.client.common import trace_headers

    monkeypatch.delenv("TRACEPARENT", raising=False)
    monkeypatch.setenv("TRACESTATE", "vendor=1")
    assert trace_headers() == {}
    _, _, parent = _parent()
    monkeypatch.setenv("TRACEPARENT", parent)
    assert trace_headers() == {"traceparent": parent, "tracestate": "vendor=1"}


@pytest.mark.parametrize(
    "url",
    ["ftp://traces.example/{trace_id}", "https://traces.example/trace/", "javascript:{trace_id}"],
)
def test_a_trace_url_that_is_not_an_http_address_with_the_id_is_refused_at_start(url, tmp_path):
    import subprocess

    from tests.shell import SWITCHBOARD

    run = subprocess.run(
        [SWITCHBOARD, "check"],
        env={**shell_env(), "SWITCHBOARD_TRACE_URL": url},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "SWITCHBOARD_TRACE_URL must be an http(s) address with {trace_id} in it" in run.stderr
    assert "Traceback" not in run.stderr
