"""The gunicorn worker ``switchboard serve`` runs: uvicorn's, with uvloop and httptools (with
a deadline for each request's headers), the lifespan on, and the open-files limit raised so
one worker can hold thousands of waiting connections (docs/deploy.md: file descriptors).

uvicorn has no timeout before a request's headers: a connection that sends nothing, half a
request line or half its headers stays open for as long as the client likes (in the second
hardening round enough such sockets used up a worker's open files, and real requests failed;
docs/benchmarks.md, "The second hardening round"). ``HttpToolsProtocol`` here gives every
request's line and headers SWITCHBOARD_HEADER_TIMEOUT_SECONDS: from the connection's opening
for its first request, from its first byte for each later one on a kept connection (the idle
time between is the keep-alive's, SWITCHBOARD_WEB_KEEPALIVE, to bound). A request whose headers
are late is answered 408 and closed; a new connection that sent nothing is closed.

Nor has uvicorn a bound on their size: an 8 MB header was answered 200, and a connection that
kept streaming one was buffered (httptools joins a header's pieces as they come) until the
deadline cut it (docs/benchmarks.md, "The third hardening round"). Here each request's line and
headers may take SWITCHBOARD_MAX_HEADER_BYTES and SWITCHBOARD_MAX_HEADERS lines; past either the
request is answered 431 and the connection closed. The bytes are counted as they arrive, before
the parser sees (and keeps) them, so a connection holds at most that much of a request's head."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import resource
import signal
from asyncio import TimerHandle

import httptools
from django.conf import settings
from gunicorn.arbiter import Arbiter
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _UvicornHttpTools
from uvicorn.server import Server
from uvicorn_worker import UvicornWorker

log = logging.getLogger("switchboard.serve")


_LATE_BODY = b"The request headers did not arrive in time.\n"
LATE_HEADERS = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_LATE_BODY), _LATE_BODY)
)
_LARGE_BODY = b"The request line and headers are too large.\n"
LARGE_HEADERS = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_LARGE_BODY), _LARGE_BODY)
)
# After a 431 the client may still be sending its head: what comes is read and dropped for at
# most this long, the write side already shut, so that the answer is read before the close.
# Closing at once with unread bytes makes the kernel send a reset, which can destroy the
# answer on its way (RFC 9112, section 9.6, on closing a connection).
LINGER_SECONDS = 2.0


class _TooManyHeaders(Exception):
    """Raised from the parser's header callback, which stops the parser where it stands."""


