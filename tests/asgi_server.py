"""A live server for tests that is the product's server: switchboard.asgi.application under
uvicorn (the HTTP protocol and event loop ``switchboard serve`` runs), on a thread of the test
process, against the test database. It stands in for pytest-django's ``live_server`` (same
``url``; tests/conftest.py overrides that fixture with it), so every API, MCP and browser test
runs through the ASGI application."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

from django.test.utils import modify_settings


class AsgiLiveServer:
    def __init__(self, host: str = "localhost") -> None:
        import uvicorn

        from switchboard.asgi import application
        from switchboard.workers import HttpToolsProtocol

        self.host = host
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # As gunicorn sets it on the sockets it hands its workers (gunicorn/sock.py), and
        # accepted connections inherit it. asyncio sets it itself only on a socket made with
        # proto IPPROTO_TCP, not on this one (proto 0): without it a response's head and body,
        # two writes, met the client's delayed ACK, and every request here took 44 ms.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        # Requests being answered now (a Board stream counts until it closes): a test's
        # teardown waits for none before the test database is emptied (tests/board/conftest.py).
        self.in_flight = 0

        async def counted(scope, receive, send) -> None:
            if scope["type"] != "http":
                await application(scope, receive, send)
                return
            self.in_flight += 1
            try:
                await application(scope, receive, send)
            finally:
                self.in_flight -= 1

        config = uvicorn.Config(
            counted,
            lifespan="on",
            log_level="warning",
            access_log=False,
            timeout_keep_alive=5,
            loop="asyncio",
            http=HttpToolsProtocol,  # the product's: a deadline for each request's headers
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="asgi-live-server", daemon=True)
        # pytest-django's helper enables these for each test that uses the server.
        self._live_server_modified_settings = modify_settings(ALLOWED_HOSTS={"append": host})
        self._thread.start()
        for _ in range(500):
            if self._server.started or not self._thread.is_alive():
                break
            threading.Event().wait(0.02)
        if not self._server.started:
            raise RuntimeError("the ASGI test server did not start")

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self.loop = asyncio.get_running_loop()
        await self._server.serve(sockets=[self._socket])

    def token_cache(self):
        """The server's token cache (agents/token_cache.py), its event loop's."""
        from switchboard.agents.token_cache import caches

        return caches.of(self.loop)

    def forgets(self, endpoint, timeout: float = 5.0) -> float:
        """Wait until the server has heard that ``endpoint`` changed (its token cache no
        longer holds it); the seconds that took. A change committed is heard a few
        milliseconds later (tests/agents/test_token_cache.py); a test that changes an
        endpoint it has used and then asks again waits for that, as another process would."""
        started = time.monotonic()
        while self.token_cache().holds(endpoint.pk):
            if time.monotonic() - started > timeout:
                raise AssertionError(f"the server still trusts endpoint {endpoint.pk}")
            time.sleep(0.002)
        return time.monotonic() - started

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)
        self._socket.close()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.url

    def __add__(self, other: str) -> str:
        return f"{self}{other}"

    def __repr__(self) -> str:
        return f"<AsgiLiveServer listening at {self.url}>"
