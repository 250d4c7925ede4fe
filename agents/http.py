"""The agent HTTP API: ``POST /api/v1/<verb>`` with a JSON body and a Bearer endpoint token.

A thin adapter: authenticate, check the frozen verb set, decode the body with the verb's
schema, call the shared handler, encode. One error shape, ``{"error": {"code", "message"}}``,
and one mapping from domain errors to status codes (``DomainError.status``).
"""

from __future__ import annotations

import re

import msgspec
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from agents import schemas, verbs, waiting
from agents.auth import endpoint_for
from queues import bounds
from queues.errors import (
    DATABASE_ERRORS,
    DomainError,
    Invalid,
    NotFound,
    from_database_error,
)

MAX_BODY_BYTES = bounds.REQUEST_MAX_BYTES
_encoder = msgspec.json.Encoder()
_decoders = {verb: msgspec.json.Decoder(params) for verb, (params, _, _) in schemas.VERBS.items()}


def encode(data: object) -> bytes:
    return _encoder.encode(data)


def error_parts(error: DomainError) -> tuple[int, bytes, list[tuple[str, str]]]:
    """A domain error as the API answers it: status, body and headers (the one error shape,
    for the WSGI view and the ASGI app alike)."""
    headers = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
    if error.status == 401:
        headers.append(("WWW-Authenticate", 'Bearer realm="switchboard"'))
    if "retry_after" in error.extra:
        headers.append(("Retry-After", str(max(1, round(error.extra["retry_after"])))))
    return error.status, encode(error.as_dict()), headers


def json_response(data: object, status: int = 200) -> HttpResponse:
    response = HttpResponse(encode(data), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def error_response(error: DomainError) -> HttpResponse:
    status, body, headers = error_parts(error)
    response = HttpResponse(body, status=status)
    for name, value in headers:
        response[name] = value
    return response


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def decode(verb: str, body: bytes):
    try:
        return _decoders[verb].decode(body or b"{}")
    except msgspec.ValidationError as exc:
        raise Invalid(f"Invalid arguments: {exc}") from None
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


def read_body(request: HttpRequest) -> bytes:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise Invalid("Content-Length is not a number.") from None
    if declared > MAX_BODY_BYTES:
        raise Invalid(f"The body is over {MAX_BODY_BYTES} bytes.")
    try:
        body = request.body
    except RequestDataTooBig:
        raise Invalid(f"The body is over {MAX_BODY_BYTES} bytes.") from None
    if len(body) > MAX_BODY_BYTES:
        raise Invalid(f"The body is over {MAX_BODY_BYTES} bytes.")
    return body


@csrf_exempt
def verb_view(request: HttpRequest, verb: str) -> HttpResponse:
    if request.method != "POST":
        response = error_response(Invalid("Use POST with a JSON body."))
        response.status_code = 405
        response["Allow"] = "POST"
        return response
    try:
        endpoint = endpoint_for(request)
        if verb not in verbs.HANDLERS:
            raise NotFound(f"No such verb. Verbs: {', '.join(verbs.HANDLERS)}.")
        verbs.check_allowed(endpoint, verb)
        params = decode(verb, read_body(request))
        result = waiting.call(endpoint, verb, params)
    except DomainError as error:
        return error_response(error)
    except DATABASE_ERRORS as exc:
        return error_response(from_database_error(exc, verb=verb))
    return json_response(result)


def capabilities_view(request: HttpRequest) -> HttpResponse:
    """``GET /api/v1/``: the server's version, features and limits (no token needed)."""
    from agents.openapi import capabilities

    if request.method not in ("GET", "HEAD"):
        response = error_response(Invalid("Use GET."))
        response.status_code = 405
        response["Allow"] = "GET, HEAD"
        return response
    return json_response(capabilities())


def openapi_view(request: HttpRequest) -> HttpResponse:
    from agents.openapi import document

    return json_response(document())
