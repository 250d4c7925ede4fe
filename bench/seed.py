"""Table states for the drains: empty tables, or a baseline of history, then N pending items.

Each system has its own tables, so one never disturbs another's statistics: ours (and the
nohist loop, which runs on ours) ``todos`` + ``todo_attempts``; bare ``bench_bare_jobs``;
hand ``bench_hand_jobs`` + ``bench_hand_attempts``. History is a bulk insert of *done* items,
each with one closed (completed) attempt where the system has attempts; the bare table gets
the same number of done rows, so the systems differ by what their statements do, not by
table size.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.db import connection

# When set (see ``via``), statements run on this psycopg connection instead of Django's.
_VIA = None


@contextmanager
def via(pg_connection):
    """Run this module's statements on another (autocommit) psycopg connection: a different
    PostgreSQL session, so nothing cached in Django's session is used or disturbed."""
    global _VIA
    saved, _VIA = _VIA, pg_connection
    try:
        yield
    finally:
        _VIA = saved


SYSTEM_TABLES = {
    "ours": ("todos", "todo_attempts"),
    "nohist": ("todos", "todo_attempts"),
    "once": ("todos", "todo_attempts"),
    "bare": ("bench_bare_jobs",),
    "hand": ("bench_hand_jobs", "bench_hand_attempts"),
}
_MAIN_TABLE = {
    "ours": "todos",
    "nohist": "todos",
    "once": "todos",
    "bare": "bench_bare_jobs",
    "hand": "bench_hand_jobs",
}


def _exec(statement: str, params=None) -> None:
    if _VIA is not None:
        _VIA.execute(statement, params)
        return
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _scalar(statement: str, params=None):
    if _VIA is not None:
        return _VIA.execute(statement, params).fetchone()[0]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()[0]


def make_endpoint() -> int:
    """A user (with its personal team) and an endpoint vended on it; returns the endpoint id."""
    from django.contrib.auth import get_user_model

    from queues import endpoints

    user = get_user_model().objects.create_user(username="bench", password="bench-only")
    endpoint, _token = endpoints.vend(user.teams.get(), "bench-agent", verbs="all")
    return endpoint.pk


def checkpoint() -> bool:
    """Start each drain from a fresh checkpoint (full-page writes land alike in every drain).
    Needs superuser or pg_checkpoint; without it the bench carries on."""
    try:
        _exec("CHECKPOINT")
        return True
    except Exception:  # noqa: BLE001
        return False


