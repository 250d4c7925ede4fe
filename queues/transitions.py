"""The lease state machine: the one module that changes a todo's state.

Each public function is one durable transaction that moves the todo *and* opens or closes its
attempt (SPEC, "Todo states and transitions"). Views, API verbs, MCP tools, admin actions, the
sweeper and tests all call these; nothing else writes ``state``. Transitions never call each
other; shared steps are the private helpers below.

Who may act is an ``Actor``: an agent (an endpoint) or a human (a user acting from the Board).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.db.models.functions import Now
from django.utils import timezone

from queues import sql, tokens
from queues.arguments import todo_id as checked_todo_id
from queues.arguments import whole_number
from queues.bounds import (
    NOTHING,
    Bounded,
    bound_artifact,
    bound_claimant,
    bound_mcp_session_id,
    bound_result,
    bound_summary,
    summary_from_result,
)
from queues.errors import Conflict, Invalid, NotFound, RateLimited, Unauthorized
from queues.models import (
    LIVE_STATES,
    ClaimerKind,
    Endpoint,
    Outcome,
    Todo,
    TodoEvent,
    TodoState,
)
from queues.records import AttemptRecord, Claim, Closed, Lease, TodoRecord, split_row

MAX_LEASE_SECONDS = 86_400
TITLE_MAX_CHARS = 500
BODY_MAX_BYTES = 64 * 1024
# claim_next passes over lapsed leases it dead-letters at the cap; bound the walk.
MAX_DEAD_LETTERS_PER_CLAIM = 50
# The todo row is locked by the first run, so a second run sees a settled todo; more than
# a few runs would mean a bug, not a race.
MAX_STALE_SNAPSHOT_RETRIES = 5


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is calling: an agent through its endpoint, or a human through the Board."""

    endpoint: Endpoint | None = None
    user: Any = None

    @classmethod
    def agent(cls, endpoint: Endpoint) -> Actor:
        return cls(endpoint=endpoint)

    @classmethod
    def human(cls, user) -> Actor:
        return cls(user=user)

    @property
    def is_agent(self) -> bool:
        return self.endpoint is not None

    @property
    def label(self) -> str:
        return self.endpoint.owner_label if self.is_agent else f"user:{self.user.pk}"

    def scope_params(self) -> dict:
        if self.is_agent:
            return {"scope_endpoint": self.endpoint.pk, "scope_user": None}
        return {"scope_endpoint": None, "scope_user": self.user.pk}


# The closing verbs: (outcome, state when the budget allows, counts as a failure, sets result)
_CLOSES = {
    "complete": (Outcome.COMPLETED, TodoState.DONE, False, True),
    "fail": (Outcome.FAILED, TodoState.RETRY_WAIT, True, True),
    "release": (Outcome.RELEASED, TodoState.PENDING, False, False),
    "cancel": (Outcome.CANCELED, TodoState.CANCELED, False, False),
}


# ---------------------------------------------------------------------------------------
# Creating work


