"""The Board's statements of its own: the drawer's snapshot, and the queue's capped tab
counts.

The drawer's snapshot. Why raw SQL: Django's ``transaction.atomic()`` cannot name an isolation level or a read-only
transaction, and the connection's level is fixed in its settings. The drawer reads a todo and
its attempts in two statements; under READ COMMITTED each sees the database at its own
instant, so a claim that commits between them gave a drawer whose header said "pending, try
1" while its strip showed an open try 2 (and offered both "Claim it myself" and "Release
their lease"). As the first statement of the transaction this makes both reads one snapshot.

Not in ``queues.sql.statements()``: PREPARE takes only SELECT, INSERT, UPDATE, DELETE and
VALUES, so the check that prepares every listed statement cannot take a SET;
tests/board/test_drawer_snapshot.py runs it (and shows the two reads agree under a claim
committed between them).

The tab counts. Why raw SQL: a count that stops at a cap is a LIMIT inside a subquery for
each state, beside each other in one statement; the ORM writes one query per sliced count.
"""

from __future__ import annotations

from queues.db import Statement

__all__ = ["BEGIN_DRAWER_SNAPSHOT", "COUNT_TODOS_BY_STATE_CAPPED"]

BEGIN_DRAWER_SNAPSHOT = Statement(
    "begin_drawer_snapshot",
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    why="an isolation level and read-only mode for one transaction (the ORM has neither)",
)


# Todos of the teams' endpoints (or of one of them) in each state, each count stopped at
# ``cap`` + 1 (the Board's tabs say "10,000+"): a bounded walk of todos_endpoint_state for
# each state and endpoint.
COUNT_TODOS_BY_STATE_CAPPED = Statement(
    "count_todos_by_state_capped",
    """
SELECT s.state,
       (SELECT count(*)
          FROM (SELECT 1 FROM todos t
                 WHERE t.state = s.state
                   AND t.endpoint_id IN (
                       SELECT e.id FROM endpoints e
                        WHERE e.team_id = ANY(%(team_ids)s::bigint[])
                          AND (%(endpoint_id)s::bigint IS NULL OR e.id = %(endpoint_id)s::bigint))
                 LIMIT %(cap)s + 1) AS upto) AS n
  FROM unnest(%(states)s::text[]) AS s(state)
""",
    why="counts that stop at a cap, one LIMIT subquery per state, in one statement",
)
