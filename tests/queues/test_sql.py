"""The named statements' plans: index-backed as the generic plans PostgreSQL caches for the
prepared hot statements, and the sweeper's statistics refresh that invalidates a plan made
while the tables were empty."""

from __future__ import annotations

import logging
import re

import pytest
from django.db import connection

from switchboard.queues import sql, sweeper, transitions
from switchboard.queues.sql import fragments
from tests.queues.helpers import analyze, seed_done_history


def _generic_plan(statement) -> str:
    """EXPLAIN (GENERIC_PLAN) of a statement, with its placeholders as the server sees them
    ($1, $2, ...), i.e. the plan a prepared statement caches (PostgreSQL 16+)."""
    numbers: dict[str, int] = {}

    def placeholder(match: re.Match) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    query = re.sub(r"%\((\w+)\)s", placeholder, statement.text)
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version_num')::int")
        if cursor.fetchone()[0] < 160000:
            pytest.skip("EXPLAIN (GENERIC_PLAN) needs PostgreSQL 16 or newer")
        cursor.execute("EXPLAIN (GENERIC_PLAN) " + query.replace("%%", "%"))
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.django_db
def test_hot_statements_plan_index_scans_once_analyzed(agent, make_todo):
    for n in range(300):
        todo = make_todo(f"t{n}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id)
    make_todo("waiting")
    with connection.cursor() as cursor:
        # Over a history of a real size: at 300 attempts alone a Seq Scan can be the cheaper
        # plan, and which one the planner took followed where the worker's earlier tests had
        # left free space (the attempts' order on disk), so the test failed on some workers
        # (test_attempt_plans.py holds the claims and closes to the same over 200,000).
        seed_done_history(cursor, agent.endpoint.pk, 20_000)
        # With autovacuum kept off them: a run beside a CPU hog planned TEAM_LAST_HOUR
        # over an empty-looking todo_attempts and chose a Seq Scan (helpers.analyze).
        analyze(cursor, "todos", "todo_attempts")

    claim = _generic_plan(sql.CLAIM_NEXT)
    assert "todos_claimable" in claim and "Insert on todo_attempts" in claim
    assert "switchboard_todo_unclaimed(" in claim  # passes over a row claimed since
    both = _generic_plan(sql.CLOSE_THEN_CLAIM_NEXT)  # the close's, then the claim's
    assert "todos_claimable" in both and "Insert on todo_attempts" in both
    assert both.count("Update on todos") == 2 and "Update on todo_attempts" in both
    keyed = _generic_plan(sql.CLOSE_THEN_CLAIM_NEXT_KEYED)  # the same, passing over keys
    assert "todos_claimable" in keyed and "todos_key_claimed" in keyed, keyed
    for statement in (
        sql.CLAIM_NEXT,
        sql.CLOSE_THEN_CLAIM_NEXT,
        sql.CLOSE_THEN_CLAIM_NEXT_KEYED,
        sql.CLOSE_HELD_BY_AGENT,
        sql.HEARTBEAT_HELD_BY_AGENT,
        sql.CLOSE_CHECKED,
        sql.SELECT_ATTEMPTS,
        sql.LIST_TODOS,
        sql.TEAM_LAST_HOUR,  # the overview's: each endpoint's range, never the whole table
    ):
        plan = _generic_plan(statement)
        assert "Seq Scan on todo_attempts" not in plan, plan
        assert "Seq Scan on todos" not in plan, plan


@pytest.mark.django_db
def test_a_keyed_pick_probes_its_key_and_never_reads_every_endpoints_keys(make_endpoint):
    """The pick's key filter counts the candidate's own key's claimed todos by the partial
    index of claimed keyed todos, beside 20,000 keyed todos of another endpoint: never a scan
    of every todo, nor of every todo of the key (as NOT EXISTS over a table of every key
    ever claimed, the planner once hashed it whole at each claim: 14-18 ms a claim beside
    50,000 keys of another endpoint, 0.2-0.3 ms probed; docs/benchmarks.md)."""
    other = make_endpoint("many-keys")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason, key)"
            " SELECT %s, 'k', '', 0, 'pending', 3, 0, 0, 1, 0, 0, '', '', 'k' || (g %% 200)"
            " FROM generate_series(1, 20000) g",
            [other.pk],
        )
        analyze(cursor, "todos")
    for statement in (sql.CLAIM_NEXT_KEYED, sql.CLOSE_THEN_CLAIM_NEXT_KEYED):
        plan = _generic_plan(statement)
        assert "todos_key_claimed" in plan, plan
        # The row's re-read (switchboard_todo_unclaimed) only for a key under its limit: left
        # to cost order, the planner called it first, for every row the key passed over.
        assert "THEN switchboard_todo_unclaimed(" in plan, plan


