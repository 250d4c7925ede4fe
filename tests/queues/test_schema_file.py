"""The schema files (queues/schema/*.sql) are exactly what migrating from zero gives: written
from the database this run migrated (pytest-django's, migrated once at the start of the run,
through the squashed migration a new database takes), compared in memory with the files as
committed; and what the 47 migrations that migration replaces give, one after another, as a
database that had applied some of them goes on through the rest."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection, connections, migrations
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

from switchboard.queues import schema
from switchboard.queues.schema import catalog

COMMAND = "python -m switchboard.queues.schema --write"


def _differences(generated: dict[str, str]) -> str:
    return "".join(
        "".join(
            difflib.unified_diff(
                (schema.FOLDER / name).read_text().splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"switchboard/queues/schema/{name} (committed)",
                f"switchboard/queues/schema/{name} (the migrated database)",
            )
        )
        for name, text in generated.items()
    )


def test_the_migrated_database_is_exactly_the_schema_files(db):
    differences = _differences(catalog.files(connection))
    if differences:
        pytest.fail(
            f"the schema files are not what the migrations make:\n{differences}\n"
            f"After a migration, run `{COMMAND}` and commit the files.",
            pytrace=False,
        )


@contextmanager
def _scratch_database(suffix: str, blocker) -> Iterator[BaseDatabaseWrapper]:
    """A database of its own beside this worker's test database (made empty, dropped after),
    under the alias ``suffix`` while it lasts."""
    name = f"{connection.settings_dict['NAME']}_{suffix}"
    with blocker.unblock():
        with connection._nodb_cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cursor.execute(f'CREATE DATABASE "{name}"')
        wrapper = type(connections["default"])
        scratch = wrapper({**connection.settings_dict, "NAME": name}, alias=suffix)
        connections[suffix] = scratch  # what looks a connection up by its alias finds this one
        try:
            yield scratch
        finally:
            scratch.close()
            del connections[suffix]
            with connection._nodb_cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _migrated(database: BaseDatabaseWrapper, *, replace_migrations: bool, apps=None) -> None:
    """``database`` migrated from zero: every app (or ``apps``), through the squashed migration
    (``replace_migrations``) or through the migrations it replaces."""
    executor = MigrationExecutor(database)
    executor.loader = loader = MigrationLoader(database, replace_migrations=replace_migrations)
    leaves = [
        key
        for key in loader.graph.leaf_nodes()
        if (apps is None or key[0] in apps)
        and (replace_migrations or key not in loader.replacements)
    ]
    plan = executor.migration_plan(leaves)
    names = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
    if not replace_migrations:
        assert "queues.0047_attempts_start_empty" in names
        assert not [name for name in names if "squashed" in name]
    executor.migrate(leaves, plan=plan)


def test_the_migrations_the_squashed_one_replaces_make_the_schema_files_too(django_db_blocker):
    """A database that had applied some of 0001 to 0047 goes on through the rest of them, not
    through 0001_squashed_0047 (which only a database with none of them takes): the same
    schema either way. Migrated one after another from zero in a scratch database of its
    own, as Django would without the squashed migration."""
    with _scratch_database("chain", django_db_blocker) as chain:
        _migrated(chain, replace_migrations=False)
        differences = _differences(catalog.files(chain))
    assert differences == "", (
        f"the migrations one after another make another schema:\n{differences}"
    )


def test_the_files_as_one_script_make_the_schema_the_files_say(django_db_blocker):
    """``schema.script()``, which wrote the squashed migration's script, kept true to the
    files as they are now (for the next squash): run on a database with Django's own tables
    and nothing of the ledger, it makes what the files say."""
    script = schema.script(
        (schema.FOLDER / "tables.sql").read_text(), (schema.FOLDER / "functions.sql").read_text()
    )
    with _scratch_database("script", django_db_blocker) as scratch:
        _migrated(scratch, replace_migrations=True, apps={"auth", "contenttypes"})
        with scratch.cursor() as cursor:
            cursor.execute(script)
        differences = _differences(catalog.files(scratch))
    assert differences == "", f"the files as one script make another schema:\n{differences}"


def test_every_table_and_function_says_what_it_is():
    undescribed = [
        f"{name}: {section}"
        for name in schema.FILES
        for section, (prose, _) in schema.sections((schema.FOLDER / name).read_text())[1].items()
        if prose == catalog.UNDESCRIBED or not prose
    ]
    assert undescribed == [], f"say what each is under its header in queues/schema/: {undescribed}"


def test_functions_loaded_from_the_file_make_the_schema_the_file_says(db):
    """What a migration does with ``schema.function``, for every function, after every
    trigger is gone: the functions and their triggers are back as functions.sql says (so a
    migration may load a function whatever state its triggers are in)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format('DROP TRIGGER %I ON %I', t.tgname, c.relname)"
            "  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
            " WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal"
        )
        drops = [row[0] for row in cursor.fetchall()]
        assert drops
        for drop in drops:
            cursor.execute(drop)
        for name in schema.sections((schema.FOLDER / "functions.sql").read_text())[1]:
            # As migrations.RunSQL runs it: split into statements, one by one.
            for statement in connection.ops.prepare_sql_script(schema.function(name)):
                cursor.execute(statement)
    loaded = catalog.files(connection)["functions.sql"]
    assert _differences({"functions.sql": loaded}) == ""


