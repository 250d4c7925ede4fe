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

The snapshot is not in ``queues.sql.statements()``: PREPARE takes only SELECT, INSERT, UPDATE, DELETE and
VALUES, so the check that prepares every listed statement cannot take a SET;
tests/board/test_drawer_snapshot.py runs it (and shows the two reads agree under a claim
committed between them).
"""

from __future__ import annotations

from queues.db import Statement

__all__ = ["BEGIN_DRAWER_SNAPSHOT", "SEARCH_STATEMENT_TIMEOUT"]

BEGIN_DRAWER_SNAPSHOT = Statement(
    "begin_drawer_snapshot",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    why="an isolation level and read-only mode for one transaction (the ORM has neither)",
)

SEARCH_STATEMENT_TIMEOUT = Statement(
    "search_statement_timeout",
    "SELECT set_config('statement_timeout', %(milliseconds)s, true)",
    why="a statement timeout for one transaction (the ORM has no SET LOCAL)",
)