# The statements that find one todo (or a list of them) by id and check its state.
_FOUND_BY_ID = (
    "close_held_by_agent",
    "close_then_claim_next",
    "close_then_claim_next_keyed",
    "close_checked",
    "close_many",
    "budget_held_by_agent",
    "heartbeat_held_by_agent",
    "heartbeat_checked",
    "take_over",
    "retry_now",
)


@pytest.mark.django_db
def test_a_todo_found_by_its_id_is_read_by_its_id_whatever_the_statistics_say(agent, make_todo):
    """Statistics taken while nothing was claimed (an idle queue, then a burst) make
    todos_sweep_due's range of claimed todos look like one row. A statement that finds a
    todo by its id and offers that index its state check was planned to walk the range:
    every claimed todo, for each close and heartbeat (956 buffers a close with 2,000 claimed;
    docs/ledger.md). The state is checked on the row the id found instead."""
    for n in range(20):
        make_todo(f"waiting {n}")
    with connection.cursor() as cursor:  # a table of a real size, all done
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason, ended_at)"
            " SELECT %s, 'done ' || g, '', 0, 'done', 5, 1, 0, 1, 0, 0, '', '',"
            " statement_timestamp() FROM generate_series(1, 20000) g",
            [agent.endpoint.pk],
        )
        analyze(cursor, "todos", "todo_attempts")
    for _ in range(20):
        transitions.claim_next(agent)
    statements = {statement.name: statement for statement in sql.statements()}
    for name in _FOUND_BY_ID:
        plan = _generic_plan(statements[name])
        scans = [line for line in plan.splitlines() if re.search(r"Scan .*on todos t\b", line)]
        assert scans, (name, plan)
        first = scans[0]
        assert "todos_pkey" in first or "todos_endpoint_list" in first, (name, plan)


@pytest.mark.django_db
def test_claimable_at_is_the_indexes_expression():
    """queues.sql.claimable_at is written out by hand; the planner only reads an expression
    index for it when the two are the same expression: PostgreSQL's own text of each index
    expression equals its text of the fragment (and tests/queues/test_attempt_plans.py pins
    the picks that order by it to those indexes, with no sort)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_indexdef(i.indexrelid, 3, true), pg_get_indexdef(j.indexrelid, 2, true)"
            "  FROM pg_index i, pg_index j"
            " WHERE i.indexrelid = 'todos_claimable'::regclass"
            "   AND j.indexrelid = 'todos_sweep_due'::regclass"
        )
        in_claimable, in_sweep_due = cursor.fetchone()
        cursor.execute(
            "CREATE TEMP VIEW claimable_probe AS SELECT "
            + fragments.claimable_at("todos")
            + " AS c FROM todos"
        )
        cursor.execute("SELECT pg_get_viewdef('claimable_probe'::regclass, true)")
        fragment = cursor.fetchone()[0]

    def bare(text: str) -> str:  # one space for each run of white space, no outer brackets
        text = re.sub(r"\s+", " ", text).strip()
        return re.sub(r"^\( ?(.*?) ?\)$", r"\1", text)

    # the view says "SELECT <expr> AS c FROM todos;", with the column qualified by the table
    body = re.sub(r"^\s*SELECT\s+|\s+AS c\s+FROM todos;?\s*$", "", fragment, flags=re.S)
    assert bare(body.replace("todos.", "")) == bare(in_claimable)
    assert bare(in_claimable).startswith(
        "CASE WHEN state::text = 'claimed'::text THEN lease_expires_at"
    )
    assert in_claimable == in_sweep_due


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_analyzes_a_table_that_outgrew_its_statistics(endpoint, caplog):
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE todos")
        cursor.execute(
            "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,"
            " attempt, failures, round, last_attempt_seq, attempts_pruned, owner,"
            " dead_letter_reason) SELECT %s, 'bulk', '', 0, 'pending', 5, 0, 0, 1, 0, 0, '', ''"
            " FROM generate_series(1, 2000)",
            [endpoint.pk],
        )
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with caplog.at_level(logging.INFO, logger="switchboard.sweeper"):
        sweeper.sweep_once()
    assert any("analyzed todos" in r.getMessage() for r in caplog.records)
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'todos'")
        assert cursor.fetchone()[0] >= 2000


@pytest.mark.django_db
@pytest.mark.parametrize("statement", sql.statements(), ids=lambda s: s.name)
def test_every_named_statement_prepares_against_the_schema(statement):
    """Each statement of queues/sql is valid SQL against the migrated schema, with every
    parameter it names: PREPARE parses, resolves and plans it without running it."""
    numbers: dict[str, int] = {}

    def placeholder(match: re.Match) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    assert statement.name and statement.why, statement
    text = re.sub(r"%\((\w+)\)s", placeholder, statement.text).replace("%%", "%")
    with connection.cursor() as cursor:
        if text.startswith("LISTEN"):  # a utility statement: runs, cannot be prepared
            cursor.execute(text)
            cursor.execute("UNLISTEN *")
            return
        cursor.execute(f"PREPARE switchboard_check AS {text}")
        cursor.execute("DEALLOCATE switchboard_check")
