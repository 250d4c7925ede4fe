"""How the ledger reaches PostgreSQL: plans (``plans``: statements, fetches, atomic parts),
the two executors that run them (``executor``), the pools' checks (``pool_checks``) and the
breaker that says whether the database is there (``availability``).

The modules import downwards only: plans ← availability ← pool_checks ← executor; this file
re-exports what the rest of the ledger uses (``db.run``, ``db.arun``, ``Fetch`` …).
"""

from switchboard.queues.db.executor import (
    arun,
    as_django_error,
    async_pool,
    close_async_pool,
    fetch,
    in_event_loop,
    run,
)
from switchboard.queues.db.plans import Atomic, Fetch, Plan, Statement, just, one

__all__ = [
    "Atomic",
    "Fetch",
    "Plan",
    "Statement",
    "arun",
    "as_django_error",
    "async_pool",
    "close_async_pool",
    "fetch",
    "in_event_loop",
    "just",
    "one",
    "run",
]
