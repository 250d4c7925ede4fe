"""The WSGI application: the site (Board, admin, sign-in) with Django's full middleware, and
the agent surface (``/api/``, ``/mcp``) with only what it uses.

Agent requests carry a bearer token, not a session: they need no session, CSRF, auth, message
or clickjacking middleware, and every agent request paid for them (bench/: the request
handling is most of a verb's CPU through gunicorn).
"""

import os

from django.core.handlers.wsgi import WSGIHandler
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "switchboard.settings")

AGENT_PREFIXES = ("/api/", "/mcp")
AGENT_MIDDLEWARE = ["django.middleware.security.SecurityMiddleware"]


class AgentHandler(WSGIHandler):
    """Django's WSGI handler with the agent middleware list."""

    def load_middleware(self, is_async: bool = False) -> None:
        from django.conf import settings

        site_middleware = settings.MIDDLEWARE
        settings.MIDDLEWARE = AGENT_MIDDLEWARE  # read once, here, at start-up
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = site_middleware


class Dispatch:
    def __init__(self) -> None:
        self.site = get_wsgi_application()  # runs django.setup()
        self.agents = AgentHandler()

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        handler = self.agents if path.startswith(AGENT_PREFIXES) else self.site
        return handler(environ, start_response)


application = Dispatch()
