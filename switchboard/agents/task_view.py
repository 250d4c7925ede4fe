"""A todo as the agents' protocols see it: one task view, read once, that A2A (agents/a2a.py)
and MCP's tasks extension (agents/mcp_tasks.py) each write in their own words.

The state map (docs/protocols.md, "States"), decided here and, for the list filter and push
notifications, in SQL (``switchboard_task_state()`` in queues/schema/functions.sql; held equal
by tests/agents/test_task_view.py):

| ledger | task | status message |
|---|---|---|
| pending, never claimed | submitted | none |
| pending after an attempt (released, or its holder died) | working | what became of it |
| retry_wait | working | "attempt N failed; retried at …" |
| claimed | working | who holds it |
| waiting for a person's answer | input_required | the question |
| waiting for todos or children | working | how many are left |
| done | completed | the last attempt's summary |
| dead | failed | the dead-letter reason and the last summary |
| canceled | canceled | |

``rejected`` is never read from the ledger: a message to a paused endpoint is refused before
anything is queued (agents/a2a.py).

A task id is the todo's id and a MAC of it and its team (``task_id``): unguessable, bound to
the team, and checked before any read, so a made-up id and another team's id are the same
NotFound without a query. Summaries, claimants and questions are what agents wrote: carried
as data, with the untrusted notice, never as instructions.
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass
from typing import Any

from django.utils.crypto import salted_hmac

from switchboard.queues import db, selectors
from switchboard.queues.errors import NotFound
from switchboard.queues.models import Endpoint, TodoState, WaitingFor
from switchboard.queues.records import UNTRUSTED_NOTICE, AttemptRecord, TodoDetail, TodoRecord

SUBMITTED, WORKING, INPUT_REQUIRED = "submitted", "working", "input_required"
COMPLETED, FAILED, CANCELED, REJECTED = "completed", "failed", "canceled", "rejected"
STATES = (SUBMITTED, WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELED, REJECTED)
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, REJECTED})
# A task that waits on its client: a blocking send or a stream answers, and ends, here.
INTERRUPTED = frozenset({INPUT_REQUIRED})

# The attempts extension: the A2A extension's URI and the MCP ``_meta`` key it travels under.
ATTEMPTS_URI = "urn:switchboard:a2a:attempts:v1"
ATTEMPTS_META = "io.switchboard/attempts"
ATTEMPTS_SHOWN = 20  # the newest attempts a task carries (attempts_total says how many)

_MAC_CHARS = 22  # 132 bits of the MAC, base64url
_SALT = "switchboard.agents.task_id"
NO_SUCH_TASK = "No such task."


def task_id(team_id: int, todo_id: int) -> str:
    return f"{todo_id}-{_mac(team_id, todo_id)}"


def todo_id_of(team_id: int, task: object) -> int:
    """The todo a task id names for this team; NotFound for anything else (malformed, forged,
    or another team's: all alike)."""
    if not isinstance(task, str) or len(task) > 64:
        raise NotFound(NO_SUCH_TASK)
    number, _, mac = task.partition("-")
    if not (number.isascii() and number.isdigit()) or len(number) > 18:
        raise NotFound(NO_SUCH_TASK)
    todo_id = int(number)
    if not hmac.compare_digest(mac.encode(), _mac(team_id, todo_id).encode()):
        raise NotFound(NO_SUCH_TASK)
    return todo_id


def _mac(team_id: int, todo_id: int) -> str:
    digest = salted_hmac(_SALT, f"{team_id}:{todo_id}", algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest).decode()[:_MAC_CHARS]


def task_state(todo: TodoRecord) -> str:
    state = todo.state
    if state == TodoState.PENDING:
        return SUBMITTED if todo.attempt == 0 else WORKING
    if state == TodoState.WAITING:
        return INPUT_REQUIRED if todo.waiting_for == WaitingFor.PEOPLE else WORKING
    return {
        TodoState.CLAIMED: WORKING,
        TodoState.RETRY_WAIT: WORKING,
        TodoState.DONE: COMPLETED,
        TodoState.DEAD: FAILED,
        TodoState.CANCELED: CANCELED,
    }[TodoState(state)]


@dataclass(frozen=True, slots=True)
class TaskView:
    """One todo, read for a protocol: its task id and state, what to say of it, and what the
    attempts extension carries."""

    id: str
    state: str
    message: str | None
    todo: TodoRecord
    attempts: list[AttemptRecord]
    questions: list[dict]

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def settled(self) -> bool:
        """Nothing more happens until its client acts (or never): a blocking send answers."""
        return self.state in TERMINAL or self.state in INTERRUPTED

    @property
    def summary(self) -> str | None:
        last = self.last_attempt
        return last.summary if last is not None else None

    @property
    def last_attempt(self) -> AttemptRecord | None:
        return self.attempts[0] if self.attempts else None

    @property
    def question(self) -> dict | None:
        return self.todo.question if self.state == INPUT_REQUIRED else None

    def attempts_extension(self) -> dict[str, Any]:
        """The attempts extension's value: the newest attempts (what each tried and how it
        ended: died or failed), with their questions and answers."""
        return {
            "attempts": [_attempt(a) for a in self.attempts[:ATTEMPTS_SHOWN]],
            "attempts_total": self.todo.attempts_total,
            "untrusted_notice": UNTRUSTED_NOTICE,
        }


async def read(endpoint: Endpoint, todo_id: int) -> TaskView:
    """The task of a todo the endpoint may read (get_todo's scope, its newest attempts even
    for a requester: the protocols' attempts extension); otherwise the NotFound a made-up or
    another team's task id gets (``todo_id_of``), word for word."""
    try:
        detail = await db.arun(
            selectors.get_todo_for_endpoint_plan(
                endpoint, todo_id, attempts_limit=ATTEMPTS_SHOWN, requester_attempts=True
            )
        )
    except NotFound:
        raise NotFound(NO_SUCH_TASK) from None
    return view(endpoint.team_id, detail)


def view(team_id: int, detail: TodoDetail) -> TaskView:
    todo = detail.todo
    state = task_state(todo)
    return TaskView(
        id=task_id(team_id, todo.id),
        state=state,
        message=_message(state, todo, detail.attempts),
        todo=todo,
        attempts=detail.attempts,
        questions=detail.questions,
    )


def _message(state: str, todo: TodoRecord, attempts: list[AttemptRecord]) -> str | None:
    last = attempts[0] if attempts else None
    if state == INPUT_REQUIRED:
        return (todo.question or {}).get("text")
    if state == COMPLETED:
        return last.summary if last is not None else None
    if state == FAILED:
        reason = todo.dead_letter_reason or "It ended as a dead letter."
        if last is not None and last.summary:
            return f"{reason} Last summary: {last.summary}"
        return reason
    if state == CANCELED:
        return "Canceled."
    if todo.state == TodoState.WAITING:
        if todo.waiting_for == WaitingFor.CHILDREN:
            return f"Waiting for {todo.children_open} of its {todo.children_total} children."
        return f"Waiting for {todo.after_left} of the {todo.after_total} todos it was made after."
    if todo.state == TodoState.CLAIMED:
        who = (last.claimant or last.endpoint or last.user) if last is not None else None
        return f"Attempt {todo.attempt} is being worked on" + (f" by {who}." if who else ".")
    if todo.state == TodoState.RETRY_WAIT:
        when = todo.next_retry_at.isoformat() if todo.next_retry_at else "soon"
        return f"Attempt {todo.attempt} failed; it is retried at {when}."
    if state == WORKING and last is not None:  # pending again after an attempt
        how = "died (its lease lapsed)" if last.died else (last.outcome or "ended")
        return f"Attempt {last.attempt} {how}; waiting for the next claim."
    return None


def _attempt(a: AttemptRecord) -> dict[str, Any]:
    data = a.as_api()
    return {
        key: data[key]
        for key in (
            "seq",
            "round",
            "attempt",
            "claimer_kind",
            "endpoint",
            "user",
            "claimant",
            "claimed_at",
            "last_heartbeat_at",
            "ended_at",
            "outcome",
            "died",
            "summary",
            "summary_truncated",
            "question",
        )
    }
