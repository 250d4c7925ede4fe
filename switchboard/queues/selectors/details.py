"""Reads of one todo (get_todo, on the agent path and the Board's, and the drawer's
snapshot) and of an endpoint's list (list_todos). Every read takes its scope (an endpoint,
or a user); an unknown id and a foreign id give the same NotFound."""

from __future__ import annotations

import base64
import binascii
from dataclasses import replace

from django.conf import settings
from django.db import connection, transaction

from switchboard.queues import arguments, bounds, db, sql
from switchboard.queues.arguments import whole_number
from switchboard.queues.bounds import (
    ATTEMPTS_DEFAULT,
    ATTEMPTS_MAX,
    LIST_DEFAULT,
    LIST_MAX,
    QUESTIONS_MAX,
)
from switchboard.queues.db import Fetch, Plan
from switchboard.queues.errors import Invalid, NotFound
from switchboard.queues.models import (
    Endpoint,
    EventKind,
    Outcome,
    TodoState,
)
from switchboard.queues.records import (
    AttemptRecord,
    EventRecord,
    TodoDetail,
    TodoRecord,
    json_value,
)
from switchboard.queues.transitions._common import children_of
from switchboard.queues.transitions.waits import READ_MAX


def _limit(value, *, name: str, default: int, maximum: int) -> int:
    return default if value is None else whole_number(value, name, 1, maximum)


def get_todo_for_endpoint_plan(
    endpoint: Endpoint, todo_id, *, attempts_limit=None, requester_attempts: bool = False
) -> Plan[TodoDetail]:
    """get_todo on the agent path: a todo of the endpoint's own queue, with its newest
    attempts; or a todo it sent elsewhere (as requester): state and result, no attempts. With
    ``requester_attempts`` a requester's detail has its attempts too (still ``as_requester``):
    the protocols' attempts extension, which a client asks for (agents/task_view.py)."""
    todo_id = arguments.todo_id(todo_id)
    limit = _limit(
        attempts_limit, name="attempts_limit", default=ATTEMPTS_DEFAULT, maximum=ATTEMPTS_MAX
    )
    rows = yield Fetch(
        sql.SELECT_TODO_FOR_AGENT_OR_REQUESTER, {"todo_id": todo_id, "scope_endpoint": endpoint.pk}
    )
    if not rows:
        raise NotFound()
    todo = TodoRecord.from_row(rows[0])
    if todo.endpoint_id != endpoint.pk:
        attempts = (yield from _attempts(todo, limit)) if requester_attempts else []
        asked = yield from _questions(todo, attempts if requester_attempts else None)
        waits = yield from _waits(todo)
        return TodoDetail(todo=todo, attempts=attempts, as_requester=True, questions=asked, **waits)
    attempts = yield from _attempts(todo, limit)
    asked = yield from _questions(todo, attempts)
    return TodoDetail(todo=todo, attempts=attempts, questions=asked, **(yield from _waits(todo)))


def get_todo_for_user_plan(user, todo_id, *, attempts_limit=None) -> Plan[TodoDetail]:
    """get_todo on the Board path: a todo of any endpoint in the user's teams, with its
    newest attempts."""
    limit = _limit(
        attempts_limit, name="attempts_limit", default=ATTEMPTS_DEFAULT, maximum=ATTEMPTS_MAX
    )
    return (yield from _detail_for_user(user, todo_id, limit))


def _detail_for_user(user, todo_id, limit: int) -> Plan[TodoDetail]:
    rows = yield Fetch(
        sql.SELECT_TODO_IN.user, {"todo_id": arguments.todo_id(todo_id), "scope_user": user.pk}
    )
    if not rows:
        raise NotFound()
    todo = TodoRecord.from_row(rows[0])
    attempts = yield from _attempts(todo, limit)
    asked = yield from _questions(todo, attempts)
    return TodoDetail(todo=todo, attempts=attempts, questions=asked, **(yield from _waits(todo)))


def _waits(todo: TodoRecord) -> Plan[dict]:
    """What the todo waits for and what waits for it (issue 44), each read only when there is
    some: the todos it was made after, those made after it, and its children."""
    found: dict = {}
    if todo.after_total:
        found["after"] = yield from _edges(sql.PREREQUISITES, todo.id)
    if todo.has_dependents:
        found["dependents"] = yield from _edges(sql.DEPENDENTS, todo.id)
    if todo.children_total:
        found["children"] = yield from children_of(todo.id, limit=READ_MAX)
    return found


def _edges(statement, todo_id: int) -> Plan[list[dict]]:
    rows = yield Fetch(statement, {"todo_id": todo_id, "limit": READ_MAX})
    return [{"id": todo_id, "state": state, "title": title} for todo_id, state, title in rows]


def _questions(todo: TodoRecord, attempts: list[AttemptRecord] | None) -> Plan[list[dict]]:
    """Every question of the todo (kept with it, however many of its attempts were
    pruned), newest first, as the API shows each. Read only when there may be one: not when
    the todo was never claimed, nor when the attempts read (``attempts``, all of those it
    ever had) asked none."""
    if todo.last_attempt_seq == 0:
        return []
    if (
        attempts is not None
        and len(attempts) == todo.last_attempt_seq
        and all(a.outcome != Outcome.ASKED for a in attempts)
    ):
        return []
    rows = yield Fetch(sql.SELECT_QUESTIONS, {"todo_id": todo.id, "limit": QUESTIONS_MAX})
    return [json_value(row[0]) for row in rows]


