"""Scoped reads. Every read takes its scope (an endpoint, or a user) as an argument; an
unknown id and a foreign id give the same NotFound. Reads never write."""

from __future__ import annotations

import base64
import binascii

from queues import checks, sql
from queues.checks import whole_number
from queues.errors import Invalid, NotFound
from queues.models import Endpoint, TodoState
from queues.records import AttemptRecord, TodoDetail, TodoRecord

ATTEMPTS_DEFAULT = 20
ATTEMPTS_MAX = 50
LIST_DEFAULT = 50
LIST_MAX = 200


def _limit(value, *, name: str, default: int, maximum: int) -> int:
    return default if value is None else whole_number(value, name, 1, maximum)


def get_todo_for_endpoint(endpoint: Endpoint, todo_id, *, attempts_limit=None) -> TodoDetail:
    """get_todo on the agent path: a todo of the endpoint's own queue, with its newest
    attempts; or a todo it sent elsewhere (as requester): state and result, no attempts."""
    todo_id = checks.todo_id(todo_id)
    limit = _limit(
        attempts_limit, name="attempts_limit", default=ATTEMPTS_DEFAULT, maximum=ATTEMPTS_MAX
    )
    statement = sql.SELECT_TODO.format(
        scope="t.endpoint_id = %(endpoint_id)s OR t.requester_id = %(endpoint_id)s"
    )
    rows = sql.fetch(statement, {"todo_id": todo_id, "endpoint_id": endpoint.pk})
    if not rows:
        raise NotFound()
    todo = TodoRecord.from_row(rows[0])
    if todo.endpoint_id != endpoint.pk:
        return TodoDetail(todo=todo, attempts=[], as_requester=True)
    return TodoDetail(todo=todo, attempts=_attempts(todo, limit))


def get_todo_for_user(user, todo_id, *, attempts_limit=None) -> TodoDetail:
    """The Board path: a todo of any endpoint in the user's teams."""
    todo_id = checks.todo_id(todo_id)
    limit = _limit(
        attempts_limit, name="attempts_limit", default=ATTEMPTS_DEFAULT, maximum=ATTEMPTS_MAX
    )
    rows = sql.fetch(
        sql.SELECT_TODO.format(scope=sql.SCOPE_USER), {"todo_id": todo_id, "scope_user": user.pk}
    )
    if not rows:
        raise NotFound()
    todo = TodoRecord.from_row(rows[0])
    return TodoDetail(todo=todo, attempts=_attempts(todo, limit))


def _attempts(todo: TodoRecord, limit: int) -> list[AttemptRecord]:
    if todo.last_attempt_seq == 0:
        return []  # never claimed: skip the query
    rows = sql.fetch(sql.SELECT_ATTEMPTS, {"todo_id": todo.id, "limit": limit})
    return [AttemptRecord.from_row(row).with_live_lease(todo) for row in rows]


def list_todos(
    endpoint: Endpoint, *, state=None, limit=None, cursor=None
) -> tuple[list[TodoRecord], str | None]:
    """The endpoint's queue, newest first, by keyset: ``cursor`` continues after the last
    page. One query."""
    if state is not None and state not in TodoState.values:
        raise Invalid(f"state must be one of {', '.join(TodoState.values)}.")
    limit = _limit(limit, name="limit", default=LIST_DEFAULT, maximum=LIST_MAX)
    before_id = decode_cursor(cursor) if cursor is not None else None
    rows = sql.fetch(
        sql.LIST_TODOS,
        {"endpoint_id": endpoint.pk, "state": state, "before_id": before_id, "limit": limit + 1},
    )
    todos = [TodoRecord.from_row(row) for row in rows[:limit]]
    next_cursor = encode_cursor(todos[-1].id) if len(rows) > limit else None
    return todos, next_cursor


def encode_cursor(todo_id: int) -> str:
    return base64.urlsafe_b64encode(f"v1:{todo_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor) -> int:
    if not isinstance(cursor, str) or len(cursor) > 64:
        raise Invalid("cursor is not one this server gave out.")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        version, _, value = raw.partition(":")
        if version != "v1":
            raise ValueError(version)
        todo_id = int(value)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise Invalid("cursor is not one this server gave out.") from exc
    if todo_id < 1:
        raise Invalid("cursor is not one this server gave out.")
    return todo_id
