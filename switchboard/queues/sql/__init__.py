"""Every raw SQL statement of the ledger, named, each with a line on why the ORM could not say
it (procrastinate's ``-- name --`` queries are the model). One module per family:

- ``create``: a new todo, and finding one by its sender's idempotency key;
- ``claim``: claim_next and claim (pick, take over a lapsed lease, prune, open, read back);
- ``close``: complete, fail, release, cancel, reap, revoke (one statement each), heartbeat,
  and the locked read behind every slow path;
- ``by_hand``: a person's retry now and rerun, cancel of an unclaimed todo or a dead letter,
  the lock of a bulk rerun or cancel;
- ``revoke``: an endpoint's revocation and the todos it kills;
- ``ask``: a question and its wait: recorded, answered, expired, read back;
- ``waits``: todos made after others, children, keys and their limits, and their reads;
- ``reads``: the todo and attempt reads of get_todo, list_todos and the Board's drawer;
- ``activity``: the Activity feed: endings and events, one statement (the Activity page, the
  tickers, the Board stream);
- ``accounts``: endpoint tokens, admission, the sign-in throttle;
- ``events``: the audit trail's writer and the doorbell's ring;
- ``health``: the endpoint page's queue now and its last hour and day of endings;
- ``live``: the Board stream's watch list and what it reads once per watched team;
- ``push``: A2A push-notification configs, and the todo's count of them;
- ``sweep``: the sweeper's batches, retention, its status row, the outbox's pruning;
- ``counters``: the metrics fold and counter upserts;
- ``board``: the drawer's snapshot (a SET, which PREPARE cannot take: not in ``statements()``),
  a search's and a page's statement timeouts.

Statements are parameterised (never formatted with input); the fragments formatted in here,
once, at import, are fixed strings of this package. Row layouts come from the records'
sources (queues.records ``TODO_SOURCE``, ``ATTEMPT_SOURCE``), so a width is never kept by hand.
tests/queues/test_sql.py prepares every statement here against the real schema and checks the
hot ones' plans; each is also exercised by the transitions and reads that use it.

All lease arithmetic uses the database clock: ``statement_timestamp()``, the same clock as
Django's ``Now()`` (the models' ``db_default``), so a row written by the ORM and a lease
computed here compare on one timeline even inside a long transaction.
"""

from __future__ import annotations

import sys
from types import ModuleType

from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.accounts import *  # noqa: F403
from switchboard.queues.sql.activity import *  # noqa: F403
from switchboard.queues.sql.ask import *  # noqa: F403
from switchboard.queues.sql.board import *  # noqa: F403
from switchboard.queues.sql.by_hand import *  # noqa: F403
from switchboard.queues.sql.claim import *  # noqa: F403
from switchboard.queues.sql.close import *  # noqa: F403
from switchboard.queues.sql.counters import *  # noqa: F403
from switchboard.queues.sql.create import *  # noqa: F403
from switchboard.queues.sql.events import *  # noqa: F403
from switchboard.queues.sql.fragments import Scoped
from switchboard.queues.sql.health import *  # noqa: F403
from switchboard.queues.sql.live import *  # noqa: F403
from switchboard.queues.sql.push import *  # noqa: F403
from switchboard.queues.sql.reads import *  # noqa: F403
from switchboard.queues.sql.revoke import *  # noqa: F403
from switchboard.queues.sql.schedules import *  # noqa: F403
from switchboard.queues.sql.sweep import *  # noqa: F403
from switchboard.queues.sql.waits import *  # noqa: F403

# The modules whose statements PREPARE cannot take: ``board``'s SETs.
_NOT_PREPARABLE = ("switchboard.queues.sql.board",)


def statements() -> list[Statement]:
    """Every preparable statement of the package (for the test that prepares each one)."""
    found = {}
    for module in list(vars(sys.modules[__name__]).values()):
        if not isinstance(module, ModuleType) or not module.__name__.startswith(__name__ + "."):
            continue
        if module.__name__ in _NOT_PREPARABLE:
            continue
        for value in vars(module).values():
            for statement in (value.agent, value.user) if isinstance(value, Scoped) else (value,):
                if isinstance(statement, Statement):
                    found[statement.name] = statement
    return list(found.values())
