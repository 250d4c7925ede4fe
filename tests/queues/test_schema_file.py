"""The schema files (queues/schema/*.sql) are exactly what migrating from zero gives: written
from the database this run migrated (pytest-django's, migrated once at the start of the run;
nothing here migrates again), compared in memory with the files as committed."""

from __future__ import annotations

import difflib

import pytest
from django.db import connection

from queues import schema
from queues.schema import catalog

COMMAND = "python -m queues.schema --write"


def _differences(generated: dict[str, str]) -> str:
    return "".join(
        "".join(
            difflib.unified_diff(
                (schema.FOLDER / name).read_text().splitlines(keepends=True),
                text.splitlines(keepends=True),
                f"queues/schema/{name} (committed)",
                f"queues/schema/{name} (the migrated database)",
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
