"""What-if variants of *our* loop, measured next to the code as it is, in the same run.

The bench never edits queues/ or switchboard/. A *code* variant is a monkeypatch applied in a
worker process for the length of one drain and then undone; a *schema* variant changes the
bench's own database (``switchboard_bench``) and is reverted afterwards. ``baseline`` is the
code and schema as they are in the working tree.

  prepared     the hot statements (claim_next, the agent's close, heartbeat) run as
               server-side prepared statements (psycopg ``prepare=True`` on a server-binding
               cursor) instead of Django's client-side-binding cursor, which PostgreSQL has to
               parse, analyse and plan again on every call. PostgreSQL's default
               plan_cache_mode (auto) decides custom vs generic plans.
  prepared-custom  as ``prepared``, with plan_cache_mode=force_custom_plan in the session:
               the parse/analysis is cached but every call is planned with its parameters
               and current statistics (no generic plan can outlive the statistics it was
               made from).
  compact-sql  the same statements with comments and indentation stripped, so CLAIM_NEXT
               fits psycopg's 4096-byte query-conversion cache.
  lean-indexes (schema) drop the indexes no query of ours reads and that every non-HOT
               update of a todo or attempt must maintain; see LEAN_INDEXES_SQL.
"""

from __future__ import annotations

CODE_VARIANTS = {
    "baseline": "queues/ as it is",
    "prepared": "hot statements server-side prepared (plan_cache_mode auto)",
    "prepared-custom": "hot statements server-side prepared, force_custom_plan",
    "compact-sql": "hot statements with comments/indentation stripped (< 4096 bytes)",
}
SCHEMA_VARIANTS = {
    "lean-indexes": "drop 4 redundant/unused indexes, make 4 FK indexes partial (NOT NULL)",
}
VARIANTS = {**CODE_VARIANTS, **SCHEMA_VARIANTS}

# Dropped: duplicates of a left prefix of another index (todos.endpoint_id is the prefix of
# todos_endpoint_list; todo_attempts.todo_id of todo_attempts_todo_seq) and the FK index on
# todo_attempts.endpoint_id (endpoints are never deleted; no query filters attempts by it).
# Made partial: FK indexes that exist for ON DELETE SET NULL of a user/endpoint and are NULL
# on almost every row; a partial index is not touched when its predicate is false.
LEAN_INDEXES_SQL = """
DROP INDEX IF EXISTS {todos_endpoint};
DROP INDEX IF EXISTS {todos_created_by};
DROP INDEX IF EXISTS {todos_requester};
CREATE INDEX bench_todos_created_by_nn ON todos (created_by_id) WHERE created_by_id IS NOT NULL;
CREATE INDEX bench_todos_requester_nn ON todos (requester_id) WHERE requester_id IS NOT NULL;
DROP INDEX IF EXISTS {attempts_todo};
DROP INDEX IF EXISTS {attempts_endpoint};
DROP INDEX IF EXISTS {attempts_user};
DROP INDEX IF EXISTS {attempts_ended_by};
CREATE INDEX bench_attempts_user_nn ON todo_attempts (user_id) WHERE user_id IS NOT NULL;
CREATE INDEX bench_attempts_ended_by_nn ON todo_attempts (ended_by_id)
    WHERE ended_by_id IS NOT NULL;
"""

# Single-column FK indexes Django made, found by table and column (their names carry a hash).
_FK_INDEXES = {
    "todos_endpoint": ("todos", "endpoint_id"),
    "todos_created_by": ("todos", "created_by_id"),
    "todos_requester": ("todos", "requester_id"),
    "attempts_todo": ("todo_attempts", "todo_id"),
    "attempts_endpoint": ("todo_attempts", "endpoint_id"),
    "attempts_user": ("todo_attempts", "user_id"),
    "attempts_ended_by": ("todo_attempts", "ended_by_id"),
}


def compact(statement: str) -> str:
    """Drop ``--`` comments and collapse whitespace outside single-quoted literals."""
    out: list[str] = []
    i, n = 0, len(statement)
    pending_space = False
    while i < n:
        ch = statement[i]
        if ch == "'":
            j = i + 1
            while j < n:
                if statement[j] == "'":
                    if j + 1 < n and statement[j + 1] == "'":
                        j += 2
                        continue
                    break
                j += 1
            if pending_space and out:
                out.append(" ")
            pending_space = False
            out.append(statement[i : j + 1])
            i = j + 1
        elif statement.startswith("--", i):
            j = statement.find("\n", i)
            i = n if j < 0 else j
            pending_space = True
        elif ch.isspace():
            pending_space = True
            i += 1
        else:
            if pending_space and out:
                out.append(" ")
            pending_space = False
            out.append(ch)
            i += 1
    return "".join(out).strip()


_HOT = ("CLAIM_NEXT", "CLOSE_HELD_BY_AGENT", "HEARTBEAT_HELD_BY_AGENT")

