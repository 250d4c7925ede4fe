"""Helpers for tests of the agent API over a real HTTP server."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import httpx
import msgspec

from switchboard.agents import schemas
from switchboard.agents.verbs import REGISTRY
from switchboard.queues.models import Endpoint
from tests import loopback


def post(
    base_url: str,
    verb: str,
    body=None,
    *,
    token: str | None = None,
    raw: bytes | None = None,
    headers: dict | None = None,
) -> httpx.Response:
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    content = raw if raw is not None else json.dumps(body if body is not None else {}).encode()
    return loopback.post(
        f"{base_url}/api/v1/{verb}", content=content, headers=all_headers, timeout=60
    )


def check_shape(verb: str, response: httpx.Response) -> dict:
    """Every response must match the schema the OpenAPI document publishes for it."""
    out = REGISTRY[verb].output if response.status_code == 200 else schemas.ErrorOut
    msgspec.json.decode(response.content, type=out)  # raises on any mismatch
    return response.json()


def ok(base_url: str, token: str, verb: str, body: dict | None = None) -> dict:
    """A verb's answer, which must be a 200 of the published shape."""
    response = post(base_url, verb, body or {}, token=token)
    data = check_shape(verb, response)
    assert response.status_code == 200, data
    return data


@contextlib.contextmanager
def statements_run(monkeypatch) -> Iterator[list[str]]:
    """The names of the statements the async executor runs meanwhile, in order: the live
    server runs in this process (tests/asgi_server.py), so this counts what a request asks
    of the database, as django_assert_num_queries does for Django's connection."""
    from switchboard.queues.db import executor

    names: list[str] = []
    real = executor._async_fetch

    async def counting(conn, step):
        names.append(step.statement.name)
        return await real(conn, step)

    with monkeypatch.context() as patched:
        patched.setattr(executor, "_async_fetch", counting)
        yield names


def keyed_endpoint(live_server, vend, name: str) -> tuple[Endpoint, str, str]:
    """An endpoint whose agents may hold one todo of a key at a time, its token, the base URL
    (the live server forgets the endpoint it cached, so its next request reads the limit)."""
    endpoint, token = vend(name)
    Endpoint.objects.filter(pk=endpoint.pk).update(max_claimed_per_key=1)
    live_server.forgets(endpoint)
    return endpoint, token, live_server.url
