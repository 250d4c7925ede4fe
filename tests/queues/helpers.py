"""Small helpers for ledger tests: a controllable clock is a backdated row."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import connection, connections

from switchboard.queues import db, selectors
from switchboard.queues.models import TodoAttempt, TodoEvent
from switchboard.queues.transitions import Actor


def backdate(update: str, params: list, *, rows: int = 1) -> None:
    """Run ``update``, an UPDATE that moves a row's times back (the DB clock decides lapses,
    retries and retention), and check it changed ``rows`` rows."""
    with connection.cursor() as cursor:
        cursor.execute(update, params)
        assert cursor.rowcount == rows


def lapse_lease(todo_id: int, *, seconds_ago: int = 1) -> None:
    """Make a claimed todo's lease lapse without waiting: the DB clock decides lapses."""
    backdate(
        "UPDATE todos SET lease_expires_at = statement_timestamp()"
        " - make_interval(secs => %s) WHERE id = %s AND state = 'claimed'",
        [seconds_ago, todo_id],
    )


def a_lapsed_lease(endpoint, title: str = "work"):
    """A new todo of ``endpoint``'s, claimed, whose lease has lapsed."""
    from switchboard.queues import transitions

    todo, _ = transitions.create_todo(Actor.agent(endpoint), title=title)
    transitions.claim_next(Actor.agent(endpoint))
    lapse_lease(todo.id)
    return todo


def make_retry_due(todo_id: int) -> None:
    backdate(
        "UPDATE todos SET next_retry_at = statement_timestamp() - interval '1 second'"
        " WHERE id = %s AND state = 'retry_wait'",
        [todo_id],
    )


def row_trigger(name: str, body: str, *, before: str = "UPDATE", table: str = "todos"):
    """SQL that creates, and SQL that drops, a test trigger ``name``: the PL/pgSQL ``body``
    runs before each ``before`` of a row of ``table`` (a real failure injected in the
    database, never a mock)."""
    create = (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n{body}\nEND $$;\n"
        f"CREATE TRIGGER {name} BEFORE {before} ON {table}\n"
        f"    FOR EACH ROW EXECUTE FUNCTION {name}();\n"
    )
    drop = f"DROP TRIGGER IF EXISTS {name} ON {table};\nDROP FUNCTION IF EXISTS {name}();\n"
    return create, drop


def analyze(cursor, *tables: str) -> None:
    """ANALYZE ``tables`` for a plan the test reads next. Inside the test's transaction (a
    test that is rolled back), autovacuum is kept off them until it ends (SHARE UPDATE
    EXCLUSIVE): its ANALYZE does not see the transaction's rows and writes a table's size in
    place, not transactionally, so a run beside a CPU hog once planned over an
    empty-looking todo_attempts (tests/queues/test_sql.py)."""
    if connection.in_atomic_block:
        cursor.execute(f"LOCK TABLE {', '.join(tables)} IN SHARE UPDATE EXCLUSIVE MODE")
    for table in tables:
        cursor.execute(f"ANALYZE {table}")


_DONE_HISTORY = """
WITH t AS (
    INSERT INTO todos (endpoint_id, title, body, priority, state, max_attempts, attempt,
                       failures, round, last_attempt_seq, attempts_pruned, owner,
                       dead_letter_reason, result, created_at, updated_at, ended_at)
    SELECT %(ep)s, 'history', '', 0, 'done', 5, 1, 0, 1, 1, 0, '', '', '{"ok": true}',
           ts, ts, ts
      FROM generate_series(1, %(n)s) g,
           LATERAL (SELECT now() - interval '7 days' + g * interval '1 ms') x(ts)
    RETURNING id, created_at
)
INSERT INTO todo_attempts (
    todo_id, seq, round, attempt, claimer_kind, endpoint_id, mcp_session_id,
    mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated,
    claimant_bytes, claimed_at, lease_expires_at, ended_at, outcome, disposition,
    summary_truncated, summary_bytes, artifact_truncated, artifact_bytes)
SELECT t.id, 1, 1, 1, 'endpoint', %(ep)s, '', false, 0, 'agent:x', '', false, 0,
       t.created_at, t.created_at, t.created_at, 'completed', 'done', false, 0, false, 0
  FROM t
"""


def seed_done_history(cursor, endpoint_id: int, n: int) -> None:
    """``n`` done todos of ``endpoint_id``, a week old, with a closed attempt each: a history of
    a real size for a plan to be read over (ANALYZE after). Consistent by construction, so no
    trigger runs for its rows (the foreign keys' checks, the search documents no plan reads);
    the row rules do."""
    cursor.execute("SET session_replication_role = replica")
    cursor.execute(_DONE_HISTORY, {"ep": endpoint_id, "n": n})
    cursor.execute("RESET session_replication_role")


