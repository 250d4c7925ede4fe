"""A2A push-notification configs (``Create/Get/List/DeleteTaskPushNotificationConfig``, and
``SendMessage``'s ``configuration.taskPushNotificationConfig``): where the server POSTs a task's
status each time its todo changes state, through the signed webhook outbox (queues/push.py,
queues/outbox.py). docs/protocols.md, "Push notifications".

A config is the caller's: set on a task it may read, seen, replaced and deleted only by the
endpoint that set it (another endpoint's config of the same id is a conflict, its configs
are not listed). The URL passes the webhooks' SSRF rules when it is set (and again, pinned,
at each POST): no loopback, private, link-local or metadata address unless the server allows
private targets (SWITCHBOARD_WEBHOOK_ALLOW_PRIVATE). The client's ``token`` comes back in
``X-A2A-Notification-Token`` and signs the body (``X-Switchboard-Signature``, HMAC-SHA256 of
``<timestamp>.<body>``); its ``authentication`` becomes the ``Authorization`` header.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from typing import Any

import msgspec

from switchboard.agents import task_view, verbs
from switchboard.agents.a2a_words import INVALID_PARAMS, A2AError, PageParams, params_of
from switchboard.queues import db, push, webhooks
from switchboard.queues.errors import NotFound

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,31}")
_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_HEADER_TEXT = re.compile(r"[\x20-\x7e]*")  # printable ASCII: no line breaks in a header


class Authentication(msgspec.Struct):
    scheme: str = ""
    credentials: str = ""


class ConfigIn(msgspec.Struct, rename="camel"):
    url: str = ""
    id: str = ""
    task_id: str = ""
    tenant: str = ""
    token: str = ""
    authentication: Authentication | None = None


class ConfigRef(PageParams):
    task_id: str = ""
    id: str = ""


def config_json(config: push.PushConfig) -> dict[str, Any]:
    said: dict[str, Any] = {
        "id": config.config_id,
        "taskId": config.task_id,
        "url": config.url,
    }
    if config.token:
        said["token"] = config.token
    if config.auth_scheme:
        said["authentication"] = {
            "scheme": config.auth_scheme,
            "credentials": config.auth_credentials,
        }
    return said


class Checked(msgspec.Struct, frozen=True):
    """A config as asked, its values checked (before anything is written)."""

    config_id: str
    url: str
    token: str
    auth_scheme: str
    auth_credentials: str


async def checked(asked: ConfigIn) -> Checked:
    url = asked.url.strip()
    if (
        not url
        or len(url) > 500
        or not url.startswith(("http://", "https://"))
        or not _HEADER_TEXT.fullmatch(url)
    ):
        raise A2AError(
            INVALID_PARAMS, "url is an http(s) URL of at most 500 printable ASCII characters."
        )
    problem = await asyncio.to_thread(webhooks.url_problem, url)  # resolves: off the loop
    if problem:
        raise A2AError(INVALID_PARAMS, problem)
    config_id = asked.id or secrets.token_hex(8)
    if not _ID.fullmatch(config_id):
        raise A2AError(INVALID_PARAMS, "id is 1 to 64 letters, digits, '.', '_', ':' or '-'.")
    auth = asked.authentication or Authentication()
    if auth.scheme and not _SCHEME.fullmatch(auth.scheme):
        raise A2AError(INVALID_PARAMS, "authentication.scheme is one word (Bearer, Basic, …).")
    for name, value, most in (
        # The token also keys each POST's signature: the config's secret, 128 at most.
        ("token", asked.token, 128),
        ("authentication.credentials", auth.credentials, 1000),
    ):
        if len(value) > most or not _HEADER_TEXT.fullmatch(value):
            raise A2AError(
                INVALID_PARAMS, f"{name} is printable ASCII of at most {most} characters."
            )
    credentials = auth.credentials if auth.scheme else ""
    return Checked(config_id, url, asked.token, auth.scheme, credentials)


async def keep(call, todo_id: int, task_id: str, config: Checked) -> dict:
    """Keep a checked config as the caller's, on a task it may read (the caller checked);
    Conflict past the limit or for another endpoint's id (A2A's invalid params)."""
    kept = await db.arun(
        push.set_plan(
            call.endpoint,
            todo_id,
            config_id=config.config_id,
            task_id=task_id,
            url=config.url,
            token=config.token,
            auth_scheme=config.auth_scheme,
            auth_credentials=config.auth_credentials,
        )
    )
    return config_json(kept)


async def _readable(call, asked: ConfigIn | ConfigRef) -> int:
    """The todo of the task a config request names, after the checks every read of a task
    makes: the tenant, the get_todo verb, the task id, and that the caller may read it."""
    await call.check_team(asked.tenant)
    verbs.named("get_todo").check_allowed(call.endpoint)
    todo_id = task_view.todo_id_of(call.endpoint.team_id, asked.task_id)
    await call.read(todo_id)
    return todo_id


async def create(call, base: str, params: object) -> None:
    asked = params_of(ConfigIn, params)
    todo_id = await _readable(call, asked)
    await call.answer(await keep(call, todo_id, asked.task_id, await checked(asked)))


async def get(call, base: str, params: object) -> None:
    asked = params_of(ConfigRef, params)
    todo_id = await _readable(call, asked)
    found = await db.arun(push.list_plan(call.endpoint, todo_id, asked.id or None))
    if not asked.id or not found:
        raise NotFound("No such push config.")
    await call.answer(config_json(found[0]))


async def list_configs(call, base: str, params: object) -> None:
    asked = params_of(ConfigRef, params)
    todo_id = await _readable(call, asked)
    found = await db.arun(push.list_plan(call.endpoint, todo_id))
    # At most PUSH_CONFIGS_MAX: one page, whatever its size.
    await call.answer({"configs": [config_json(c) for c in found]})


async def delete(call, base: str, params: object) -> None:
    asked = params_of(ConfigRef, params)
    todo_id = await _readable(call, asked)
    await db.arun(push.delete_plan(call.endpoint, todo_id, asked.id))
    await call.answer({})
