"""With tracing on (SWITCHBOARD_OTEL=1, queues/tracing.py), every Board action's ids on the
span Django's instrumentation opened for its request: ``switchboard.action`` (the URL's
name: ``todo-answer``, ``endpoint-pause``, ``triage``, …; a drawer action names itself, e.g.
``claim``), ``switchboard.todo.id`` and ``switchboard.endpoint.id`` from the URL, and
``switchboard.status``, the answer's HTTP status. Installed by the settings only when
tracing is on: off, no request passes through it."""

from __future__ import annotations

from django.utils.deprecation import MiddlewareMixin

from switchboard.queues import tracing


class ActionSpans(MiddlewareMixin):
    def process_view(self, request, view, args, kwargs):
        if request.method == "POST" and request.resolver_match is not None:
            tracing.note(
                action=request.resolver_match.url_name,
                **{"todo.id": kwargs.get("todo_id"), "endpoint.id": kwargs.get("endpoint_id")},
            )
        return None

    def process_response(self, request, response):
        if request.method == "POST":
            tracing.note(status=response.status_code)
        return response