def create_todo(
    *,
    endpoint: Endpoint,
    title: str,
    body: str = "",
    priority: int = 0,
    max_attempts: int | None = None,
    not_before: datetime | None = None,
    idempotency_key: str | None = None,
    requester: Endpoint | None = None,
    created_by=None,
) -> tuple[TodoRecord, bool]:
    """Put a todo on ``endpoint``'s queue. Returns (todo, created); the same idempotency key
    from the same sender (``requester``, or none: the endpoint itself or a person) on the same
    endpoint returns the existing todo with created False. Keys are scoped by sender, so a
    sender only ever gets back a todo it made: a key another sender used makes a new todo."""
    _check_active(endpoint)
    if requester is not None:
        _check_active(requester)
    if not isinstance(title, str) or not title.strip():
        raise Invalid("title must be a non-empty string.")
    if len(title) > TITLE_MAX_CHARS:
        raise Invalid(f"title must be at most {TITLE_MAX_CHARS} characters.")
    if not isinstance(body, str):
        raise Invalid("body must be a string.")
    if len(body) > BODY_MAX_BYTES or len(body.encode("utf-8")) > BODY_MAX_BYTES:
        # Refused, not truncated: a body is the work itself, and a cut one is other work.
        raise Invalid(f"body must be at most {BODY_MAX_BYTES} bytes of UTF-8 (64 KiB).")
    priority = whole_number(priority, "priority", -100, 100)
    max_attempts = whole_number(
        settings.SWITCHBOARD_MAX_ATTEMPTS if max_attempts is None else max_attempts,
        "max_attempts",
        1,
        1000,
    )
    if not_before is not None and (
        not isinstance(not_before, datetime) or timezone.is_naive(not_before)
    ):
        raise Invalid("not_before must be a timestamp with a time zone.")
    if not_before is not None:
        # PostgreSQL stores any instant but not every offset (beyond +-15:59 it refuses one
        # RFC 3339 allows): store the instant in UTC.
        try:
            not_before = not_before.astimezone(UTC)
        except OverflowError:
            raise Invalid("not_before is out of range.") from None
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str) or not 1 <= len(idempotency_key) <= 200
    ):
        raise Invalid("idempotency_key must be a string of 1 to 200 characters.")

    with transaction.atomic(durable=True):
        if idempotency_key is not None:
            existing = Todo.objects.filter(
                endpoint=endpoint, requester=requester, idempotency_key=idempotency_key
            )
            if (found := existing.values_list("pk", flat=True).first()) is not None:
                return _read_todo(found), False
        try:
            # The savepoint lets a concurrent create with the same key lose cleanly.
            with transaction.atomic(savepoint=idempotency_key is not None):
                todo = Todo.objects.create(
                    endpoint=endpoint,
                    requester=requester,
                    created_by=created_by,
                    title=title.replace("\x00", "\ufffd"),
                    body=body.replace("\x00", "\ufffd"),
                    priority=priority,
                    max_attempts=max_attempts,
                    not_before=not_before,
                    idempotency_key=idempotency_key,
                )
        except IntegrityError:
            if idempotency_key is None:
                raise
            found = Todo.objects.get(
                endpoint=endpoint, requester=requester, idempotency_key=idempotency_key
            ).pk
            return _read_todo(found), False
        if created_by is not None:
            _event(todo.pk, endpoint.team_id, user=created_by, kind="create")
        # Rung even for a todo held back by not_before (a waiter looks, finds nothing and
        # waits again): deciding here would need a clock other than the database's.
        _ring(endpoint.pk)
        return _read_todo(todo.pk), True


# ---------------------------------------------------------------------------------------
# Claiming


def claim_next(
    *,
    endpoint: Endpoint,
    lease_seconds: int | None = None,
    require_fence: bool = False,
    claimant: str | None = None,
    mcp_session_id: str | None = None,
) -> Claim | None:
    """Claim the endpoint's best claimable todo (highest priority, then the longest
    claimable), or return None when there is none. Opens an attempt; a lapsed lease is taken
    over and its attempt closed as lease_expired (or the todo dead-lettered at the cap)."""
    actor = Actor.agent(endpoint)
    _check_active(endpoint)
    params, token = _claim_params(actor, lease_seconds, require_fence, claimant, mcp_session_id)
    # Each run of the claim statement is its own transaction (see _single_statement): a
    # lapsed lease dead-lettered at the cap is committed, and the next run looks further.
    # (Under an admission limit they share the admission's transaction.)
    with _admitted(actor) as ticket:
        for _ in range(MAX_DEAD_LETTERS_PER_CLAIM):
            with _single_statement():
                rows = _run_claim(sql.CLAIM_NEXT, params)
            if not rows:
                return None
            claim = _claim_from_rows(rows, token)
            if claim is not None:
                ticket.charge()
                return claim
    return None


def claim(
    actor: Actor,
    todo_id: int,
    *,
    lease_seconds: int | None = None,
    require_fence: bool = False,
    claimant: str | None = None,
    mcp_session_id: str | None = None,
) -> Claim:
    """Claim one todo. An agent claims from its own queue; a human claims any todo of their
    teams' queues, opening an ``owner`` attempt. Not claimable: Conflict. A lapsed lease at
    the cap is dead-lettered (committed) and the claim answers Conflict."""
    if actor.is_agent:
        _check_active(actor.endpoint)
    todo_id = checked_todo_id(todo_id)
    params, token = _claim_params(actor, lease_seconds, require_fence, claimant, mcp_session_id)
    params["todo_id"] = todo_id
    statement = sql.CLAIM_ONE_AGENT if actor.is_agent else sql.CLAIM_ONE_USER
    with _admitted(actor) as ticket, transaction.atomic(durable=not ticket.in_transaction):
        rows = _run_claim(statement, params)
        if not rows:
            _raise_missing_or_conflict(actor, todo_id, "That todo is not claimable now.")
        result = _claim_from_rows(rows, token)
        if result is not None:
            ticket.charge()
        if result is not None and not actor.is_agent:
            _event(
                todo_id,
                _team_of(result.todo),
                user=actor.user,
                kind="claim",
                detail={"attempt_seq": result.attempt_seq},
            )
    if result is None:
        raise Conflict(
            "That todo's lease had lapsed on its last allowed attempt; it was dead-lettered."
        )
    return result


