"""What goes over the wire, both ways, in one place: request bodies decoded into a verb's
params (strictly: wrong types, unknown fields and missing required fields are ``invalid``, a
misspelt argument must not be silently ignored), answers encoded, and the one error shape,
``{"error": {"code", "message"}}``, with its status and headers (``DomainError.status``)."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import msgspec.inspect

from switchboard.agents.verbs import Verb
from switchboard.queues import bounds
from switchboard.queues.errors import DomainError, Invalid

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
        # Perhaps a whole number written as 93.0: decoded again, generically, to see (the
        # typed decoder stops at the first error, so the rest may not even be JSON).
        try:
            arguments = msgspec.json.decode(body)
        except (msgspec.DecodeError, RecursionError):
            raise invalid_arguments(exc) from None
        if not _whole_numbers_as_integers(arguments, verb.params):
            raise invalid_arguments(exc) from None
        return convert(verb, arguments)
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
        if not _whole_numbers_as_integers(arguments, verb.params):
            raise invalid_arguments(exc) from None
        try:
            return msgspec.convert(arguments, verb.params)
        except msgspec.ValidationError as again:
            raise invalid_arguments(again) from None


def _whole_numbers_as_integers(value: object, kind: type) -> bool:
    """Rewrite, in place, every whole-number float (93.0) that ``value`` holds where ``kind``
    (a verb's params) takes an integer, as that integer; true if there was one. JSON Schema
    counts 93.0 as an integer (the OpenAPI document and the MCP tools' schemas say
    ``integer``), msgspec does not: so the API takes what its schemas admit. Nowhere else
    (a ``result`` keeps its 93.0), and never a string ("93" stays invalid)."""
    return _rewrite(value, msgspec.inspect.type_info(kind))


def _rewrite(value: object, info: msgspec.inspect.Type) -> bool:
    info = _bare(info)
    if isinstance(info, msgspec.inspect.StructType) and isinstance(value, dict):
        changed = False
        for field in info.fields:
            if field.encode_name not in value:
                continue
            item = value[field.encode_name]
            if _takes_integer(field.type) and type(item) is float and item.is_integer():
                value[field.encode_name] = int(item)
                changed = True
            elif _rewrite(item, field.type):
                changed = True
        return changed
    if isinstance(info, msgspec.inspect.UnionType):
        return any(_rewrite(value, option) for option in info.types)
    return False


def _takes_integer(info: msgspec.inspect.Type) -> bool:
    """An integer, or an integer or null (not a number of any kind: that takes 93.0 as is)."""
    info = _bare(info)
    if isinstance(info, msgspec.inspect.UnionType):
        options = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        return len(options) == 1 and _takes_integer(options[0])
    return isinstance(info, msgspec.inspect.IntType)


def _bare(info: msgspec.inspect.Type) -> msgspec.inspect.Type:
    """The type under its ``Annotated`` metadata (bounds, a description)."""
    while isinstance(info, msgspec.inspect.Metadata):
        info = info.type
    return info


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
