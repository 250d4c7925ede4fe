"""Outgoing webhooks: where they may go, how they are signed, and the one HTTP POST.

The SSRF guard: only ``http`` and ``https``; the host is resolved once and every address it
resolves to must be a public unicast address (no loopback, private, link-local, shared,
multicast, reserved or unspecified address, IPv4 or IPv6, an IPv4-mapped IPv6 address judged
by the IPv4 address inside), unless ``SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE`` is on. The POST then
connects to the address that was checked, never resolving the name again (a DNS answer that
changes between the check and the connection cannot redirect it), and sends the name in the
``Host`` header and as the TLS server name (SNI and certificate check). Redirects are never
followed: a 3xx is a failed delivery. No proxy settings from the environment apply.

Nothing here touches the database: the sender (queues/outbox.py) runs the POSTs in threads.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import ipaddress
import json
import secrets
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

# Each socket operation (connect, TLS handshake, send, each read) waits at most this long...
TIMEOUT_SECONDS = 5.0
# ...and the whole POST, resolution excluded, is cut off after this (a receiver that trickles
# its answer a byte at a time cannot hold a sender for longer).
DEADLINE_SECONDS = 10.0
ERROR_MAX_CHARS = 200
USER_AGENT = "Switchboard-Webhook/1"
SECRET_PREFIX = "sbw_"


class Refused(Exception):
    """The URL may not be used: wrong scheme, no host, or a forbidden address."""


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str
    host: str  # the name, for Host and SNI
    port: int
    path: str  # path and query
    address: str  # the checked IP address to connect to


@dataclass(frozen=True, slots=True)
class Answer:
    status: int | None  # None: no HTTP answer (refused, unreachable, timed out)
    error: str  # empty on a 2xx

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


# Deprecated (RFC 3879) but still routed inside some networks; Python calls it neither
# private nor reserved.
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")


def allow_private() -> bool:
    return bool(getattr(settings, "SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE", False))


def forbidden_reason(address: str) -> str | None:
    """What makes an IP address unfit as a webhook target ("a loopback address"), or None
    when it is public."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # drop an IPv6 zone
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _SITE_LOCAL:
            return "a site-local address"
        # Addresses that carry an IPv4 address inside (mapped, 6to4, Teredo's client) are
        # judged by it too: 2002:7f00:1:: is 127.0.0.1 reached through a 6to4 relay.
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        elif inner is not None and (reason := forbidden_reason(str(inner))):
            return f"{reason} inside an IPv6 address"
    for test, words in (
        ("is_unspecified", "an unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_reserved", "a reserved address"),
        ("is_private", "a private address"),
    ):
        if getattr(ip, test):
            return words
    if not ip.is_global:  # shared (100.64/10), documentation and other special ranges
        return "not a public address"
    return None


def _split(url: str) -> tuple[str, str, int, str]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"not a valid URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise Refused("only http:// and https:// URLs can be used")
    if not parts.hostname:
        raise Refused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise Refused("a user name or password in the URL is not supported")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80), path


def resolve(url: str) -> Target:
    """Check ``url`` and resolve its host once: the address to connect to. Raises Refused."""
    scheme, host, port, path = _split(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise Refused(f"cannot resolve {host} ({exc})") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise Refused(f"cannot resolve {host}")
    if not allow_private():
        # Every answer must be public: a name that also points inside is refused whole.
        for address in addresses:
            if reason := forbidden_reason(address):
                where = f"{address} is" if address == host else f"{host} resolves to {address},"
                raise Refused(
                    f"{where} {reason}; webhooks go only to public addresses "
                    "(SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE allows others)"
                )
    return Target(scheme=scheme, host=host, port=port, path=path, address=addresses[0])


def url_problem(url: str) -> str | None:
    """For a form, at save time: why this URL would be refused, or None. A host that does not
    resolve now is not refused here (it may later); the delivery reports it if it still fails."""
    try:
        resolve(url)
    except Refused as exc:
        if str(exc).startswith("cannot resolve"):
            return None
        return f"This URL cannot be used: {exc}."
    return None


def new_secret() -> str:
    """A signing secret for a sink or a doorbell: shown once, kept in clear (it signs)."""
    return SECRET_PREFIX + secrets.token_urlsafe(32)  # 256 bits


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-Switchboard-Signature`` value: HMAC-SHA256 of ``<timestamp>.<body>``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def encode(payload: dict) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def post(
    url: str,
    *,
    body: bytes,
    secret: str,
    delivery_id: int,
    event: str,
    extra_headers: dict[str, str] | None = None,
) -> Answer:
    """POST ``body`` to ``url``, signed, following no redirect (with ``extra_headers``: an A2A
    push's token and authentication). Never raises."""
    started = time.monotonic()
    try:
        target = resolve(url)
    except Refused as exc:
        return Answer(None, f"refused: {exc}"[:ERROR_MAX_CHARS])
    timestamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Switchboard-Delivery": str(delivery_id),
        "X-Switchboard-Event": event,
        "X-Switchboard-Timestamp": timestamp,
        "X-Switchboard-Signature": sign(secret, timestamp, body),
        "Connection": "close",
        **(extra_headers or {}),
    }
    connection = _connection(target)
    # The deadline: shut the socket from outside, which ends any read it is blocked in.
    watchdog = threading.Timer(max(0.1, DEADLINE_SECONDS - (time.monotonic() - started)), _cut)
    watchdog.args = (connection,)
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        status = response.status
        if 200 <= status < 300:
            return Answer(status, "")
        if 300 <= status < 400:
            return Answer(status, f"HTTP {status}: a redirect, not followed")
        snippet = response.read(ERROR_MAX_CHARS).decode("utf-8", "replace")
        text = " ".join(f"HTTP {status} {response.reason} {snippet}".split())
        return Answer(status, text[:ERROR_MAX_CHARS])
    except (OSError, http.client.HTTPException, ssl.SSLError, ValueError) as exc:
        late = time.monotonic() - started >= DEADLINE_SECONDS
        words = "timed out" if late or isinstance(exc, TimeoutError) else _describe(exc)
        return Answer(None, f"{words} ({target.host} at {target.address})"[:ERROR_MAX_CHARS])
    finally:
        watchdog.cancel()
        connection.close()


def _describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


def _cut(connection: http.client.HTTPConnection) -> None:
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the checked address; ``host`` stays the name (the Host header)."""

    def __init__(self, target: Target) -> None:
        super().__init__(target.host, target.port, timeout=TIMEOUT_SECONDS)
        self._address = target.address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """As above, with TLS: the name is the server name (SNI) and what the certificate must
    match; the system's trust store checks it."""

    def __init__(self, target: Target) -> None:
        self._tls = ssl.create_default_context()
        super().__init__(target.host, target.port, timeout=TIMEOUT_SECONDS, context=self._tls)
        self._address = target.address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def _connection(target: Target) -> http.client.HTTPConnection:
    return _PinnedHTTPS(target) if target.scheme == "https" else _PinnedHTTP(target)