def _claim_params(
    actor: Actor,
    lease_seconds: int | None,
    require_fence: bool,
    claimant: str | None,
    mcp_session_id: str | None,
) -> tuple[dict, str | None]:
    default = (
        settings.SWITCHBOARD_LEASE_SECONDS
        if actor.is_agent
        else settings.SWITCHBOARD_OWNER_LEASE_SECONDS
    )
    lease = _lease_seconds(lease_seconds, default)
    if not isinstance(require_fence, bool):
        raise Invalid("require_fence must be true or false.")
    label = bound_claimant(claimant)
    session = bound_mcp_session_id(mcp_session_id)
    token = tokens.new_lease_token() if require_fence else None
    params = {
        **actor.scope_params(),
        "lease_seconds": lease,
        "owner": actor.label,
        "claimer_kind": ClaimerKind.ENDPOINT if actor.is_agent else ClaimerKind.OWNER,
        "claimer_endpoint": actor.endpoint.pk if actor.is_agent else None,
        "claimer_user": None if actor.is_agent else actor.user.pk,
        "mcp_session_id": session.text or "",
        "mcp_session_id_truncated": session.truncated,
        "mcp_session_id_bytes": session.bytes,
        "claimant": label.text or "",
        "claimant_truncated": label.truncated,
        "claimant_bytes": label.bytes,
        "token_hash": tokens.digest(token) if token else None,
        "history_cap": settings.SWITCHBOARD_ATTEMPT_HISTORY_MAX_PER_TODO,
    }
    return params, token


def _run_claim(statement: str, params: dict) -> list:
    """Run a claim statement until its snapshot agrees with the row it locked (see
    ``sql._CLAIM``); return its rows without the leading ``ok`` column."""
    for _ in range(MAX_STALE_SNAPSHOT_RETRIES):
        rows = sql.fetch(statement, params)
        if not rows or rows[0][0]:
            return [row[1:] for row in rows]
    raise Conflict("That todo kept changing under the claim; try again.")


def _claim_from_rows(rows: list, token: str | None) -> Claim | None:
    """Rows of a claim statement; None when the picked lapsed lease was dead-lettered."""
    todo, _ = split_row(rows[0])
    if todo.state != TodoState.CLAIMED:
        return None
    prior = [attempt for _, attempt in map(split_row, rows) if attempt is not None]
    return Claim(
        todo=todo, attempt_seq=todo.last_attempt_seq, lease_token=token, prior_attempts=prior
    )


class _Ticket:
    """Admission for one claim call: ``charge()`` when a claim was made; the unit is
    written, in the claim's transaction, when the call ends without an error."""

    def __init__(self, *, in_transaction: bool) -> None:
        self.in_transaction = in_transaction
        self.charged = False

    def charge(self) -> None:
        self.charged = True


@contextmanager
def _admitted(actor: Actor) -> Iterator[_Ticket]:
    """SWITCHBOARD_CLAIMS_PER_MINUTE: each committed claim of an endpoint is one unit; over
    the limit the claim is refused (RateLimited, with retry_after) and nothing is written.

    The window is a fixed minute per endpoint, opened by the first claim after the last one
    ended. The endpoint's row is locked for the claim's transaction, so concurrent claims of
    one endpoint queue here, only while a limit is set. A person's claim is never charged."""
    limit = settings.SWITCHBOARD_CLAIMS_PER_MINUTE
    if not limit or not actor.is_agent:
        yield _Ticket(in_transaction=False)
        return
    with transaction.atomic(durable=True):
        claims, retry_after = sql.fetch(sql.ADMISSION_OPEN, {"endpoint_id": actor.endpoint.pk})[0]
        if claims >= limit:
            raise RateLimited(
                f"This endpoint may claim {limit} times a minute; try again in "
                f"{max(1, round(retry_after))} s.",
                retry_after=round(max(retry_after, 0.0), 3),
            )
        ticket = _Ticket(in_transaction=True)
        yield ticket
        if ticket.charged:
            sql.fetch(sql.ADMISSION_CHARGE, {"endpoint_id": actor.endpoint.pk})


# ---------------------------------------------------------------------------------------
# Holding: heartbeat (and a human's Extend)