def test_a_function_not_in_the_file_is_named_in_the_error():
    with pytest.raises(KeyError, match="switchboard_nothing"):
        schema.function("switchboard_nothing")


# What schema.function() hands a migration, and SQL that writes rows.
_LOADED = re.compile(r"SET check_function_bodies = off;.*?RESET check_function_bodies;", re.S)
_WRITES = re.compile(
    r"\b(INSERT\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM|TRUNCATE|COPY|MERGE)\b", re.I
)


def _sql_of(operation) -> list[str]:
    if isinstance(operation, migrations.SeparateDatabaseAndState):
        return [sql for inner in operation.database_operations for sql in _sql_of(inner)]
    if not isinstance(operation, migrations.RunSQL):
        return []
    statements = operation.sql if isinstance(operation.sql, list | tuple) else [operation.sql]
    return [s if isinstance(s, str) else s[0] for s in statements]


def _writers_after_a_load(replace_migrations: bool) -> list[str]:
    """The ledger's migrations, from the first that loads a function from the schema file on,
    that write rows: a RunPython, or SQL of their own (not the loaded functions') that does.
    ``replace_migrations``: as a new database takes them (the squashed migration first), or
    as a database behind does (the migrations it replaces)."""
    loader = MigrationLoader(None, ignore_no_migrations=True, replace_migrations=replace_migrations)
    graph = loader.graph
    leaves = graph.leaf_nodes("queues")
    (leaf,) = leaves if replace_migrations else set(leaves) - set(loader.replacements)
    loading, writers = False, []
    for key in graph.forwards_plan(leaf):
        if key[0] != "queues":
            continue
        migration = graph.nodes[key]
        sqls = [sql for operation in migration.operations for sql in _sql_of(operation)]
        loading = loading or any(_LOADED.search(sql) for sql in sqls)
        runs_python = any(isinstance(op, migrations.RunPython) for op in migration.operations)
        if loading and (runs_python or any(_WRITES.search(_LOADED.sub("", s)) for s in sqls)):
            writers.append(migration.name)
    return writers


def test_no_migration_writes_rows_once_one_loads_a_function_from_the_schema_file():
    """The file holds only the newest text, so a database that is behind makes it at every
    migration that loads it, before the columns it may read: nothing may run it there
    (queues/schema/__init__.py). A backfill is a command run after migrate."""
    assert _writers_after_a_load(replace_migrations=False) == []
    assert _writers_after_a_load(replace_migrations=True) == []
