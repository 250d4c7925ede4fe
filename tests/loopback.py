"""httpx's one-call functions (``httpx.get``, ``httpx.post``, …) with one TLS context for the
whole process instead of one per call.

Each ``httpx.post(url)`` builds a Client, and with it an SSL context that reads the CA bundle:
22 ms of CPU each on these machines, for a request to ``http://127.0.0.1`` that never uses
it. The suite makes thousands (the API tests, the fuzzers, polling loops), which was about
100 s of the suite's CPU. Here each call still opens a connection of its own and closes it,
as ``httpx.post`` does; only the context, read once, is shared."""

from __future__ import annotations

import ssl
from typing import Any

import httpx

TLS = ssl.create_default_context()


def request(method: str, url: str, **kwargs: Any) -> httpx.Response:
    kwargs.setdefault("verify", TLS)
    return httpx.request(method, url, **kwargs)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return request("GET", url, **kwargs)


def post(url: str, **kwargs: Any) -> httpx.Response:
    return request("POST", url, **kwargs)


def put(url: str, **kwargs: Any) -> httpx.Response:
    return request("PUT", url, **kwargs)


def delete(url: str, **kwargs: Any) -> httpx.Response:
    return request("DELETE", url, **kwargs)