def heartbeat(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    lease_seconds: int | None = None,
    audited: bool = True,
) -> Lease:
    """Keep the caller's open attempt alive; the lease is extended to now + lease_seconds
    (never shortened). Allowed past lease_expires_at while the attempt is still open. A
    human's heartbeat is an audited "extend", except the Board's keepalive while the drawer
    is open (``audited=False``), which would otherwise write a row every few minutes."""
    if actor.is_agent:
        _check_active(actor.endpoint)
    todo_id = checked_todo_id(todo_id)
    attempt_seq = _opt_seq(attempt_seq)
    _opt_token(lease_token)
    default = (
        settings.SWITCHBOARD_LEASE_SECONDS
        if actor.is_agent
        else settings.SWITCHBOARD_OWNER_LEASE_SECONDS
    )
    params = {
        **actor.scope_params(),
        "todo_id": todo_id,
        "attempt_seq": attempt_seq,
        "lease_seconds": _lease_seconds(lease_seconds, default),
    }
    if actor.is_agent and lease_token is None:
        with _single_statement():
            rows = sql.fetch(sql.HEARTBEAT_HELD_BY_AGENT, params)
        if rows:
            return Lease(*rows[0])
    with transaction.atomic(durable=True):
        locked = _lock(actor, todo_id)
        check = _attempts_for_check(todo_id, attempt_seq)
        open_attempt = check.open
        if actor.is_agent and locked.endpoint_id != actor.endpoint.pk:
            raise NotFound()  # a requester may not heartbeat what it sent
        if open_attempt is None or not _holds(actor, open_attempt):
            raise Conflict("The caller does not hold an open attempt on this todo.")
        _check_seq_and_fence(open_attempt, attempt_seq, lease_token)
        params["attempt_seq"] = open_attempt.seq
        rows = sql.fetch(sql.HEARTBEAT_CHECKED, params)
        if not actor.is_agent and audited:
            _event(
                todo_id,
                locked.team_id,
                user=actor.user,
                kind="extend",
                detail={"attempt_seq": open_attempt.seq},
            )
        return Lease(*rows[0])


# ---------------------------------------------------------------------------------------
# Ending an attempt: complete, fail, release, cancel


def complete(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    result: Any = None,
    summary: str | None = None,
    artifact: str | None = None,
) -> Closed:
    """The holder reports success: todo done, attempt completed/done."""
    return _end(
        actor,
        "complete",
        todo_id,
        attempt_seq=attempt_seq,
        lease_token=lease_token,
        result=result,
        summary=summary,
        artifact=artifact,
    )


def fail(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    result: Any = None,
    summary: str | None = None,
    artifact: str | None = None,
    retryable: bool = True,
) -> Closed:
    """The holder reports failure: retry_wait with backoff below the cap, dead at the cap or
    when ``retryable`` is false."""
    if not isinstance(retryable, bool):
        raise Invalid("retryable must be true or false.")
    return _end(
        actor,
        "fail",
        todo_id,
        attempt_seq=attempt_seq,
        lease_token=lease_token,
        result=result,
        summary=summary,
        artifact=artifact,
        retryable=retryable,
    )


def release(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
    summary: str | None = None,
    artifact: str | None = None,
) -> Closed:
    """End the attempt without a verdict: back to pending, the failure budget untouched. The
    holder may release; so may a human on any lease in their teams (passing its fence)."""
    return _end(
        actor,
        "release",
        todo_id,
        attempt_seq=attempt_seq,
        lease_token=lease_token,
        summary=summary,
        artifact=artifact,
    )


def cancel(
    actor: Actor,
    todo_id: int,
    *,
    attempt_seq: int | None = None,
    lease_token: str | None = None,
) -> Closed:
    """Stop the work for good: canceled. Allowed to the holder, the requester (an agent that
    sent it), the todo's own endpoint while nobody holds it, and a human of the team."""
    return _end(actor, "cancel", todo_id, attempt_seq=attempt_seq, lease_token=lease_token)


def _end(
    actor: Actor,
    verb: str,
    todo_id: int,
    *,
    attempt_seq: int | None,
    lease_token: str | None,
    result: Any = None,
    summary: str | None = None,
    artifact: str | None = None,
    retryable: bool = True,
) -> Closed:
    if actor.is_agent:
        _check_active(actor.endpoint)
    todo_id = checked_todo_id(todo_id)
    attempt_seq = _opt_seq(attempt_seq)
    _opt_token(lease_token)
    outcome, ok_state, counts_failure, sets_result = _CLOSES[verb]
    stored_result = bound_result(result) if sets_result else None
    summary_b = bound_summary(summary)
    if summary_b is NOTHING and sets_result and settings.SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT:
        summary_b = summary_from_result(stored_result)
    artifact_b = bound_artifact(artifact)
    params = {
        **actor.scope_params(),
        **_close_params(
            outcome=outcome,
            ok_state=ok_state,
            counts_failure=counts_failure,
            sets_result=sets_result,
            result=stored_result,
            summary=summary_b,
            artifact=artifact_b,
            force_dead=verb == "fail" and not retryable,
        ),
        "todo_id": todo_id,
        "attempt_seq": attempt_seq,
    }
    if actor.is_agent and lease_token is None:
        with _single_statement():
            rows = sql.fetch(sql.CLOSE_HELD_BY_AGENT, params)
        if rows:
            closed = _closed(rows)
            if closed.todo.state == TodoState.PENDING:
                _ring(closed.todo.endpoint_id)
            return closed
    with transaction.atomic(durable=True):
        return _end_checked(actor, verb, todo_id, attempt_seq, lease_token, params)