def approval_form(field: str, *, title: str, most: int, amount_type: str = "number") -> dict:
    """A question's answer schema: an object of a required yes or no ``field`` and an optional
    ``amount`` (of JSON Schema type ``amount_type``) from 0 to ``most``."""
    return {
        "type": "object",
        "properties": {
            field: {"type": "boolean", "title": title},
            "amount": {"type": amount_type, "minimum": 0, "maximum": most},
        },
        "required": [field],
    }


# A schedule's audit when it was added, paused, resumed and removed: each change said once.
ADDED_PAUSED_RESUMED_REMOVED = [
    "schedule_add",
    "schedule_pause",
    "schedule_resume",
    "schedule_remove",
]


def schedule_audit() -> list[str]:
    """The kinds of the schedules' audit rows, oldest first."""
    return list(
        TodoEvent.objects.filter(kind__startswith="schedule_")
        .order_by("id")
        .values_list("kind", flat=True)
    )


def tables_as_json(*tables: str) -> tuple:
    """Every row of each of ``tables`` as JSON, in id order, in one statement: a snapshot to
    compare before and after, to assert that nothing was written."""
    selects = ", ".join(f"(SELECT json_agg(r ORDER BY id) FROM {table} r)" for table in tables)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {selects}")
        return cursor.fetchone()


def attempts_of(todo_id: int) -> list[TodoAttempt]:
    return list(TodoAttempt.objects.filter(todo_id=todo_id).order_by("seq"))


def outcomes(todo_id: int) -> list[tuple[str, str]]:
    return [(a.outcome, a.disposition) for a in attempts_of(todo_id)]


def events_of(todo_id: int) -> list[str]:
    return list(
        TodoEvent.objects.filter(todo_id=todo_id).order_by("id").values_list("kind", flat=True)
    )


def open_attempts(todo_id: int) -> int:
    return TodoAttempt.objects.filter(todo_id=todo_id, ended_at__isnull=True).count()


def run_together(target: Callable[[int], object], count: int, *, timeout: float = 300) -> list:
    """Run ``target(n)`` for n in range(count) in threads released together, each with its
    own database connection (closed at the end); return the exceptions they raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def run(n: int) -> None:
        try:
            barrier.wait()
            target(n)
        except BaseException as exc:  # surfaced by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return errors


def lock_waiters() -> int:
    """Sessions of this test database (each xdist worker has its own) waiting for a lock,
    row or advisory, read afresh even inside a transaction."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND datname = current_database()"
        )
        return cursor.fetchone()[0]


def wait_for(condition: Callable[[], object], *, seconds: float = 15) -> bool:
    """Poll ``condition`` until it holds (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def outcome_in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """``call()`` started on a thread of its own (its own connection, closed at the end): the
    thread, and a list that gets what it returned or the exception it raised."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # noqa: BLE001 (the test reads it)
            outcome.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@contextmanager
def held_open(
    statement: str | Callable[[], object], params: list | None = None, *, commit: bool = False
) -> Iterator[None]:
    """``statement`` (SQL, or a callable such as a transition) run in a transaction of another
    connection (a thread of its own), left open for the block: its row locks held, its writes
    uncommitted. At the end the transaction rolls back (commits, with ``commit``) and the
    thread's connection closes."""
    from django.db import transaction

    ran, done = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                if callable(statement):
                    statement()
                else:
                    with connection.cursor() as cursor:
                        cursor.execute(statement, params)
                ran.set()
                done.wait(30)
                transaction.set_rollback(not commit)
        finally:
            connections.close_all()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert ran.wait(30), "the held statement never ran"
        yield
    finally:
        done.set()
        thread.join(30)


@contextmanager
def sweeper_running(interval: float = 0.05) -> Iterator[threading.Thread]:
    """``sweeper.run_forever`` on a thread of its own (with its own connection, closed when it
    ends) for the block; stopped and joined at the end. Yields the thread."""
    from switchboard.queues import sweeper

    stop = threading.Event()

    def run() -> None:
        try:
            sweeper.run_forever(interval, stop)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(timeout=10)


def get_todo_for_endpoint(endpoint, todo_id, **arguments):
    """get_todo on the agent path, run on Django's connection (the test's transaction)."""
    return db.run(selectors.get_todo_for_endpoint_plan(endpoint, todo_id, **arguments))


def get_todo_for_user(user, todo_id, **arguments):
    """get_todo on the Board path, run on Django's connection."""
    return db.run(selectors.get_todo_for_user_plan(user, todo_id, **arguments))


def list_todos(endpoint, **arguments):
    """list_todos, run on Django's connection."""
    return db.run(selectors.list_todos_plan(endpoint, **arguments))