def _attempts(todo: TodoRecord, limit: int) -> Plan[list[AttemptRecord]]:
    if todo.last_attempt_seq == 0:
        return []  # never claimed: skip the query
    rows = yield Fetch(sql.SELECT_ATTEMPTS, {"todo_id": todo.id, "limit": limit})
    return [AttemptRecord.from_row(row).with_live_lease(todo) for row in rows]


def list_todos_plan(
    endpoint: Endpoint, *, state=None, limit=None, cursor=None
) -> Plan[tuple[list[TodoRecord], str | None]]:
    """The endpoint's queue, newest first, by keyset: ``cursor`` continues after the last
    page. A page holds at most ``limit`` todos and about LIST_MAX_BYTES of their text (at least
    one todo). One query."""
    if state is not None and state not in TodoState.values:
        raise Invalid(f"state must be one of {', '.join(TodoState.values)}.")
    limit = _limit(limit, name="limit", default=LIST_DEFAULT, maximum=LIST_MAX)
    before_id = decode_cursor(cursor) if cursor is not None else None
    rows = yield Fetch(
        sql.LIST_TODOS,
        {
            "endpoint_id": endpoint.pk,
            "state": state,
            "before_id": before_id,
            "limit": limit,
            "max_bytes": bounds.LIST_MAX_BYTES,
        },
    )
    todos = [TodoRecord.from_row(row) for row in rows]
    more = bool(rows) and rows[0][-1]
    return todos, encode_cursor(todos[-1].id) if more else None


def list_tasks_plan(
    endpoint: Endpoint, *, task_state=None, limit: int, before_id=None, updated_after=None
) -> Plan[tuple[list[TodoRecord], bool]]:
    """The todos an endpoint may read as protocol tasks (its own queue's and those it sent),
    newest first, by keyset (``before_id``), in one task state (agents/task_view.py's names)
    or all; a page of at most ``limit`` and about LIST_MAX_BYTES. One query; the second value
    says whether more follow."""
    rows = yield Fetch(
        sql.LIST_TASKS,
        {
            "endpoint_id": endpoint.pk,
            "task_state": task_state,
            "before_id": before_id,
            "updated_after": updated_after,
            "limit": limit,
            "max_bytes": bounds.LIST_MAX_BYTES,
        },
    )
    return [TodoRecord.from_row(row) for row in rows], bool(rows) and rows[0][-1]


def team_slug_plan(team_id: int) -> Plan[str | None]:
    rows = yield Fetch(sql.TEAM_SLUG, {"team_id": team_id})
    return rows[0][0] if rows else None


def team_card_plan(team_id: int) -> Plan[tuple[str, list[tuple[str, str, bool]]]]:
    """A team's slug and its live endpoints (agent id, name, paused), for its card."""
    rows = yield Fetch(sql.TEAM_CARD, {"team_id": team_id})
    if not rows:
        raise NotFound()
    return rows[0][0], [(agent, name, paused) for _, agent, name, paused in rows if agent]


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


def board_todo(user, todo_id) -> TodoDetail:
    """The drawer: a todo of any of the user's teams (whatever the team switcher shows),
    with every attempt row kept (the history cap bounds them). The todo and its attempts
    are read in one REPEATABLE READ, read-only snapshot, so the header, the strip and the
    actions offered all describe the same instant (under READ COMMITTED a claim committed
    between the two reads showed a pending todo with an open try). Three statements: the
    snapshot's SET, the todo, its attempts; inside a caller's transaction (tests) the
    caller's own rules hold and the SET is left out."""
    limit = max(settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO, ATTEMPTS_MAX)
    if connection.in_atomic_block:
        return db.run(_drawer_detail(user, todo_id, limit))
    with transaction.atomic():
        db.fetch(sql.BEGIN_DRAWER_SNAPSHOT, {})
        return db.run(_drawer_detail(user, todo_id, limit))


# The audit kinds the drawer shows among the tries: what people (and requesters) did to it.
PEOPLE_KINDS = [
    EventKind.CLAIM,
    EventKind.RELEASE,
    EventKind.COMPLETE,
    EventKind.FAIL,
    EventKind.CANCEL,
    EventKind.RETRY_NOW,
    EventKind.RERUN,
    EventKind.TAKE_OVER,
    EventKind.START_NOW,
]
PEOPLE_MAX = 500  # the newest this many (a todo reran by hand hundreds of times)


def _drawer_detail(user, todo_id, limit: int) -> Plan[TodoDetail]:
    """The drawer's snapshot: the todo, its attempts and the people's actions on it (one
    statement more than get_todo's)."""
    detail = yield from _detail_for_user(user, todo_id, limit)
    rows = yield Fetch(
        sql.SELECT_TODO_PEOPLE,
        {"todo_id": detail.todo.id, "kinds": [k.value for k in PEOPLE_KINDS], "limit": PEOPLE_MAX},
    )
    events = [EventRecord.from_row(row) for row in reversed(rows)]
    return replace(detail, events=events)