def _end_checked(
    actor: Actor,
    verb: str,
    todo_id: int,
    attempt_seq: int | None,
    lease_token: str | None,
    params: dict,
) -> Closed:
    """The locked path: classify the call (SPEC, "Which attempt a call means") and act."""
    locked = _lock(actor, todo_id)
    is_requester = actor.is_agent and locked.endpoint_id != actor.endpoint.pk
    if is_requester and verb != "cancel":
        raise NotFound()  # the requester may cancel and read; the queue is someone else's
    check = _attempts_for_check(todo_id, attempt_seq)
    open_attempt = check.open

    if open_attempt is not None:
        holds = _holds(actor, open_attempt)
        # Who may end an attempt they do not hold: a human releasing or canceling any lease
        # of their teams, and the requester canceling what it sent. Both pass the fence.
        overrides = (not actor.is_agent and verb in ("release", "cancel")) or (
            is_requester and verb == "cancel"
        )
        if holds and (attempt_seq is None or attempt_seq == open_attempt.seq):
            _check_fence(open_attempt, lease_token)
            return _close_checked(actor, verb, open_attempt.seq, params, locked, ended_by=None)
        if overrides and attempt_seq in (None, open_attempt.seq) and lease_token is None:
            return _close_checked(
                actor,
                verb,
                open_attempt.seq,
                params,
                locked,
                ended_by=None if actor.is_agent else actor.user.pk,
                ended_by_endpoint=actor.endpoint.pk if actor.is_agent else None,
            )
    elif verb == "cancel" and locked.state in (TodoState.PENDING, TodoState.RETRY_WAIT):
        if attempt_seq is not None or lease_token is not None:
            raise Conflict("That todo has no open attempt.")
        return _cancel_unclaimed(actor, locked)
    elif verb == "cancel" and locked.state == TodoState.CANCELED and attempt_seq is None:
        return Closed(todo=_read_todo(todo_id), attempt=None, replayed=True)

    # A repeat of a close this caller already made (a retry after a lost response) returns
    # the recorded result and writes nothing.
    named = check.named
    if (
        named is not None
        and named.ended_at is not None
        and _closed_by(actor, named, verb)
        and _fence_ok(named, lease_token)
    ):
        return Closed(
            todo=_read_todo(todo_id), attempt=_read_attempt(todo_id, named.seq), replayed=True
        )
    raise Conflict(_conflict_message(locked, open_attempt, attempt_seq))


def _close_checked(
    actor: Actor,
    verb: str,
    seq: int,
    params: dict,
    locked,
    *,
    ended_by: int | None,
    ended_by_endpoint: int | None = None,
) -> Closed:
    params = {
        **params,
        "attempt_seq": seq,
        "ended_by": ended_by,
        "ended_by_endpoint": ended_by_endpoint,
    }
    rows = sql.fetch(sql.CLOSE_CHECKED, params)
    closed = _closed(rows)
    if not actor.is_agent:
        _event(
            locked.id,
            locked.team_id,
            user=actor.user,
            kind=verb,
            detail={
                "attempt_seq": seq,
                "outcome": closed.attempt.outcome,
                "disposition": closed.attempt.disposition,
            },
        )
    elif locked.endpoint_id != actor.endpoint.pk:
        _event(
            locked.id,
            locked.team_id,
            endpoint=actor.endpoint,
            kind="cancel",
            detail={"attempt_seq": seq, "requester": True},
        )
    if closed.todo.state == TodoState.PENDING:
        _ring(closed.todo.endpoint_id)
    return closed


def _cancel_unclaimed(actor: Actor, locked) -> Closed:
    moved = Todo.objects.filter(pk=locked.id, state=locked.state).update(
        state=TodoState.CANCELED,
        next_retry_at=None,
        ended_at=Now(),
        updated_at=Now(),
    )
    if moved != 1:  # impossible under the row lock; guard anyway
        raise Conflict("That todo moved on; read it again.")
    _event(
        locked.id,
        locked.team_id,
        user=None if actor.is_agent else actor.user,
        endpoint=actor.endpoint,
        kind="cancel",
        detail={"from_state": locked.state},
    )
    return Closed(todo=_read_todo(locked.id), attempt=None)


