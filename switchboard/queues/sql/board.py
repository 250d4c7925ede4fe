"""The Board's statements of its own: the drawer's snapshot and a search's time bound.

Why raw SQL: Django's ``transaction.atomic()`` cannot name an isolation level or a read-only
transaction, and the connection's level is fixed in its settings. The drawer reads a todo and
its attempts in two statements; under READ COMMITTED each sees the database at its own
instant, so a claim that commits between them gave a drawer whose header said "pending, try
1" while its strip showed an open try 2 (and offered both "Claim it myself" and "Release
their lease"). As the first statement of the transaction this makes both reads one snapshot.

A search's bound: ``SET LOCAL statement_timeout`` cannot take a parameter, so the setting is
made with ``set_config(…, true)`` (local to the transaction, like SET LOCAL). It ends with
the transaction: the pooled connection goes back as it came (tests/board/test_search.py).
The same statement takes one of the person's search slots (``SWITCHBOARD_SEARCHES_PER_USER``),
an advisory lock ``(lock_class + slot, user id)`` held until the transaction ends: the first
free slot is taken (``LIMIT 1`` stops at the first lock granted; a lock refused is not held).

The snapshot is not in ``queues.sql.statements()``: PREPARE takes only SELECT, INSERT, UPDATE, DELETE and
VALUES, so the check that prepares every listed statement cannot take a SET;
tests/board/test_drawer_snapshot.py runs it (and shows the two reads agree under a claim
committed between them).
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement

__all__ = [
    "BEGIN_DRAWER_SNAPSHOT",
    "PAGE_STATEMENT_TIMEOUT",
    "RESET_STATEMENT_TIMEOUT",
    "SEARCH_STATEMENT_TIMEOUT",
]

BEGIN_DRAWER_SNAPSHOT = Statement(
    "begin_drawer_snapshot",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    why="an isolation level and read-only mode for one transaction (the ORM has neither)",
)

SEARCH_STATEMENT_TIMEOUT = Statement(
    "search_statement_timeout",
    """
    SELECT set_config('statement_timeout', %(milliseconds)s, true),
           EXISTS (
               SELECT FROM generate_series(0, %(slots)s - 1) AS slot
               WHERE pg_try_advisory_xact_lock(%(lock_class)s + slot, %(searcher)s)
               LIMIT 1
           ) AS admitted
    """,
    why="a statement timeout for one transaction (the ORM has no SET LOCAL), and one of the "
    "searcher's slots taken for it: transaction-scoped advisory locks, so the count holds "
    "across every web process and a slot is given back by the commit or the rollback",
)

# A page's bound (switchboard.unavailable): a setting of the session, made and reset on the
# driver's connection around a Board or admin page (run with psycopg's own placeholders).
PAGE_STATEMENT_TIMEOUT = Statement(
    "page_statement_timeout",
    "SELECT set_config('statement_timeout', %(milliseconds)s, false)",
    why="a statement timeout for the session while one page is read (the ORM has no SET)",
)

RESET_STATEMENT_TIMEOUT = Statement(
    "reset_statement_timeout",
    "RESET statement_timeout",
    why="the server's default back before the connection returns to the pool (no ORM RESET)",
)
