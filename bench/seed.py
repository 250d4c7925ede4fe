"""Table states for the drains: empty tables, or a baseline of history, then N pending items.

Ours has ``todos`` + ``todo_attempts``, bare ``bench_bare_jobs``: neither disturbs the other's
statistics. History is done items (ours with one closed attempt each), as many for both.
"""

from __future__ import annotations

from contextlib import contextmanager, suppress

from django.db import connection

_VIA = None  # when set (``via``), statements run on this psycopg connection, not Django's
TABLES = {"ours": ("todos", "todo_attempts"), "bare": ("bench_bare_jobs",)}
HISTORY_TODOS = """
INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt, failures,
                   round, last_attempt_seq, attempts_pruned, owner, dead_letter_reason, result,
                   created_at, updated_at, ended_at)
SELECT %(ep)s, 'history ' || g, '', 0, 'done', 5, 1, 0, 1, 1, 0, '', '', '{"ok": true}',
       ts, ts + interval '2 s', ts + interval '2 s'
  FROM generate_series(1, %(n)s) g,
       LATERAL (SELECT now() - interval '7 days' + g * interval '1 ms') x(ts)
"""
HISTORY_ATTEMPTS = """
INSERT INTO todo_attempts (
    todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id, mcp_session_id,
    mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated,
    claimant_bytes, claimed_at, last_heartbeat_at, lease_expires_at, ended_at, outcome,
    disposition, ended_by_id, summary, summary_truncated, summary_bytes, summary_document,
    artifact, artifact_truncated, artifact_bytes, result, lease_token_hash)
SELECT t.id, 1, 1, 1, 'endpoint', %(ep)s, NULL, '', false, 0, 'agent:bench-agent',
       'bench/history', false, 13, t.created_at + interval '1 s',
       t.created_at + interval '1500 ms', t.created_at + interval '301 s', t.ended_at,
       'completed', 'done', NULL, 'rebuilt the docs; 3 warnings, no errors (history row)',
       false, 52, to_tsvector('simple', 'rebuilt the docs; 3 warnings, no errors (history row)'),
       NULL, false, 0, '{"ok": true}', NULL
  FROM todos t WHERE t.id > %(first)s
"""
PENDING = {
    "ours": "INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt,"
    " failures, round, last_attempt_seq, attempts_pruned, owner, dead_letter_reason)"
    " SELECT %(ep)s, 'bench todo ' || g, '', 0, 'pending', 5, 0, 0, 1, 0, 0, '', ''"
    " FROM generate_series(1, %(n)s) g",
    "bare": "INSERT INTO bench_bare_jobs (endpoint_id, state, created_at, result)"
    " SELECT %(ep)s, %(state)s, now() - interval '7 days' + g * interval '1 ms', %(result)s"
    " FROM generate_series(1, %(n)s) g",
}


@contextmanager
def via(pg_connection):
    """Run this module's statements on another (autocommit) psycopg connection: another
    PostgreSQL session, so nothing cached in Django's session is used or disturbed."""
    global _VIA
    saved, _VIA = _VIA, pg_connection
    try:
        yield
    finally:
        _VIA = saved


def scalar(statement: str, params=None):
    """Run one statement (on Django's connection, or ``via``'s); its first value, if any."""
    if _VIA is not None:
        cursor = _VIA.execute(statement, params)
        return cursor.fetchone()[0] if cursor.description else None
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()[0] if cursor.description else None


def make_endpoint() -> int:
    """A user (with its personal team) and an endpoint vended on it; returns the endpoint id."""
    from django.contrib.auth import get_user_model

    from queues import endpoints

    user = get_user_model().objects.create_user(username="bench", password="bench-only")
    return endpoints.vend(user.teams.get(), "bench-agent", verbs="all")[0].pk


def checkpoint() -> None:
    """Each drain from a fresh checkpoint (full-page writes alike in every drain)."""
    with suppress(Exception):  # needs superuser or pg_checkpoint; without, carry on
        scalar("CHECKPOINT")


def truncate(system: str) -> None:
    # todos cascades to todo_attempts and todo_events (the vend event goes too; harmless).
    scalar(f"TRUNCATE {', '.join(TABLES[system])} RESTART IDENTITY CASCADE")


