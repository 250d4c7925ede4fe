"""The ledger's schema as it is today, readable in one place (procrastinate's ``schema.sql`` is
the model): ``tables.sql`` (every table of the ledger, its columns, constraints, indexes and
storage) and ``functions.sql`` (every function, with the triggers that call it).

Both are written from a migrated database's catalogs by ``python -m queues.schema --write``
and committed; tests/queues/test_schema_file.py holds them to the database the test run
migrated from zero. Each object sits under a ``-- name: … --`` header, with the lines that
say what it is (kept by the writer: edit them in the file).

A migration that changes a function loads it from here, never restates an older migration::

    from queues import schema

    operations = [
        migrations.AddField(...),  # what the new text reads, first
        migrations.RunSQL(schema.function("switchboard_board_todos"), migrations.RunSQL.noop),
    ]

``function(name)`` is the function's ``CREATE OR REPLACE`` and its triggers' (re-runnable),
after ``SET LOCAL check_function_bodies = off``. The file holds only the newest text, so a
database that migrates across several migrations gets that text from every migration that
loads the function, including ones older than the columns it reads. Creating it there is
safe (with bodies unchecked, nothing is resolved until the function runs); running it there
is not, so the rule is: **a migration after the first that loads from here writes no rows
of the ledger** (a backfill is a command run after ``migrate``). docs/ledger.md, "The schema
in one place", says the whole of it.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
FILES = ("tables.sql", "functions.sql")

_HEADER = re.compile(r"^-- name: (\S+) --$", re.MULTILINE)
# Loaded text may be created before what it reads exists (see above); pg_dump says the same.
_UNCHECKED = "SET LOCAL check_function_bodies = off;\n"


def sections(text: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """A schema file's preamble and its sections by name, in the file's order: each its
    prose (the comment lines under its header) and its SQL (the rest, up to the next
    header)."""
    headers = list(_HEADER.finditer(text))
    preamble = text[: headers[0].start()] if headers else text
    found: dict[str, tuple[str, str]] = {}
    for header, following in zip(headers, [*headers[1:], None], strict=False):
        body = text[header.end() : following.start() if following else len(text)]
        lines = body.strip("\n").split("\n")
        prose = 0
        while prose < len(lines) and lines[prose].startswith("--"):
            prose += 1
        found[header.group(1)] = ("\n".join(lines[:prose]), "\n".join(lines[prose:]).strip())
    return preamble, found


@cache
def _functions() -> dict[str, tuple[str, str]]:
    return sections((FOLDER / "functions.sql").read_text())[1]


def function(name: str) -> str:
    """The SQL that makes ``name`` (and the triggers that call it) what functions.sql says:
    for ``migrations.RunSQL`` in an atomic migration."""
    try:
        _, sql = _functions()[name]
    except KeyError:
        raise KeyError(f"{name!r} is not in {FOLDER / 'functions.sql'}") from None
    return _UNCHECKED + sql + "\n"
