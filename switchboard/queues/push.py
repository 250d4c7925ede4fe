"""A2A push-notification configs (docs/protocols.md, "Push notifications"): where to POST a
task's status each time its todo changes state. The agents' A2A front (agents/a2a_push.py)
checks who may read the task and the URL's SSRF rules; here a config is kept, per todo and
per the endpoint that set it (another endpoint neither sees nor replaces it). Each state
change then writes one outbox row per config (the trigger ``todos_outbox_task_push``), sent
by the sweeper like every webhook (queues/outbox.py)."""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.queues import sql, webhooks
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import Conflict, NotFound
from switchboard.queues.models import Endpoint

PUSH_CONFIGS_MAX = 10  # per todo


@dataclass(frozen=True, slots=True)
class PushConfig:
    config_id: str
    task_id: str
    url: str
    token: str
    auth_scheme: str
    auth_credentials: str


def set_plan(
    endpoint: Endpoint,
    todo_id: int,
    *,
    config_id: str,
    task_id: str,
    url: str,
    token: str = "",
    auth_scheme: str = "",
    auth_credentials: str = "",
) -> Plan[PushConfig]:
    """Make or replace the endpoint's config ``config_id`` of the todo (which the caller has
    checked the endpoint may read). Conflict past PUSH_CONFIGS_MAX, or for an id another
    endpoint set."""
    return (
        yield Atomic(
            _set(
                endpoint,
                todo_id,
                {
                    "config_id": config_id,
                    "task_id": task_id,
                    "url": url,
                    "token": token,
                    "auth_scheme": auth_scheme,
                    "auth_credentials": auth_credentials,
                    # Each POST is signed (X-Switchboard-Signature) with the client's token when
                    # it gave one (it can check it), else with a secret of the config's own.
                    "secret": token or webhooks.new_secret(),
                },
            )
        )
    )


def _set(endpoint: Endpoint, todo_id: int, params: dict) -> Plan[PushConfig]:
    params |= {"todo_id": todo_id, "endpoint_id": endpoint.pk, "team_id": endpoint.team_id}
    yield Fetch(sql.PUSH_CONFIG_LOCK, params)
    ids = {row[0] for row in (yield Fetch(sql.PUSH_CONFIG_IDS, params))}
    if params["config_id"] not in ids and len(ids) >= PUSH_CONFIGS_MAX:
        raise Conflict(f"A task has at most {PUSH_CONFIGS_MAX} push configs.")
    rows = yield Fetch(sql.PUSH_CONFIG_UPSERT, params)
    if not rows:
        raise Conflict("Another endpoint set a push config of that id on this task.")
    yield Fetch(sql.PUSH_CONFIGS_RECOUNT, params)
    return PushConfig(*rows[0])


def list_plan(endpoint: Endpoint, todo_id: int, config_id: str | None = None) -> Plan[list]:
    """The endpoint's configs of the todo (or the one named), by id."""
    rows = yield Fetch(
        sql.PUSH_CONFIGS_OF,
        {"todo_id": todo_id, "endpoint_id": endpoint.pk, "config_id": config_id},
    )
    return [PushConfig(*row) for row in rows]


def delete_plan(endpoint: Endpoint, todo_id: int, config_id: str) -> Plan[None]:
    """Delete the endpoint's config; NotFound for one it has not set (or another's)."""
    return (yield Atomic(_delete(endpoint, todo_id, config_id)))


def _delete(endpoint: Endpoint, todo_id: int, config_id: str) -> Plan[None]:
    params = {"todo_id": todo_id, "endpoint_id": endpoint.pk, "config_id": config_id}
    yield Fetch(sql.PUSH_CONFIG_LOCK, params)
    if not (yield Fetch(sql.PUSH_CONFIG_DELETE, params)):
        raise NotFound("No such push config.")
    yield Fetch(sql.PUSH_CONFIGS_RECOUNT, params)
