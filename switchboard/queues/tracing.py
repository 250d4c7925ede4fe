"""OpenTelemetry, opt-in: ``SWITCHBOARD_OTEL=1`` and the standard ``OTEL_*`` variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_TRACES_EXPORTER``: ``otlp``,
``console`` or ``none``), with the ``otel`` extra installed (docs/tracing.md).

Off (the default), ``ON`` is False, nothing of OpenTelemetry is imported, and every helper
here returns at its first line. On, ``setup()`` (each serving process, before Django loads
its middleware) installs the SDK's tracer provider with a batching OTLP/HTTP exporter and the
OpenTelemetry project's own Django and psycopg instrumentation; the agents' front door opens a
server span per request that continues the agent's W3C ``traceparent``, and each verb a span
of its own (``switchboard <verb>``) with the todo, attempt, endpoint, team and outcome as
attributes. No user text is ever an attribute: no title, body, summary, question or answer."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

ON = os.environ.get("SWITCHBOARD_OTEL", "").strip().lower() in ("1", "true", "yes", "on")
TRACER = "switchboard"
_set_up = False


def setup() -> None:
    """Install the tracer provider and the instrumentation, once per process (a no-op when
    off, or when something else set a provider first, as a test does)."""
    global _set_up
    if not ON or _set_up:
        return
    _set_up = True
    from opentelemetry import trace
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
    )

    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        resource = Resource.create(
            {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "switchboard"}
        )
        provider = TracerProvider(resource=resource)
        exporter: SpanExporter | None
        chosen = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
        if chosen == "console":
            exporter = ConsoleSpanExporter()
        elif chosen == "none":
            exporter = None
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        if exporter is not None:
            provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    DjangoInstrumentor().instrument()
    PsycopgInstrumentor().instrument(enable_commenter=False)


def request(name: str, headers: dict[str, str]) -> AbstractContextManager[Any]:
    """A server span for one request to the agents' front door, the child of the caller's
    ``traceparent`` when it sent one."""
    if not ON:
        return nullcontext(None)
    return _span(name, headers=headers, server=True)


def verb(name: str, endpoint: Any, params: Any) -> AbstractContextManager[Any]:
    """The span of one agent verb (HTTP or MCP), its ids noted from the start."""
    if not ON:
        return nullcontext(None)
    attributes = {
        "switchboard.verb": name,
        "switchboard.endpoint": endpoint.agent_id,
        "switchboard.team": endpoint.team_id,
    }
    for field, key in (
        ("todo_id", "switchboard.todo.id"),
        ("attempt_seq", "switchboard.attempt.seq"),
    ):
        value = getattr(params, field, None)
        if isinstance(value, int):
            attributes[key] = value
    return _span(f"switchboard {name}", attributes=attributes)


def answered(span: Any, result: dict) -> None:
    """What a verb's answer says, on its span: the todo, its state, the attempt."""
    if span is None:
        return
    todo = result.get("todo") if isinstance(result, dict) else None
    if isinstance(todo, dict):
        span.set_attribute("switchboard.todo.id", todo.get("id"))
        span.set_attribute("switchboard.todo.state", todo.get("state") or "")
    seq = result.get("attempt_seq") if isinstance(result, dict) else None
    if isinstance(seq, int):
        span.set_attribute("switchboard.attempt.seq", seq)
    span.set_attribute("switchboard.outcome", "ok")


def refused(span: Any, code: str) -> None:
    """A verb refused (its error's code: not_found, conflict, …) or gone wrong."""
    if span is not None:
        span.set_attribute("switchboard.outcome", code)


def trace_id() -> str:
    """The current trace's id (32 hex digits), which an attempt opened now records: the
    agent's own trace when it sent a ``traceparent``. Empty when tracing is off or no span
    is current."""
    if not ON:
        return ""
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


def note(**attributes: Any) -> None:
    """Attributes on the current span (a Board action's, which Django's instrumentation
    opened): ``switchboard.<name>``."""
    if not ON:
        return
    from opentelemetry import trace

    span = trace.get_current_span()
    for name, value in attributes.items():
        if value is not None:
            span.set_attribute(f"switchboard.{name}", value)


@contextmanager
def _span(name: str, *, headers: dict | None = None, attributes=None, server: bool = False):
    from opentelemetry import propagate, trace

    context = propagate.extract(headers) if headers is not None else None
    kind = trace.SpanKind.SERVER if server else trace.SpanKind.INTERNAL
    tracer = trace.get_tracer(TRACER)
    with tracer.start_as_current_span(
        name, context=context, kind=kind, attributes=attributes
    ) as span:
        yield span
