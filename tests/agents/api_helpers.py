"""Helpers for tests of the agent API over a real HTTP server."""

from __future__ import annotations

import json

import httpx
import msgspec

from agents import schemas


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
    return httpx.post(f"{base_url}/api/v1/{verb}", content=content, headers=all_headers, timeout=60)


def check_shape(verb: str, response: httpx.Response) -> dict:
    """Every response must match the schema the OpenAPI document publishes for it."""
    out = schemas.VERBS[verb][1] if response.status_code == 200 else schemas.ErrorOut
    msgspec.json.decode(response.content, type=out)  # raises on any mismatch
    return response.json()
