"""How MCP's messages are framed over HTTP beyond one JSON object each way: a client that
accepts only an event stream gets its answer as one SSE event, and a JSON-RPC batch is
answered on the one revision that has them.

Batches are for 2025-03-26 (a client of that revision sends no ``MCP-Protocol-Version``
header, so a request without one is taken to be of it). Its streamable HTTP transport says
the body of a POST may be "an array batching one or more requests and/or notifications",
answered with one JSON-RPC response per request; the later revisions removed batches, and
django-mcpz answers an array as an invalid request.

Each message of a batch is answered as if it had come alone (``one``: agents/mcp.py's own
path through django-mcpz's view), all at once, as JSON-RPC lets a server: a batch of
long-polls waits as long as its longest, not the sum. The answers come back in the order of
the messages that get one; a notification gets none. No real client sends a batch (the
official Python and TypeScript SDKs send one message a POST, docs/api.md), so this is the
specification's due, kept small."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus

import msgspec
from django.http import HttpResponse

# Messages one batch may carry: each runs at once beside the others (the body's mebibyte
# bounds their size, this their number).
MAX_MESSAGES = 100
BATCH_REVISION = "2025-03-26"


class BadBatch(Exception):
    """A batch refused whole: the array is empty, too long or not JSON."""


def is_batch(raw_headers: list[tuple[bytes, bytes]], body: bytes) -> bool:
    """Is ``body`` a JSON array sent on the 2025-03-26 revision (no MCP-Protocol-Version
    header, or that one)? An array on any other revision goes to django-mcpz's view, which
    answers it as an invalid request, as those revisions say."""
    if body.lstrip()[:1] != b"[":
        return False
    for name, value in raw_headers:
        if name.lower() == b"mcp-protocol-version":
            return value.decode("latin-1").strip() == BATCH_REVISION
    return True


async def answers(body: bytes, one: Callable[[bytes], Awaitable[HttpResponse]]) -> list[bytes]:
    """The JSON-RPC responses to the batch in ``body``, each the body of ``one``'s answer to
    its message alone; none for a notification (django-mcpz answers one 202, empty)."""
    try:
        messages = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        raise BadBatch("Parse error: the body is not JSON.") from None
    if not messages:
        raise BadBatch("Invalid Request: an empty batch.")
    if len(messages) > MAX_MESSAGES:
        raise BadBatch(f"Invalid Request: a batch of at most {MAX_MESSAGES} messages.")
    replies = await asyncio.gather(*(one(msgspec.json.encode(each)) for each in messages))
    return [reply.content for reply in replies if reply.status_code != HTTPStatus.ACCEPTED]


def has_request(body: bytes) -> bool:
    """Does the batch hold a request (a message with a method and an id)? One made only of
    notifications and responses is answered 202 when all were accepted, else with an error
    status, never 200 (2025-03-26: "If the input consists solely of (any number of) JSON-RPC
    responses or notifications ...")."""
    messages = msgspec.json.decode(body)
    return any(isinstance(each, dict) and "method" in each and "id" in each for each in messages)


def accepts_only_event_stream(raw_headers: list[tuple[bytes, bytes]]) -> bool:
    """Does the request's Accept take ``text/event-stream`` and not JSON? (Clients send
    both, as the specification asks; one that sends only the event stream gets its answer
    as one.)"""
    accept = b",".join(value for name, value in raw_headers if name.lower() == b"accept")
    weights: dict[str, float] = {}
    for part in accept.decode("latin-1").split(","):
        media, *parameters = part.split(";")
        weight = 1.0
        for parameter in parameters:
            key, _, value = parameter.partition("=")
            if key.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights[media.strip().lower()] = weight
    takes_json = any(
        weights.get(kind, 0) > 0 for kind in ("application/json", "application/*", "*/*")
    )
    takes_stream = any(weights.get(kind, 0) > 0 for kind in ("text/event-stream", "text/*"))
    return takes_stream and not takes_json


def as_event_stream(response: HttpResponse) -> HttpResponse:
    """A JSON-RPC answer (200, JSON) as an SSE stream of one event, which the streamable HTTP
    transport allows for any request ("the server MUST return either Content-Type:
    application/json ... or Content-Type: text/event-stream"); other answers (202, an HTTP
    error) as they are."""
    if response.status_code != HTTPStatus.OK or not response.get("Content-Type", "").startswith(
        "application/json"
    ):
        return response
    # One data line per line of the JSON (msgspec writes none but the last: one line).
    data = b"".join(b"data: " + line + b"\n" for line in response.content.split(b"\n"))
    stream = HttpResponse(b"event: message\n" + data + b"\n")
    for name, value in response.items():
        if name.lower() not in ("content-type", "content-length"):
            stream[name] = value
    stream["Content-Type"] = "text/event-stream"
    stream["Cache-Control"] = "no-store"
    stream["X-Accel-Buffering"] = "no"  # the specification's advice for proxies (nginx)
    return stream


def too_deep(body: bytes, most: int) -> bool:
    """Does the body nest deeper than ``most``? Judged on the brackets alone, outside
    strings, so that no decoder ever walks a body that deep (a few KB of brackets overflow
    a C-stack walk: a RecursionError, once a 500)."""
    if body.count(b"[") + body.count(b"{") <= most:
        return False  # cannot be deeper: the usual small call costs two counts
    depth = 0
    for token in _STRUCTURE.finditer(body):
        char = token.group()
        if char in (b"[", b"{"):
            depth += 1
            if depth > most:
                return True
        elif char in (b"]", b"}"):
            depth -= 1
    return False


# A JSON string (skipped whole) or one bracket.
_STRUCTURE = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
