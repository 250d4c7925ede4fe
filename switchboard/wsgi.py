"""The WSGI application, for the site alone (the Board, admin, sign-in), under a WSGI server
of your own. The agents' verbs, MCP and /metrics are served by the ASGI application only
(switchboard/asgi.py, what ``switchboard serve`` runs): under WSGI those paths are the
site's, which has no such pages."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings")

from switchboard.queues import tracing  # noqa: E402

tracing.setup()  # SWITCHBOARD_OTEL=1: before Django loads its middleware
application = get_wsgi_application()