def _close_params(
    *,
    outcome: str,
    ok_state: str,
    counts_failure: bool,
    sets_result: bool,
    result: Any,
    summary: Bounded,
    artifact: Bounded,
    force_dead: bool,
) -> dict:
    return {
        "outcome": outcome,
        "ok_state": ok_state,
        "counts_failure": counts_failure,
        "force_dead": force_dead,
        "sets_result": sets_result,
        "result": json.dumps(result) if sets_result and result is not None else None,
        "summary": summary.text,
        "summary_truncated": summary.truncated,
        "summary_bytes": summary.bytes,
        "artifact": artifact.text,
        "artifact_truncated": artifact.truncated,
        "artifact_bytes": artifact.bytes,
        "retry_base": settings.SWITCHBOARD_RETRY_BASE_SECONDS,
        "retry_max": settings.SWITCHBOARD_RETRY_MAX_SECONDS,
        "ended_by": None,
        "ended_by_endpoint": None,
    }


def _closed(rows: list) -> Closed:
    todo, attempt = split_row(rows[0])
    return Closed(todo=todo, attempt=attempt)


# ---------------------------------------------------------------------------------------
# Human-only: retry now, rerun


def retry_now(user, todo_id: int) -> TodoRecord:
    """A waiting retry (retry_wait) goes to pending at once: same round, counters kept."""
    return _requeue_by_hand(
        user,
        todo_id,
        from_states=(TodoState.RETRY_WAIT,),
        kind="retry_now",
        changes={"next_retry_at": None},
        message="Only a todo waiting to retry can be retried now.",
    )


def rerun(user, todo_id: int) -> TodoRecord:
    """A finished todo (dead, done or canceled) runs again in a new round: pending, round+1,
    attempt and failures reset, the result of record cleared (each attempt keeps its own)."""
    return _requeue_by_hand(
        user,
        todo_id,
        from_states=(TodoState.DEAD, TodoState.DONE, TodoState.CANCELED),
        kind="rerun",
        changes={
            "round": F("round") + 1,
            "attempt": 0,
            "failures": 0,
            "result": None,
            "dead_letter_reason": "",
            "ended_at": None,
            "not_before": None,
        },
        message="Only a done, dead or canceled todo can be rerun.",
    )


def _requeue_by_hand(
    user, todo_id: int, *, from_states: tuple, kind: str, changes: dict, message: str
) -> TodoRecord:
    actor = Actor.human(user)
    todo_id = checked_todo_id(todo_id)
    with transaction.atomic(durable=True):
        locked = _lock(actor, todo_id)
        if locked.state not in from_states:
            raise Conflict(message)
        moved = Todo.objects.filter(pk=todo_id, state=locked.state).update(
            state=TodoState.PENDING, updated_at=Now(), **changes
        )
        if moved != 1:
            raise Conflict("That todo moved on; read it again.")
        _event(todo_id, locked.team_id, user=user, kind=kind, detail={"from_state": locked.state})
        _ring(locked.endpoint_id)
        return _read_todo(todo_id)


# ---------------------------------------------------------------------------------------
# Endpoint revocation


def revoke_endpoint(endpoint: Endpoint, *, user=None) -> int:
    """End an endpoint: it can no longer authenticate; its live todos are dead-lettered with
    reason ``revoked`` (open attempts closed as revoked). Returns how many todos died."""
    with transaction.atomic(durable=True):
        updated = Endpoint.objects.filter(pk=endpoint.pk, revoked_at__isnull=True).update(
            revoked_at=Now()
        )
        if updated != 1:
            raise Conflict("That endpoint is already revoked.")
        killed = _dead_letter_live_todos(endpoint.pk, endpoint.team_id, user=user)
        TodoEvent.objects.create(
            team_id=endpoint.team_id,
            actor_user=user,
            kind="revoke",
            detail={"agent_id": endpoint.agent_id, "todos_dead_lettered": killed},
        )
        endpoint.refresh_from_db(fields=["revoked_at"])
        return killed


def dead_letter_revoked_leftovers() -> int:
    """The sweeper's safety net: a claim already in flight when its endpoint was revoked can
    commit after the revocation; such a todo is dead-lettered here. Returns how many."""
    killed = 0
    revoked = Endpoint.objects.filter(revoked_at__isnull=False, todos__state__in=LIVE_STATES)
    for endpoint_id, team_id in revoked.values_list("pk", "team_id").distinct():
        with transaction.atomic(durable=True):
            killed += _dead_letter_live_todos(endpoint_id, team_id, user=None)
    return killed