# Statements that went through a patched path in this process: a variant that patched
# nothing (the code it patches has moved) must fail loudly, not measure the baseline twice.
HITS = 0


def apply(name: str) -> list[tuple[object, str, object]]:
    """Apply a code variant in this (worker) process; returns what ``undo`` needs."""
    global HITS
    saved: list[tuple[object, str, object]] = []
    if name in ("baseline", *SCHEMA_VARIANTS):
        return saved
    from queues import sql, transitions

    if name == "compact-sql":
        for attr in _HOT:
            old = getattr(sql, attr)
            saved.append((sql, attr, old))
            setattr(sql, attr, compact(old))
            HITS += len(compact(old)) < len(old)
        return saved
    if name in ("prepared", "prepared-custom") and not hasattr(transitions, "_fetch"):
        # Since queues.sql.fetch prepares the hot statements itself, "prepared" is what ours
        # already does; "prepared-custom" keeps it and forces a plan per call.
        from django.db import connection

        HITS += 1
        mode = "force_custom_plan" if name == "prepared-custom" else "auto"
        with connection.cursor() as cursor:
            cursor.execute(f"SET plan_cache_mode = {mode}")
        saved.append((None, "plan_cache_mode", None))
        return saved
    if name in ("prepared", "prepared-custom"):
        import psycopg
        from django.db import connection

        hot = {id(getattr(sql, attr)) for attr in _HOT}
        original = transitions._fetch

        def _fetch(statement: str, params: dict) -> list:
            global HITS
            if id(statement) not in hot:
                return original(statement, params)
            HITS += 1
            connection.ensure_connection()
            pg = connection.connection
            if pg.prepare_threshold is None:
                # Django turns psycopg's statement preparation off (prepare_threshold=None);
                # with a threshold set, only explicit prepare=True calls prepare here,
                # because Django's own cursors bind client-side and never prepare.
                pg.prepare_threshold = 1_000_000
            with connection.wrap_database_errors, psycopg.Cursor(pg) as cursor:
                cursor.execute(statement, params, prepare=True)
                return cursor.fetchall()

        saved.append((transitions, "_fetch", original))
        transitions._fetch = _fetch
        mode = "force_custom_plan" if name == "prepared-custom" else "auto"
        with connection.cursor() as cursor:
            cursor.execute(f"SET plan_cache_mode = {mode}")
        saved.append((None, "plan_cache_mode", None))
        return saved
    raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")


def undo(saved: list[tuple[object, str, object]]) -> None:
    for obj, attr, old in reversed(saved):
        if obj is None and attr == "plan_cache_mode":
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("RESET plan_cache_mode")
                # Drop this session's prepared statements so the next drain starts cold.
                cursor.execute("DEALLOCATE ALL")
            pg = connection.connection
            pg._prepared.clear()
            continue
        setattr(obj, attr, old)


def fk_index_names() -> dict[str, str | None]:
    """The hashed names of Django's single-column FK indexes in the bench database."""
    from django.db import connection

    found: dict[str, str | None] = {}
    with connection.cursor() as cursor:
        for key, (table, column) in _FK_INDEXES.items():
            cursor.execute(
                """
                SELECT i.relname
                  FROM pg_index x
                  JOIN pg_class i ON i.oid = x.indexrelid
                  JOIN pg_class t ON t.oid = x.indrelid
                  JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]
                 WHERE t.relname = %s AND a.attname = %s AND x.indnatts = 1
                   AND x.indpred IS NULL AND NOT x.indisunique
                """,
                (table, column),
            )
            row = cursor.fetchone()
            found[key] = row[0] if row else None
    return found


def apply_schema(name: str) -> str | None:
    """Apply a schema variant to the bench database; returns the SQL that reverts it."""
    if name != "lean-indexes":
        return None
    from django.db import connection

    names = fk_index_names()
    missing = [k for k, v in names.items() if v is None]
    if missing:
        raise RuntimeError(f"lean-indexes: expected FK indexes not found: {missing}")
    with connection.cursor() as cursor:
        # Remember the definitions to restore them exactly.
        cursor.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = ANY(%s)",
            (list(names.values()),),
        )
        restore = [row[0] + ";" for row in cursor.fetchall()]
        cursor.execute(LEAN_INDEXES_SQL.format(**names))
    revert = "\n".join(
        [
            "DROP INDEX IF EXISTS bench_todos_created_by_nn;",
            "DROP INDEX IF EXISTS bench_todos_requester_nn;",
            "DROP INDEX IF EXISTS bench_attempts_user_nn;",
            "DROP INDEX IF EXISTS bench_attempts_ended_by_nn;",
            *restore,
        ]
    )
    return revert


def revert_schema(revert_sql: str | None) -> None:
    if not revert_sql:
        return
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(revert_sql)