def analyze(system: str, vacuum: bool = False) -> None:
    for table in TABLES[system]:
        scalar(f"{'VACUUM (ANALYZE)' if vacuum else 'ANALYZE'} {table}")


def add_history(system: str, endpoint_id: int, rows: int) -> None:
    """``rows`` done items, each with one closed attempt (ours)."""
    if system == "bare":
        done = {"ep": endpoint_id, "n": rows, "state": "done", "result": '{"ok": true}'}
        return scalar(PENDING["bare"], done)
    # ANALYZE, the todos, ANALYZE, then their attempts: each insert's deferred foreign-key
    # checks run at its commit on plans this session cached, and one made while todos was
    # small scans per check (docs/benchmarks.md, "A fifth look"); ANALYZE invalidates them.
    first = max_id(system)
    analyze(system)
    with _no_autovacuum("todos"):
        scalar(HISTORY_TODOS, {"ep": endpoint_id, "n": rows})
    analyze(system)
    scalar(HISTORY_ATTEMPTS, {"ep": endpoint_id, "first": first})


@contextmanager
def _no_autovacuum(table: str):
    """One transaction holding ``table`` in SHARE UPDATE EXCLUSIVE mode (inserts go on,
    autovacuum's ANALYZE does not). An auto-ANALYZE during a big insert into an empty table
    sees its new pages but none of its rows (not yet committed) and records an empty table
    of thousands of pages; the insert's deferred foreign-key checks (todo_search_documents'
    on todos), planned at its commit, then took ``todos_endpoint_state``, whose id is a later
    column, and read all of it for every row: the growth section's 200,000-row history ran
    for over 15 minutes (gdb: RI_FKey_check under AfterTriggerFireDeferred; the same generic
    plan in EXPLAIN with those statistics)."""
    scalar("BEGIN")
    try:
        scalar(f"LOCK TABLE {table} IN SHARE UPDATE EXCLUSIVE MODE")
        yield
    except BaseException:
        scalar("ROLLBACK")
        raise
    scalar("COMMIT")


def add_pending(system: str, endpoint_id: int, rows: int) -> None:
    scalar(PENDING[system], {"ep": endpoint_id, "n": rows, "state": "pending", "result": None})


def max_id(system: str) -> int:
    return scalar(f"SELECT coalesce(max(id), 0) FROM {TABLES[system][0]}")


def delete_after(system: str, last_id: int) -> None:
    """Back to a baseline: drop the items a drain made (attempts go with them)."""
    scalar(f"DELETE FROM {TABLES[system][0]} WHERE id > %s", (last_id,))


def attempts_after(after_id: int) -> int:
    """The attempt rows of ours' todos after ``after_id`` (a drain's)."""
    return scalar("SELECT count(*) FROM todo_attempts WHERE todo_id > %s", (after_id,))


def unfinished(system: str, after_id: int) -> int:
    return scalar(
        f"SELECT count(*) FROM {TABLES[system][0]} WHERE id > %s AND state <> 'done'", (after_id,)
    )


class Scenario:
    """A table state every drain of a system starts from: ``history=None``, empty tables
    (TRUNCATE, ANALYZE of the empty tables as on a fresh install, then the pending items
    with the statistics unrefreshed); ``history=H``, H done items as a baseline, then per
    drain: delete what the last drain made, VACUUM (ANALYZE), add the items, ANALYZE."""

    def __init__(self, name: str, endpoint_id: int, history: int | None):
        self.name, self.endpoint_id, self.history = name, endpoint_id, history
        self.baseline: dict[str, int] = {}

    def build(self, systems) -> None:
        for system in systems:
            truncate(system)
            if self.history:
                add_history(system, self.endpoint_id, self.history)
                analyze(system, vacuum=True)
            self.baseline[system] = max_id(system)

    def reset(self, system: str, pending: int) -> int:
        """``system`` back in this scenario's state with ``pending`` items to drain; returns
        the id after which the drain's items start."""
        if self.history is None:
            truncate(system)
            analyze(system)
            add_pending(system, self.endpoint_id, pending)
            checkpoint()
            return 0
        delete_after(system, self.baseline[system])
        analyze(system, vacuum=True)
        add_pending(system, self.endpoint_id, pending)
        analyze(system)
        checkpoint()
        return self.baseline[system]