def _dead_letter_live_todos(endpoint_id: int, team_id: int, *, user) -> int:
    params = {
        **_close_params(
            outcome=Outcome.REVOKED,
            ok_state=TodoState.DEAD,
            counts_failure=False,
            sets_result=False,
            result=None,
            summary=NOTHING,
            artifact=NOTHING,
            force_dead=True,
        ),
        "endpoint_id": endpoint_id,
    }
    # Until none is left: a claim that committed after this statement's snapshot is
    # invisible to its join (see sql._CLAIM), so look again until a pass finds nothing.
    closed = []
    while rows := sql.fetch(sql.CLOSE_ALL_OF_ENDPOINT, params):
        closed.extend(rows)
    unclaimed = list(
        Todo.objects.filter(
            endpoint_id=endpoint_id, state__in=[TodoState.PENDING, TodoState.RETRY_WAIT]
        )
        .select_for_update()
        .values_list("pk", flat=True)
    )
    Todo.objects.filter(pk__in=unclaimed).update(
        state=TodoState.DEAD,
        dead_letter_reason=Outcome.REVOKED,
        next_retry_at=None,
        ended_at=Now(),
        updated_at=Now(),
    )
    TodoEvent.objects.bulk_create(
        TodoEvent(
            team_id=team_id,
            todo_id=pk,
            actor_user=user,
            kind="revoked",
            detail={"reason": "endpoint revoked", "open_attempt": False},
        )
        for pk in unclaimed
    )
    return len(closed) + len(unclaimed)


# ---------------------------------------------------------------------------------------
# The sweeper's transitions (no caller scope: they move no row between tenants and read
# nothing out)


def reap_lapsed(*, batch: int = 100) -> list[Closed]:
    """Close lapsed leases as reaped: pending below the cap, dead at it."""
    params = {
        **_close_params(
            outcome=Outcome.REAPED,
            ok_state=TodoState.PENDING,
            counts_failure=True,
            sets_result=False,
            result=None,
            summary=NOTHING,
            artifact=NOTHING,
            force_dead=False,
        ),
        "batch": batch,
    }
    with transaction.atomic(durable=True):
        rows = sql.fetch(sql.CLOSE_LAPSED, params)
        reaped = [Closed(*split_row(row)) for row in rows]
        for endpoint_id in {c.todo.endpoint_id for c in reaped if c.todo.state == "pending"}:
            _ring(endpoint_id)
        return reaped


def requeue_due_retries(*, batch: int = 500) -> int:
    """Move due retry_wait todos to pending and ring their endpoints' doorbells. (A claim
    does not wait for this: a due retry_wait todo is already claimable.)"""
    with transaction.atomic(durable=True):
        rows = sql.fetch(sql.REQUEUE_DUE_RETRIES, {"batch": batch})
        for endpoint_id in {endpoint_id for _, endpoint_id in rows}:
            _ring(endpoint_id)
        return len(rows)


# ---------------------------------------------------------------------------------------
# Private helpers


@dataclass(frozen=True, slots=True)
class _Locked:
    id: int
    state: str
    endpoint_id: int
    requester_id: int | None
    last_attempt_seq: int
    round: int
    team_id: int


@dataclass(frozen=True, slots=True)
class _CheckAttempt:
    seq: int
    claimer_kind: str
    endpoint_id: int | None
    user_id: int | None
    fenced_hash: str | None
    ended_at: datetime | None
    outcome: str
    ended_by_id: int | None
    ended_by_endpoint_id: int | None


@dataclass(frozen=True, slots=True)
class _Check:
    open: _CheckAttempt | None
    named: _CheckAttempt | None


@contextmanager
def _single_statement() -> Iterator[None]:
    """A transition that is one SQL statement needs no BEGIN/COMMIT of its own: in
    autocommit the statement is its own transaction, all or nothing, and the deferred
    one-open-attempt constraint is checked at its end. Inside a caller's transaction (tests),
    a savepoint keeps a failing statement from aborting the caller's."""
    if connection.in_atomic_block:
        with transaction.atomic():
            yield
    else:
        yield


def _lock(actor: Actor, todo_id: int) -> _Locked:
    statement = sql.LOCK_TODO_AGENT if actor.is_agent else sql.LOCK_TODO_USER
    rows = sql.fetch(statement, {**actor.scope_params(), "todo_id": todo_id})
    if not rows:
        raise NotFound()
    return _Locked(*rows[0])


def _attempts_for_check(todo_id: int, attempt_seq: int | None) -> _Check:
    rows = sql.fetch(sql.ATTEMPT_FOR_CHECK, {"todo_id": todo_id, "attempt_seq": attempt_seq})
    found = [_CheckAttempt(*row) for row in rows]
    open_attempt = next((a for a in found if a.ended_at is None), None)
    if attempt_seq is not None:
        named = next((a for a in found if a.seq == attempt_seq), None)
    else:
        closed = [a for a in found if a.ended_at is not None]
        named = max(closed, key=lambda a: a.seq) if closed else None
    return _Check(open=open_attempt, named=named)


