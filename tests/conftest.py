"""Shared fixtures: small factories over the real database (never mocked)."""

from __future__ import annotations

import itertools

import pytest
from django.contrib.auth import get_user_model

from switchboard.queues import endpoints, transitions
from switchboard.queues.transitions import Actor

_n = itertools.count(1)


@pytest.fixture
def make_user(db):
    def make(username: str | None = None, **extra):
        return get_user_model().objects.create_user(
            username=username or f"user{next(_n)}", password="pw-for-tests", **extra
        )

    return make


@pytest.fixture
def user(make_user):
    return make_user("alice")


@pytest.fixture
def team(user):
    return user.teams.get()


@pytest.fixture
def logged_in(client, user):
    """Django's test client, signed in as alice."""
    client.force_login(user)
    return client


@pytest.fixture
def make_endpoint(vend):
    """``vend``, returning the endpoint without its token."""
    return lambda *args, **kwargs: vend(*args, **kwargs)[0]


@pytest.fixture
def endpoint(make_endpoint):
    return make_endpoint("agent-a")


@pytest.fixture
def make_todo(endpoint):
    """A todo on ``on``'s queue (the endpoint's, by default), made by that endpoint or, with
    ``requester``, sent by another endpoint of its team."""

    def make(title: str = "rebuild docs", *, on=None, requester=None, **kwargs):
        queue = on or endpoint
        todo, _ = transitions.create_todo(
            Actor.agent(requester or queue), endpoint=queue, title=title, **kwargs
        )
        return todo

    return make


@pytest.fixture
def agent(endpoint):
    return Actor.agent(endpoint)


@pytest.fixture
def human(user):
    return Actor.human(user)


@pytest.fixture(scope="session")
def live_server(django_db_setup, django_db_blocker):
    """The product's ASGI application under uvicorn, on a thread (tests/asgi_server.py), in
    place of pytest-django's threaded WSGI server: tests talk to the server agents talk to."""
    from tests.asgi_server import AsgiLiveServer

    with django_db_blocker.unblock():
        server = AsgiLiveServer()
    yield server
    server.stop()


@pytest.fixture
def vend(team):
    """Vend an endpoint and return (endpoint, token)."""

    def make(agent_id: str | None = None, *, team=team, verbs="all"):
        return endpoints.vend(team, agent_id or f"agent-{next(_n)}", verbs=verbs)

    return make


@pytest.fixture(autouse=True)
def _database_breaker_closed_after_each_test():
    """A test that made the database unreachable must not leave the next one refused."""
    yield
    from switchboard.queues.db.availability import breaker

    breaker.reset()


# Tests whose promise is a time bound (a wake-up within 250 ms, a page under 2 s beside 500
# waiters, a restart recovered within its bound). `make test` runs them in two lanes, each one
# after another on an xdist worker (the groups "serial-crash" and "serial") while the other
# workers take the rest a file at a time: their bounds hold beside a busy neighbour, as they
# must on a loaded machine (issue 27: the suite passes with two CPU hogs running), and their
# waiting no longer adds to the suite's wall time. One lane was 284 s of the suite's ~450 s,
# its floor; two lanes on four workers, 442 s against 483 s (issue 42). `pytest -m serial`
# runs them alone.
SERIAL = (
    "tests/crash/",
    "tests/agents/test_fleet.py",
    "tests/agents/test_doorbell.py",
    "tests/agents/test_pause_api.py",
    "tests/test_drain.py",
    "tests/deploy/",
    "tests/agents/test_api.py::test_a_waiting_claim_next_wakes_when_a_todo_is_created",
    "tests/agents/test_api.py::test_sixteen_long_polls_do_not_starve_other_requests",
    "tests/board/test_signin.py::test_concurrent_sign_ins_on_a_pool_of_one_never_answer_500",
    "tests/queues/test_availability.py::test_a_crowd_on_the_loop_is_answered_promptly_while_probes_hang",
)


# Files whose tests are each a unit of their own (long tests with no module fixture to share),
# and the units that start first, longest first (measured: docs/reliability.md, "The suite's
# time"): a long unit started last is the suite's tail.
ONE_TEST_A_UNIT = ("tests/queues/test_state_machine.py",)
FIRST = (
    "serial-crash",
    "serial",
    "tests/test_wheel.py",
    "tests/board/test_accessibility.py",
    "tests/test_cli.py",
    "tests/queues/test_admin.py",
    "tests/queues/test_state_machine.py::test_the_ledger_follows_the_state_table",
    "tests/board/test_hostile_input.py",
    "tests/queues/test_state_machine.py::test_the_ledger_follows_the_state_table_with_a_small_history_cap",
    "tests/test_client_wheel.py",
)


def lane_of(nodeid: str) -> str:
    """Where a test runs under xdist: one of the two lanes, or its file's own unit (a file stays
    on one worker: its module fixtures, a browser or a PostgreSQL of its own, are set up once)."""
    if nodeid.startswith(SERIAL):
        return "serial-crash" if nodeid.startswith("tests/crash/") else "serial"
    path = nodeid.split("::", 1)[0]
    return nodeid if path in ONE_TEST_A_UNIT else path


