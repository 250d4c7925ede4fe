"""The ledger's schema as it is today, readable in one place (procrastinate's ``schema.sql`` is
the model): ``tables.sql`` (every table of the ledger, its columns, constraints, indexes and
storage) and ``functions.sql`` (every function, with the triggers that call it). ``script()``
makes one executable script of the two: the squashed migration's (docs/ledger.md, "A new
database takes one migration").

Both are written from a migrated database's catalogs by ``python -m switchboard.queues.schema --write``
and committed; tests/queues/test_schema_file.py holds them to the database the test run
migrated from zero. Each object sits under a ``-- name: … --`` header, with the lines that
say what it is (kept by the writer: edit them in the file).

A migration that changes a function (or makes a new one) loads it from here, never restates
an older migration: edit the function in functions.sql, load it, migrate, then run the
writer (it words the file as PostgreSQL stored it) and commit both::

    from switchboard.queues import schema

    operations = [
        migrations.AddField(...),  # what the new text reads, first
        migrations.RunSQL(schema.function("switchboard_board_todos"), migrations.RunSQL.noop),
    ]

``function(name)`` is the function's ``CREATE OR REPLACE`` and its triggers' (so it can run
again), between ``SET check_function_bodies = off`` and its ``RESET``, each trigger in a
``DO`` block. The file holds only the newest text, so on a database that is behind, every
migration that loads a function makes today's text, even one older than the columns that
text reads. Three rules keep that safe (docs/ledger.md, "The schema in one place"):

- making it early checks nothing: PL/pgSQL looks tables and columns up when it runs, with
  bodies unchecked an SQL-language function waits as well, and a trigger whose table or
  column is not there yet is left to the later migration that adds it (and loads again);
- nothing runs it early: from the first migration that loads from here on, the ledger's
  migrations write no rows (a backfill is a command run after ``migrate``);
- what an older load names stays: a function that a migration loads keeps its name and its
  arguments and is not dropped (other arguments make a new function, under a new name); the
  one exception, a trigger function replaced by another in every migration that loaded it,
  with a later one dropping it where it exists (0036 and 0037), is in docs/ledger.md.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
FILES = ("tables.sql", "functions.sql")

_HEADER = re.compile(r"^-- name: (\S+) --$", re.MULTILINE)
# Loaded text may be made before what it reads exists (see above), as pg_dump restores it. A
# session SET and its RESET, not SET LOCAL: a migration with atomic = False has no
# transaction for SET LOCAL to last in.
_UNCHECKED = "SET check_function_bodies = off;\n"
_CHECKED = "RESET check_function_bodies;\n"
# Each trigger as the writer lays it out, and what it is loaded in: a trigger's table and the
# columns it names are looked up when it is made, so one that a database behind cannot have
# yet is left, as it was, to the later migration that adds what it names (and loads again).
_TRIGGER = "\n\nCREATE OR REPLACE TRIGGER "
_GUARD = """DO $load$ BEGIN
{}
EXCEPTION WHEN undefined_table OR undefined_column THEN
    NULL;
END $load$;
"""


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
    for ``migrations.RunSQL``."""
    try:
        _, sql = _functions()[name]
    except KeyError:
        raise KeyError(
            f"{name!r} is not in {FOLDER / 'functions.sql'}: a new function's section is written"
            " there first; one that migrations load is never dropped nor renamed"
        ) from None
    definition, *triggers = sql.split(_TRIGGER)
    guarded = [_GUARD.format(f"{_TRIGGER.strip()} {trigger.strip()}") for trigger in triggers]
    return f"{_UNCHECKED}{definition}\n{''.join(guarded)}{_CHECKED}"


def script(tables: str, functions: str) -> str:
    """The two files' text as one script that makes the schema on a database that has none of
    it (the squashed migration's, queues/migrations/): the functions, the tables and their
    indexes, then the foreign keys (a table may name one that comes later: todos and
    schedules name each other), then the triggers, as pg_dump orders a restore."""
    definitions, triggers = [], []
    for _, sql in sections(functions)[1].values():
        definition, *more = sql.split(_TRIGGER)
        definitions.append(definition.strip())
        triggers += [f"{_TRIGGER.strip()} {trigger.strip()}" for trigger in more]
    made, foreign = [], []
    for name, (_, sql) in sections(tables)[1].items():
        table, keys = _without_foreign_keys(_IN_LIST.sub(_in_list, sql))
        made.append(f"-- {name}\n{table}")
        foreign += [f"ALTER TABLE {name} ADD {key};" for key in keys]
    return "\n\n".join(
        [_UNCHECKED.strip(), *definitions, *made, "\n".join(foreign), *triggers, _CHECKED]
    )


# PostgreSQL reads back its own words for ``column IN ('a', 'b')`` of a varchar column as an
# array of varchars cast to text[], and stores that in other words again: what the files
# say is written as what was first said, so the catalogs read back the same.
_IN_LIST = re.compile(
    r"(\w+)::text = ANY \(ARRAY\[('[^']*'::character varying(?:,\s*'[^']*'::character varying)*)"
    r"\]::text\[\]\)"
)


def _in_list(match: re.Match[str]) -> str:
    values = re.findall(r"'[^']*'", match.group(2))
    return f"{match.group(1)} IN ({', '.join(values)})"


_CREATE_TABLE = re.compile(r"^CREATE (?:UNLOGGED )?TABLE \S+ \(", re.MULTILINE)


def _without_foreign_keys(sql: str) -> tuple[str, list[str]]:
    """A table's section with its ``CONSTRAINT … FOREIGN KEY`` items taken out of its
    ``CREATE TABLE`` (each on one line, for ``ALTER TABLE … ADD``), and those items."""
    start = _CREATE_TABLE.search(sql)
    if start is None:
        raise ValueError(f"no CREATE TABLE in {sql[:60]!r}")
    items, depth, quoted, begun = [], 0, False, start.end()
    for at in range(start.end(), len(sql)):
        char = sql[at]
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            depth += 1
        elif char == ")" and depth:
            depth -= 1
        elif char in ",)" and not depth:
            items.append(sql[begun:at].strip())
            begun = at + 1
            if char == ")":
                break
    else:
        raise ValueError(f"the CREATE TABLE in {sql[:60]!r} does not close")
    lines = [" ".join(item.split()) for item in items]  # an item's words on one line
    keys = [line for line in lines if " FOREIGN KEY " in line]
    kept = ",\n    ".join(item for item, line in zip(items, lines, strict=True) if line not in keys)
    return f"{sql[: start.end()]}\n    {kept}\n{sql[at:]}", keys
