"""The hot statements' plans over a large attempt history (issue 13): 200,000 done todos with
a closed attempt each, ANALYZEd, then the generic plans PostgreSQL caches for the prepared
statements (EXPLAIN (GENERIC_PLAN)). Pinned: no sequential scan of ``todos`` or
``todo_attempts``; every claim that reads attempts checks its snapshot with one backward probe
of the ``(todo_id, seq)`` index keyed by an InitPlan parameter; the fast claim_next reads no
attempt and writes none but the new one; the takeover claims find a lapsed attempt by
InitPlan keys and prune by a range of the same index; a close finds the open attempt through
the one-open index; the prior attempts are one backward range scan. One seed, a few
seconds."""

from __future__ import annotations

import re

import pytest
from django.db import connection

from switchboard.queues import sql
from tests.queues.helpers import analyze, seed_done_history

HISTORY = 200_000

# Todos waiting out a retry backoff, due: the sweeper's pick of them must walk an index in
# due order, and with none at all both of the indexes it may use cost the same, so its plan
# followed whatever the worker's earlier tests had left in them (a flake once files shared
# workers differently). Written for that fix but never run, until a newcomer's clean clone
# failed the same way again (the requeue planned over todos_claimable with a Sort).
SEED_RETRIES = """
INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt,
                   failures, round, last_attempt_seq, attempts_pruned, owner,
                   dead_letter_reason, next_retry_at, created_at, updated_at)
SELECT %(ep)s, 'retrying', '', 0, 'retry_wait', 5, 1, 1, 1, 0, 0, '', '',
       now() - g * interval '1 s', now() - interval '1 day', now()
  FROM generate_series(1, %(n)s) g
"""
RETRIES = 5_000


def _generic_plan(statement) -> str:
    numbers: dict[str, int] = {}

    def placeholder(match: re.Match) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    query = re.sub(r"%\((\w+)\)s", placeholder, statement.text).replace("%%", "%")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (GENERIC_PLAN, COSTS OFF) " + query)
        return "\n".join(row[0] for row in cursor.fetchall())


HOT = (
    sql.CLAIM_NEXT,
    sql.CLAIM_NEXT_TAKEOVER,
    sql.CLAIM_ONE_AGENT,
    sql.CLAIM_ONE_AGENT_TAKEOVER,
    sql.CLAIM_ONE_USER,
    sql.CLAIM_ONE_USER_TAKEOVER,
    sql.CLOSE_HELD_BY_AGENT,
    sql.CLOSE_CHECKED,
    sql.CLOSE_MANY,
    sql.LAPSED_LEASES,
    sql.BUDGET_HELD_BY_AGENT,
    sql.HEARTBEAT_HELD_BY_AGENT,
    sql.HEARTBEAT_CHECKED,
    sql.ATTEMPT_FOR_CHECK,
    sql.SELECT_ATTEMPTS,
    sql.PRIOR_ATTEMPTS,
    sql.REQUEUE_DUE_RETRIES,
)


@pytest.mark.django_db
def test_hot_plans_over_200k_attempts_scan_indexes_only(endpoint):
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version_num')::int")
        if cursor.fetchone()[0] < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16 or newer")
        seed_done_history(cursor, endpoint.pk, HISTORY)
        cursor.execute("SET session_replication_role = replica")  # as the history's seed
        cursor.execute(SEED_RETRIES, {"ep": endpoint.pk, "n": RETRIES})
        cursor.execute("RESET session_replication_role")
        analyze(cursor, "todos", "todo_attempts")
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'todo_attempts'")
        assert cursor.fetchone()[0] >= HISTORY
    plans = {statement.name: _generic_plan(statement) for statement in HOT}
    for name, plan in plans.items():
        assert "Seq Scan on todo_attempts" not in plan, (name, plan)
        assert "Seq Scan on todos" not in plan, (name, plan)

    claims = ("claim_next", "claim_one_agent", "claim_one_user")
    takeovers = ("claim_next_takeover", "claim_one_agent_takeover", "claim_one_user_takeover")
    for name in claims + takeovers:
        # no prior attempts read here (PRIOR_ATTEMPTS, after the claim, when there are any)
        assert "auth_user" not in plans[name], (name, plans[name])
    for name in claims:
        # the fast claims read no attempt at all (a pick that needs one comes back slow)
        assert "todo_attempts x" not in plans[name], (name, plans[name])
    for name in takeovers:
        # newest (the freshness check): one backward index probe keyed by pick's id
        assert re.search(
            r"Index Scan Backward using todo_attempts_todo_seq on todo_attempts x\s*\n"
            r"\s*Index Cond: \(todo_id = \$\d+\)",
            plans[name],
        ), (name, plans[name])

    # the picks walk their index in claimable_at order (queues.sql.claimable_at is the
    # indexes' expression): a LIMIT over the index, never a sort of every claimable todo
    for name, index in (
        ("claim_next", "todos_claimable"),
        ("requeue_due_retries", "todos_sweep_due"),
    ):
        assert re.search(rf"Index Scan using {index} on todos", plans[name]), plans[name]
        assert "Sort" not in plans[name], plans[name]

    # the fast claim_next: the new attempt, nothing else (no attempt read, so no freshness
    # check: queues/sql/claim.py)
    fast = plans["claim_next"]
    assert "Insert on todo_attempts" in fast, fast
    assert fast.count("todo_attempts") == 1, fast
    for arm in ("Update on todo_attempts", "Delete on todo_attempts", "metric_deltas"):
        assert arm not in fast, (arm, fast)

    for name in takeovers:
        plan = plans[name]
        # lapsed: its keys are InitPlan parameters (NULL, so no scan, unless a lease lapsed)
        assert re.search(
            r"using todo_attempts_\w+ on todo_attempts a\s*\n\s*Index Cond: \(todo_id = \$\d+\)",
            plan,
        ), (name, plan)
        # pruned: a range of the (todo_id, seq) index, behind the cap's own test
        assert re.search(
            r"Filter: \(ok AND \(NOT dies\) AND \(\(\(last_attempt_seq \+ 1\) - \$\d+\) > "
            r"attempts_pruned\)\)\s*\n\s*->  Index Scan using todo_attempts_todo_seq",
            plan,
        ), (name, plan)

    assert re.search(
        r"Index Scan Backward using todo_attempts_todo_seq on todo_attempts x\s*\n"
        r"\s*Index Cond: \(\(todo_id = \$1\) AND \(seq < \$2\)",
        plans["prior_attempts"],
    ), plans["prior_attempts"]
    for name in ("close_held_by_agent", "close_checked", "close_many", "budget_held_by_agent"):
        assert "todo_attempts_one_open" in plans[name], (name, plans[name])