def _holds(actor: Actor, attempt: _CheckAttempt) -> bool:
    if actor.is_agent:
        return attempt.claimer_kind == ClaimerKind.ENDPOINT and (
            attempt.endpoint_id == actor.endpoint.pk
        )
    return attempt.claimer_kind == ClaimerKind.OWNER and attempt.user_id == actor.user.pk


def _closed_by(actor: Actor, attempt: _CheckAttempt, verb: str) -> bool:
    """Did this caller end this attempt with this verb (so a repeat may replay it)? An
    attempt ended by someone other than its holder records who: a person (``ended_by``) or
    the requester (``ended_by_endpoint``)."""
    if attempt.outcome != _CLOSES[verb][0]:
        return False
    if actor.is_agent:
        if attempt.ended_by_id is not None:
            return False
        if attempt.ended_by_endpoint_id is not None:
            return attempt.ended_by_endpoint_id == actor.endpoint.pk
        return attempt.endpoint_id == actor.endpoint.pk
    return attempt.ended_by_id == actor.user.pk or (
        attempt.ended_by_id is None
        and attempt.ended_by_endpoint_id is None
        and _holds(actor, attempt)
    )


def _fence_ok(attempt: _CheckAttempt, lease_token: str | None) -> bool:
    """A fenced attempt needs its token; an unfenced one takes none (any token is wrong)."""
    if attempt.fenced_hash is not None:
        return tokens.matches(lease_token, attempt.fenced_hash)
    return lease_token is None


def _check_fence(attempt: _CheckAttempt, lease_token: str | None) -> None:
    if not _fence_ok(attempt, lease_token):
        raise Conflict("The lease token does not match this todo's open attempt.")


def _check_seq_and_fence(
    attempt: _CheckAttempt, attempt_seq: int | None, lease_token: str | None
) -> None:
    if attempt_seq is not None and attempt_seq != attempt.seq:
        raise Conflict(f"attempt_seq {attempt_seq} is not the open attempt.")
    _check_fence(attempt, lease_token)


def _conflict_message(
    locked: _Locked, open_attempt: _CheckAttempt | None, attempt_seq: int | None
) -> str:
    if open_attempt is None:
        return f"That todo has no open attempt (it is {locked.state})."
    if attempt_seq is not None and attempt_seq != open_attempt.seq:
        return f"attempt_seq {attempt_seq} is not the open attempt; it has ended."
    return "The caller does not hold this todo's open attempt, or its lease token differs."


def _raise_missing_or_conflict(actor: Actor, todo_id: int, message: str) -> None:
    visible = sql.fetch(
        sql.SELECT_TODO.format(scope=sql.SCOPE_ENDPOINT if actor.is_agent else sql.SCOPE_USER),
        {**actor.scope_params(), "todo_id": todo_id},
    )
    if not visible:
        raise NotFound()
    raise Conflict(message)


def _read_todo(todo_id: int) -> TodoRecord:
    rows = sql.fetch(sql.SELECT_TODO.format(scope="true"), {"todo_id": todo_id})
    return TodoRecord.from_row(rows[0])


def _read_attempt(todo_id: int, seq: int) -> AttemptRecord | None:
    rows = sql.fetch(sql.SELECT_ATTEMPT, {"todo_id": todo_id, "seq": seq})
    return AttemptRecord.from_row(rows[0]) if rows else None


def _team_of(todo: TodoRecord) -> int:
    return Endpoint.objects.values_list("team_id", flat=True).get(pk=todo.endpoint_id)


def _event(
    todo_id: int | None,
    team_id: int,
    *,
    user=None,
    endpoint: Endpoint | None = None,
    kind: str,
    detail: dict | None = None,
) -> None:
    TodoEvent.objects.create(
        team_id=team_id,
        todo_id=todo_id,
        actor_user=user,
        actor_endpoint=endpoint,
        kind=kind,
        detail=detail or {},
    )


def _ring(endpoint_id: int) -> None:
    """Wake claim_next long-polls of this endpoint (delivered by PostgreSQL at commit)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.RING_DOORBELL, {"endpoint_id": endpoint_id})


def _check_active(endpoint: Endpoint) -> None:
    if endpoint.revoked_at is not None:
        raise Unauthorized("This endpoint has been revoked.")


def _lease_seconds(value: Any, default: int) -> int:
    if value is None:
        return min(default, MAX_LEASE_SECONDS)
    return whole_number(value, "lease_seconds", 1, MAX_LEASE_SECONDS)


def _opt_seq(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1:
        raise Invalid("attempt_seq must be a positive whole number.")
    return value


def _opt_token(value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not 1 <= len(value) <= 200):
        raise Invalid("lease_token must be a string.")
