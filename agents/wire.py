"""What goes over the wire, both ways, in one place: request bodies decoded into a verb's
params (strictly: wrong types, unknown fields and missing required fields are ``invalid``, a
misspelt argument must not be silently ignored), answers encoded, and the one error shape,
``{"error": {"code", "message"}}``, with its status and headers (``DomainError.status``)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from agents.verbs import Verb
from queues import bounds
from queues.errors import DomainError, Invalid

MAX_BODY_BYTES = bounds.REQUEST_MAX_BYTES

_encoder = msgspec.json.Encoder()
_decoders: dict[type, msgspec.json.Decoder] = {}
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def encode(data: object) -> bytes:
    return _encoder.encode(data)


def decode(verb: Verb, body: bytes) -> Any:
    """An HTTP body as ``verb``'s params (an empty body is ``{}``)."""
    decoder = _decoders.get(verb.params)
    if decoder is None:
        decoder = _decoders[verb.params] = msgspec.json.Decoder(verb.params)
    try:
        return decoder.decode(body or b"{}")
    except msgspec.ValidationError as exc:
        raise invalid_arguments(exc) from None
    except msgspec.DecodeError as exc:
        if _SURROGATE_ESCAPE.search(body):
            # msgspec calls a lone surrogate escape "Input data was truncated".
            raise Invalid(
                "The body holds a lone UTF-16 surrogate escape (such as \\ud800), which is"
                " not text."
            ) from None
        raise Invalid(f"The body is not valid JSON: {exc}") from None
    except RecursionError:
        # msgspec walks nesting on the C stack; a 3 KB body of brackets overflows it.
        raise Invalid("The body nests too deeply.") from None


def convert(verb: Verb, arguments: dict[str, Any]) -> Any:
    """An MCP tool's arguments (already JSON) as ``verb``'s params, in the words of
    ``decode``."""
    try:
        return msgspec.convert(arguments, verb.params)
    except msgspec.ValidationError as exc:
        raise invalid_arguments(exc) from None


def invalid_arguments(exc: msgspec.ValidationError) -> Invalid:
    return Invalid(f"Invalid arguments: {exc}")


def error_parts(error: DomainError) -> tuple[int, bytes, list[tuple[str, str]]]:
    """A domain error as the API answers it: status, body and headers."""
    headers = [("content-type", "application/json"), ("cache-control", "no-store")]
    if error.status == 401:
        headers.append(("www-authenticate", 'Bearer realm="switchboard"'))
    if "retry_after" in error.extra:
        headers.append(("retry-after", str(max(1, round(error.extra["retry_after"])))))
    return error.status, encode(error.as_dict()), headers
