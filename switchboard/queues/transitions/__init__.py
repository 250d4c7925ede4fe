"""The lease state machine: the one package that changes a todo's state.

Each public transition is one durable transaction that moves the todo *and* opens or closes
its attempt (a close with ``then`` is two, the close committed before the claim). Views, API
verbs, MCP tools, admin actions, the sweeper and tests all call these; nothing else writes
``state``. Shared steps are the package's private helpers (``_common``); a transition that
is another's step runs its plan (``close_then_claim_next`` claims with ``claim_next``'s, a
person's bulk cancel ends each attempt with ``end``). One module per family:

- ``create``: a new todo;             - ``claim``: claim_next, claim;
- ``hold``: heartbeat;
- ``close``: complete, fail, release, cancel, and a close with ``then`` (``close_then_claim_next``);
- ``decide``: how an attempt ends (``Close``) and what that does to its todo (``decide``);
- ``by_hand``: a person's retry now, rerun, cancel of a dead letter and take over, and the
  rerun or cancel of many todos a person confirmed (the Board's bulk actions);
- ``ask``: a question's wait: recorded by an asking close, answered, expired by the sweeper;
- ``waits``: a create's ``after``, ``parent`` and keys, a parent's cancel of its children, a
  person's start now, the sweeper's release of what a trigger left;
- ``revoke``: an endpoint's revocation;
- ``sweep``: reap lapsed leases, requeue due retries;  - ``admission``: the claim limit.

Each transition is a plan (queues/db/plans.py) that decides in plain code and yields its
statements, declared once with ``@transition``: ``claim_next(...)`` runs it on Django's
connection, ``await db.arun(claim_next.plan(...))`` on the async pool, with the same explicit
parameters. Who may act is an ``Actor``: an agent (an endpoint) or a person (a user acting
from the Board).
"""

from switchboard.queues.transitions._common import Actor, ClaimArgs, Transition
from switchboard.queues.transitions.ask import answer, expire_questions
from switchboard.queues.transitions.by_hand import (
    act_on_confirmed,
    cancel_dead_letter,
    rerun,
    retry_now,
    take_over,
)
from switchboard.queues.transitions.claim import claim, claim_next
from switchboard.queues.transitions.close import (
    Next,
    Then,
    cancel,
    close_then_claim_next,
    complete,
    end,
    fail,
    release,
)
from switchboard.queues.transitions.create import create_todo
from switchboard.queues.transitions.decide import Close, CloseKind, Decision, decide
from switchboard.queues.transitions.hold import heartbeat
from switchboard.queues.transitions.revoke import dead_letter_revoked_leftovers, revoke_endpoint
from switchboard.queues.transitions.sweep import reap_lapsed, requeue_due_retries
from switchboard.queues.transitions.waits import release_leftovers, start_now

__all__ = [
    "Actor",
    "ClaimArgs",
    "Close",
    "CloseKind",
    "Decision",
    "Next",
    "Then",
    "Transition",
    "act_on_confirmed",
    "answer",
    "cancel",
    "cancel_dead_letter",
    "claim",
    "claim_next",
    "close_then_claim_next",
    "complete",
    "create_todo",
    "dead_letter_revoked_leftovers",
    "decide",
    "end",
    "expire_questions",
    "fail",
    "heartbeat",
    "reap_lapsed",
    "release",
    "release_leftovers",
    "requeue_due_retries",
    "rerun",
    "retry_now",
    "revoke_endpoint",
    "start_now",
    "take_over",
]
