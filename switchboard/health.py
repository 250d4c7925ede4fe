"""``/healthz``: for a load balancer. 200 when this process can reach PostgreSQL (one
``SELECT 1``), 503 otherwise; plain text, no session, no user data."""

from __future__ import annotations

from django.db import Error as DatabaseError
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from queues import db
from queues.db.availability import PING


@never_cache
@require_GET
def healthz(request):
    try:
        db.fetch(PING, {})
    except DatabaseError:
        return HttpResponse("database unavailable\n", status=503, content_type="text/plain")
    return HttpResponse("ok\n", content_type="text/plain")
