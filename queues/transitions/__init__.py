"""The lease state machine: the one package that changes a todo's state.

Each public transition is one durable transaction that moves the todo *and* opens or closes
its attempt. Views, API verbs, MCP tools, admin actions, the sweeper and tests all call these;
nothing else writes ``state``. Transitions never call each other; shared steps are the
package's private helpers (``_common``). One module per family:

- ``create``: a new todo;             - ``claim``: claim_next, claim;
- ``hold``: heartbeat;                - ``close``: complete, fail, release, cancel;
- ``decide``: how an attempt ends (``Close``) and what that does to its todo (``decide``);
- ``by_hand``: a person's retry now, rerun, cancel of a dead letter and take over, and the
  rerun or cancel of many todos a person confirmed (the Board's bulk actions);
- ``revoke``: an endpoint's revocation;
- ``sweep``: reap lapsed leases, requeue due retries;  - ``admission``: the claim limit.

Each transition is a plan (queues/db/executor.py) — ``claim_next_plan(...)`` and so on — that decides
in plain code and yields its statements; ``claim_next(...)`` runs it on Django's connection,
``await db.arun(claim_next_plan(...))`` on the async pool. Who may act is an ``Actor``: an
agent (an endpoint) or a person (a user acting from the Board).
"""

from queues.transitions._common import Actor
from queues.transitions.by_hand import (
    act_on_confirmed,
    cancel_dead_letter,
    cancel_dead_letter_plan,
    rerun,
    rerun_plan,
    retry_now,
    retry_now_plan,
    take_over,
    take_over_plan,
)
from queues.transitions.claim import claim, claim_next, claim_next_plan, claim_plan
from queues.transitions.close import (
    ClosedThenClaimed,
    cancel,
    cancel_plan,
    complete,
    complete_plan,
    complete_then_claim_next_plan,
    fail,
    fail_plan,
    release,
    release_plan,
)
from queues.transitions.create import create_todo, create_todo_plan
from queues.transitions.decide import Budget, Close, CloseKind, Decision, decide
from queues.transitions.hold import heartbeat, heartbeat_plan
from queues.transitions.revoke import dead_letter_revoked_leftovers, revoke_endpoint
from queues.transitions.sweep import reap_lapsed, requeue_due_retries

__all__ = [
    "Actor",
    "act_on_confirmed",
    "Budget",
    "Close",
    "CloseKind",
    "ClosedThenClaimed",
    "Decision",
    "cancel",
    "cancel_dead_letter",
    "cancel_dead_letter_plan",
    "cancel_plan",
    "claim",
    "claim_next",
    "claim_next_plan",
    "claim_plan",
    "complete",
    "complete_plan",
    "complete_then_claim_next_plan",
    "create_todo",
    "create_todo_plan",
    "dead_letter_revoked_leftovers",
    "decide",
    "fail",
    "fail_plan",
    "heartbeat",
    "heartbeat_plan",
    "reap_lapsed",
    "release",
    "release_plan",
    "requeue_due_retries",
    "rerun",
    "rerun_plan",
    "retry_now",
    "retry_now_plan",
    "revoke_endpoint",
    "take_over",
    "take_over_plan",
]