def truncate(system: str) -> None:
    tables = ", ".join(SYSTEM_TABLES[system])
    # todos cascades to todo_attempts and todo_events (the vend event goes too; harmless).
    _exec(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")


def analyze(system: str) -> None:
    for table in SYSTEM_TABLES[system]:
        _exec(f"ANALYZE {table}")


def vacuum_analyze(system: str) -> None:
    for table in SYSTEM_TABLES[system]:
        _exec(f"VACUUM (ANALYZE) {table}")


def add_history(system: str, endpoint_id: int, rows: int) -> None:
    """``rows`` done items, each with one closed attempt (for the systems that have them)."""
    if rows <= 0:
        return
    if system in ("ours", "nohist", "once"):
        # ANALYZE, the todos, ANALYZE, then their attempts. Each insert's deferred foreign-key
        # checks run at its commit on the plan this session has cached for them (todos' search
        # documents and the attempts both refer to todos), and a plan made while todos was
        # small scans the table or a whole index per check: the 200,000-row history took over
        # 20 minutes (docs/benchmarks.md, "A fifth look"). ANALYZE invalidates those plans, so
        # they are made again at the commit, over the table as it is then.
        first = max_id(system)
        analyze(system)
        _exec(
            """
            INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts,
                               attempt, failures, round, last_attempt_seq, attempts_pruned,
                               owner, dead_letter_reason, result, created_at, updated_at,
                               ended_at)
            SELECT %(ep)s, 'history ' || g, '', 0, 'done', 5, 1, 0, 1, 1, 0, '', '',
                   '{"ok": true}', ts, ts + interval '2 s', ts + interval '2 s'
              FROM generate_series(1, %(n)s) g,
                   LATERAL (SELECT now() - interval '7 days' + g * interval '1 ms') x(ts)
            """,
            {"ep": endpoint_id, "n": rows},
        )
        analyze(system)
        _exec(
            """
            INSERT INTO todo_attempts (
                todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id,
                mcp_session_id, mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated, claimant_bytes,
                claimed_at, last_heartbeat_at, lease_expires_at, ended_at, outcome,
                disposition, ended_by_id, summary, summary_truncated, summary_bytes,
                summary_document, artifact, artifact_truncated, artifact_bytes, result,
                lease_token_hash)
            SELECT t.id, 1, 1, 1, 'endpoint', %(ep)s, NULL, '', false, 0, 'agent:bench-agent',
                   'bench/history', false, 13, t.created_at + interval '1 s',
                   t.created_at + interval '1500 ms', t.created_at + interval '301 s',
                   t.ended_at, 'completed', 'done', NULL,
                   'rebuilt the docs; 3 warnings, no errors (history row)', false, 52,
                   to_tsvector('simple', 'rebuilt the docs; 3 warnings, no errors (history row)'),
                   NULL, false, 0, '{"ok": true}', NULL
              FROM todos t
             WHERE t.id > %(first)s
            """,
            {"ep": endpoint_id, "first": first},
        )
    elif system == "bare":
        _exec(
            """
            INSERT INTO bench_bare_jobs (endpoint_id, priority, state, created_at, result)
            SELECT %(ep)s, 0, 'done', now() - interval '7 days' + g * interval '1 ms',
                   '{"ok": true}'
              FROM generate_series(1, %(n)s) g
            """,
            {"ep": endpoint_id, "n": rows},
        )
    elif system == "hand":
        _exec(
            """
            WITH j AS (
                INSERT INTO bench_hand_jobs (endpoint_id, priority, state, attempt, created_at,
                                             result)
                SELECT %(ep)s, 0, 'done', 1, now() - interval '7 days' + g * interval '1 ms',
                       '{"ok": true}'
                  FROM generate_series(1, %(n)s) g
                RETURNING id, created_at
            )
            INSERT INTO bench_hand_attempts (job_id, seq, claimed_at, ended_at, outcome, result)
            SELECT j.id, 1, j.created_at, j.created_at + interval '2 s', 'completed',
                   '{"ok": true}'
              FROM j
            """,
            {"ep": endpoint_id, "n": rows},
        )
    else:
        raise ValueError(system)


def add_pending(system: str, endpoint_id: int, rows: int) -> None:
    if system in ("ours", "nohist", "once"):
        _exec(
            """
            INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt,
                               failures, round, last_attempt_seq, attempts_pruned, owner,
                               dead_letter_reason)
            SELECT %(ep)s, 'bench todo ' || g, '', 0, 'pending', 5, 0, 0, 1, 0, 0, '', ''
              FROM generate_series(1, %(n)s) g
            """,
            {"ep": endpoint_id, "n": rows},
        )
    else:
        table = _MAIN_TABLE[system]
        _exec(
            f"INSERT INTO {table} (endpoint_id, priority, state) "
            "SELECT %(ep)s, 0, 'pending' FROM generate_series(1, %(n)s) g",
            {"ep": endpoint_id, "n": rows},
        )


def max_id(system: str) -> int:
    return _scalar(f"SELECT coalesce(max(id), 0) FROM {_MAIN_TABLE[system]}")


def delete_after(system: str, last_id: int) -> None:
    """Back to a baseline: drop the items a drain made (attempts go with them)."""
    table = _MAIN_TABLE[system]
    _exec(f"DELETE FROM {table} WHERE id > %s", (last_id,))


def unfinished(system: str, after_id: int) -> int:
    table = _MAIN_TABLE[system]
    return _scalar(f"SELECT count(*) FROM {table} WHERE id > %s AND state <> 'done'", (after_id,))


def counts(system: str) -> dict:
    return {table: _scalar(f"SELECT count(*) FROM {table}") for table in SYSTEM_TABLES[system]}


class Scenario:
    """A table state every drain of a system starts from.

    ``history=None``: empty tables: TRUNCATE, ANALYZE of the empty tables (the statistics a
    fresh install has), then the pending items without refreshing statistics.
    ``history=H``: H done items with closed attempts as a baseline, then per drain: delete what
    the previous drain made, VACUUM (ANALYZE), add the pending items, ANALYZE (statistics
    refreshed).
    """

    def __init__(self, name: str, endpoint_id: int, history: int | None):
        self.name = name
        self.endpoint_id = endpoint_id
        self.history = history
        self._baseline: dict[str, int] = {}

    def build(self, systems) -> None:
        """The baseline of each system's tables (ours and nohist share theirs)."""
        for table in dict.fromkeys(_MAIN_TABLE[s] for s in systems):
            system = next(s for s in systems if _MAIN_TABLE[s] == table)
            truncate(system)
            if self.history:
                add_history(system, self.endpoint_id, self.history)
                vacuum_analyze(system)
            self._baseline[table] = max_id(system)

    def reset(self, system: str, pending: int) -> int:
        """Put ``system`` back in this scenario's state with ``pending`` items to drain.
        Returns the id after which the drain's items start."""
        if self.history is None:
            truncate(system)
            analyze(system)
            add_pending(system, self.endpoint_id, pending)
            checkpoint()
            return 0
        base = self._baseline[_MAIN_TABLE[system]]
        delete_after(system, base)
        vacuum_analyze(system)
        add_pending(system, self.endpoint_id, pending)
        analyze(system)
        checkpoint()
        return base