class HttpToolsProtocol(_UvicornHttpTools):
    """uvicorn's httptools protocol with a deadline for each request's line and headers, and a
    ceiling on their size and number."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: TimerHandle | None = None
        self._bytes_waiting = False  # some of the awaited request has arrived
        self._max_header_bytes: int = settings.SWITCHBOARD_MAX_HEADER_BYTES
        self._max_headers: int = settings.SWITCHBOARD_MAX_HEADERS
        # The bytes arriving are a request's line and headers (not a body): counted, from the
        # end of the request before, against the ceiling.
        self._in_head = True
        self._head_bytes = 0
        self._heads_done = 0  # requests whose headers were complete, to tell a chunk's end
        self._header_lines = 0
        self._refused = False  # answered 431: whatever else comes is dropped
        self._linger: TimerHandle | None = None

    def _await_headers(self) -> None:
        self._cancel_header_deadline()
        self._bytes_waiting = False
        self._header_deadline = self.loop.call_later(
            settings.SWITCHBOARD_HEADER_TIMEOUT_SECONDS, self._headers_late
        )

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being answered (its headers came): not ours to cut
        if self._bytes_waiting:
            self.transport.write(LATE_HEADERS)
        self.transport.close()

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        between = self.cycle is None or self.cycle.response_complete
        if self._header_deadline is None and between and not self.pipeline:
            # A kept connection's next request began: its headers are due from now (its
            # idle time before was the keep-alive's to bound).
            self._await_headers()
        if self._header_deadline is not None and data.strip():
            self._bytes_waiting = True
        while data and not self._refused and not self.transport.is_closing():
            # Only what is left of the allowance goes to the parser: if the headers are not
            # complete within it, they are too large, whatever follows. A body goes in slices
            # of the same size, so that the head after it is counted from within one slice
            # of its start (what came in that slice is not counted).
            in_head, heads_done = self._in_head, self._heads_done
            allowance = (
                self._max_header_bytes - self._head_bytes if in_head else self._max_header_bytes
            )
            piece, data = data[:allowance], data[allowance:]
            if in_head:
                self._head_bytes += len(piece)
            if not self._feed(piece):
                return
            if data and in_head and self._heads_done == heads_done:
                self._refuse()

    def _feed(self, data: bytes) -> bool:
        """uvicorn's own ``data_received``, with one more way for the parser to stop; false
        when the parser stopped and the rest of the chunk is not for it."""
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
            return True
        except httptools.HttpParserCallbackError as error:
            if isinstance(error.__context__, _TooManyHeaders):
                self._refuse()
            else:
                self._bad_request()
        except httptools.HttpParserError:
            self._bad_request()
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        return False

    def _bad_request(self) -> None:
        msg = "Invalid HTTP request received."
        self.logger.warning(msg)
        self.send_400_response(msg)

    def _refuse(self) -> None:
        """Answer 431 and close: the request's head passed a ceiling. If an earlier request on
        the connection is still being answered, its answer goes out first and the connection
        closes after it, with no 431 (which would land inside that answer)."""
        self._refused = True
        self._cancel_header_deadline()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
            return
        self.transport.write(LARGE_HEADERS)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()

    def on_message_begin(self) -> None:
        self._header_lines = 0
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_lines += 1
        if self._header_lines > self._max_headers:
            raise _TooManyHeaders
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._cancel_header_deadline()
        self._in_head = False
        self._heads_done += 1
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True
        self._head_bytes = 0

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_deadline()
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)


class DrainingServer(Server):
    """uvicorn's server, which on the first SIGTERM (or SIGINT, SIGQUIT) drains before it
    stops: waiting long-polls are answered at once and every answer closes its connection
    (agents.waiting.Drain), the Board's streams end (board/live.py), while uvicorn stops accepting and lets the requests in flight
    finish."""

    def handle_exit(self, sig: int, frame) -> None:
        if not self.should_exit:
            from switchboard.agents.waiting import drain
            from switchboard.board import live

            log.info("draining: waiting long-polls answered now, connections closed")
            loop = asyncio.get_running_loop()
            drain.begin(loop)
            live.hubs.of(loop).stop()  # the Board's streams end; browsers reconnect elsewhere
        super().handle_exit(sig, frame)


class Worker(UvicornWorker):
    CONFIG_KWARGS = {"loop": "uvloop", "http": HttpToolsProtocol, "lifespan": "on"}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # uvicorn writes its own access lines; none when gunicorn's access log is off.
        self.config.access_log = bool(self.cfg.accesslog)

    def init_process(self) -> None:
        raise_open_files_limit()
        die_with_parent(self.ppid)
        super().init_process()

    async def _serve(self) -> None:
        # uvicorn_worker's own, with the draining server.
        self.config.app = self.wsgi
        server = DrainingServer(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            raise SystemExit(Arbiter.WORKER_BOOT_ERROR)


# prctl(2): the signal this process gets when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Have the kernel send this worker SIGTERM when its master dies (``kill -9`` of the
    master left its workers serving, holding the port, and ``serve`` could not start again
    on it): it drains and exits like any stopped worker. Where prctl is not there (not
    Linux), nothing changes."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        log.info("prctl(PR_SET_PDEATHSIG) is not available: workers outlive a killed master")
        return
    if os.getppid() != parent:  # the master died before the signal was asked for
        os.kill(os.getpid(), signal.SIGTERM)


def raise_open_files_limit() -> int:
    """Raise this process's soft limit on open files to its hard limit (each connection is
    one); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("could not raise the open-files limit above %s", soft)
    return soft