@pytest.hookimpl(optionalhook=True)  # xdist's hook: `-p no:xdist` runs without it
def pytest_xdist_make_scheduler(config, log):
    """xdist's own scheduler with ``lane_of`` as its unit of work and the FIRST units sent
    first. (Not ``--dist loadgroup``: it carries a test's group as a suffix it writes into the
    test's id, which pytest 9.2 no longer reads back, so every test went to whichever worker
    was free: the lanes ran side by side, and a file's module fixtures were set up on each
    worker that ran one of its tests.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Lanes(LoadScopeScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return lane_of(nodeid)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the first assignment: the queue is whole
                self.ordered = True
                rank = {unit: n for n, unit in enumerate(FIRST)}
                units = sorted(self.workqueue.items(), key=lambda u: rank.get(u[0], len(rank)))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return Lanes(config, log)


class _BrowsersStopped:
    """Stops this worker's Chromium (tests/board/conftest.py) before a test that does not use
    it, and at the end. A plugin, not a conftest hook, so that it sees every test, bench/'s
    included."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item) -> None:
        if "browser" not in item.fixturenames:
            _stop_browser()

    def pytest_sessionfinish(self) -> None:
        _stop_browser()


def _stop_browser() -> None:
    import sys

    board = sys.modules.get("tests.board.conftest")
    if board is not None:  # never imported: no browser was started
        board.stop_browser()


def pytest_configure(config) -> None:
    config.pluginmanager.register(_BrowsersStopped(), "switchboard-browsers-stopped")


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        if item.nodeid.startswith(SERIAL):
            item.add_marker(pytest.mark.serial)


# The garbage collector's full passes walk every object the process holds: each worker made
# 13-17 of them, 0.4-0.5 s apiece (Django, Playwright, hypothesis and every test module
# imported), 6.0-7.8 s a worker, the last two in pytest's own shutdown, at the suite's tail.
# What is loaded by the end of collection lives as long as the worker: frozen, the passes skip
# it (3.4-4.6 s a worker; measured with gc.callbacks, docs/reliability.md, "The suite's time,
# again"). Frozen again at the session's end, so the shutdown's passes walk only what is left.
def pytest_collection_finish(session) -> None:
    import gc

    gc.collect()
    gc.freeze()


def pytest_sessionfinish(session) -> None:
    import gc

    gc.freeze()


# What migrate makes and its post_migrate handlers keep (content types, permissions, the
# Operators group): the same before and after every test, so a transactional test's teardown
# leaves them.
_MADE_BY_MIGRATE = frozenset(
    {
        "django_migrations",
        "django_content_type",
        "auth_permission",
        "auth_group",
        "auth_group_permissions",
    }
)


def _emptied(self) -> None:
    """A transactional test's teardown: the rows of the tables the test wrote to, deleted.
    Django's own (``flush``) truncates every table, then runs every app's post_migrate
    handler to make the content types, permissions and groups again: 0.2 s a test, a fifth
    of the suite's time over its ~600 transactional tests. The end is the same: what migrate
    made is as migrate made it, every other model's table empty (one read says which have
    rows).

    DELETE, with the session as a replica's (no trigger fires and no foreign key is checked,
    so neither the order nor the ledger's own triggers matter), not TRUNCATE: a TRUNCATE
    makes each table and its indexes anew, 50 to 65 ms for the seven tables a todo touches
    against 2 ms for their few rows. A database user that may not set the role (not a
    superuser: a DATABASE_URL of one's own) gets the TRUNCATE."""
    import psycopg.errors
    from django.db import DatabaseError, connections, transaction

    for alias in self._databases_names(include_mirrors=False):
        connection = connections[alias]
        found = _tables_to_empty.get(alias)
        if found is None:
            names = connection.introspection.django_table_names(
                only_existing=True, include_views=False
            )
            quote = connection.ops.quote_name
            tables = [quote(name) for name in sorted(set(names) - _MADE_BY_MIGRATE)]
            which = " UNION ALL ".join(
                f"SELECT {n} WHERE EXISTS (SELECT FROM {table})" for n, table in enumerate(tables)
            )
            found = _tables_to_empty[alias] = (tables, which)
        tables, which = found
        with connection.cursor() as cursor:
            cursor.execute(which)
            written = [tables[n] for (n,) in cursor.fetchall()]
        if not written:
            continue
        if _as_replica.get(alias, True):
            try:
                with transaction.atomic(using=alias), connection.cursor() as cursor:
                    cursor.execute("SET LOCAL session_replication_role = replica")
                    cursor.execute("; ".join(f"DELETE FROM {table}" for table in written))
                continue
            except DatabaseError as exc:
                if not isinstance(exc.__cause__, psycopg.errors.InsufficientPrivilege):
                    raise  # only a user who may not set the role falls back to TRUNCATE
                _as_replica[alias] = False
        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {', '.join(written)} CASCADE")


_tables_to_empty: dict[str, tuple[list[str], str]] = {}
_as_replica: dict[str, bool] = {}


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's, and before it drops this worker's test database, no session is left on
    it: the connection the migrations opened on the main thread (this fixture's context has
    it; the drop runs on another) is closed, and any other still open (a thread's) is ended.
    Left open, the drop failed now and then ("is being accessed by other users", a warning at
    the end of make test) and, on a DATABASE_URL server, the test database stayed behind."""
    yield
    from django.db import connection

    with django_db_blocker.unblock():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        connection.close()


@pytest.fixture(scope="session", autouse=True)
def _transactional_teardown_empties_what_was_written():
    from django.test import TransactionTestCase

    original = TransactionTestCase._fixture_teardown
    TransactionTestCase._fixture_teardown = _emptied
    yield
    TransactionTestCase._fixture_teardown = original
