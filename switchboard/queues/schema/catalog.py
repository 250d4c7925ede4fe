"""The schema files written from a migrated database's catalogs: what the database says, laid
out for a person to read top to bottom, the same bytes every time.

What is the ledger's: every table of the current schema that no other installed app's model
owns (so the tables the migrations make in SQL count), with its indexes, constraints and any
sequence no identity column owns, and every function and trigger of the schema. Django's own
tables appear only as the targets of foreign keys. The SQL is PostgreSQL's own wording
(``pg_get_constraintdef``, ``pg_get_indexdef``, ``pg_get_functiondef``, ``pg_get_triggerdef``,
``format_type``), which can differ between major versions: the files are written on the one
the tests run (16). The prose and the order are the committed files', kept as they are.

Why raw SQL: these are reads of pg_catalog, which the ORM does not model.
"""

from __future__ import annotations

import re
from collections import namedtuple
from typing import Any

from django.apps import apps
from django.db.backends.base.base import BaseDatabaseWrapper

from switchboard.queues.schema import FILES, FOLDER, sections

WIDTH = 100
UNDESCRIBED = "-- (not described yet: say here what it is)"

PREAMBLES = {
    "tables.sql": """\
-- The ledger's tables as migrating from zero leaves them (queues/migrations/), with their
-- columns, constraints, indexes and storage options. Written by `python -m switchboard.queues.schema
-- --write` from the catalogs of a migrated database; edit only the lines that say what a
-- table is (the writer keeps them, and the order). tests/queues/test_schema_file.py holds
-- this file to the database the tests migrate. Functions and triggers: functions.sql.
""",
    "functions.sql": """\
-- The ledger's functions, each with the triggers that call it, as migrating from zero leaves
-- them (queues/migrations/). Written by `python -m switchboard.queues.schema --write` from the catalogs
-- of a migrated database; edit only the lines that say what a function does (the writer
-- keeps them, and the order). A migration that changes a function loads it from here:
-- `migrations.RunSQL(schema.function("name"), ...)` (queues/schema/__init__.py).
""",
}

_TABLES = """
SELECT c.oid, c.relname AS name, quote_ident(c.relname) AS quoted, c.relkind AS kind,
       c.relpersistence AS persistence, c.reloptions AS options
  FROM pg_class c
 WHERE c.relnamespace = current_schema()::regnamespace
   AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
 ORDER BY c.relname
"""

# An identity column's sequence options come with it.
_COLUMNS = """
SELECT quote_ident(a.attname) AS name, format_type(a.atttypid, a.atttypmod) AS type,
       a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid, true) AS expression,
       a.attidentity AS identity, a.attgenerated AS generated,
       CASE WHEN a.attcollation <> t.typcollation THEN quote_ident(l.collname) END AS collation,
       COALESCE(a.attstattarget, -1)::int AS statistics,
       CASE WHEN a.attstorage <> t.typstorage THEN a.attstorage END AS storage,
       s.seqstart AS start, s.seqincrement AS increment, s.seqcache AS cache,
       s.seqcycle AS cycle
  FROM pg_attribute a
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  LEFT JOIN pg_collation l ON l.oid = a.attcollation
  LEFT JOIN (pg_depend p JOIN pg_sequence s ON s.seqrelid = p.objid)
         ON p.refobjid = a.attrelid AND p.refobjsubid = a.attnum
        AND p.classid = 'pg_class'::regclass AND p.deptype = 'i'
 WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum
"""

# The key first, then unique ones, exclusions, foreign keys and checks. NOT NULL is said on
# its column (PostgreSQL 18 also keeps it as a constraint).
_CONSTRAINTS = """
SELECT quote_ident(conname) AS name, pg_get_constraintdef(oid, true) AS definition
  FROM pg_constraint
 WHERE conrelid = %s AND contype <> 'n'
 ORDER BY array_position(ARRAY['p', 'u', 'x', 'f', 'c']::"char"[], contype), conname
"""

# Indexes that back no constraint (those are said by the constraint).
_INDEXES = """
SELECT pg_get_indexdef(i.indexrelid, 0, true) AS definition
  FROM pg_index i
  JOIN pg_class ic ON ic.oid = i.indexrelid
 WHERE i.indrelid = %s
   AND NOT EXISTS (SELECT 1 FROM pg_constraint c
                    WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid
                      AND c.contype IN ('p', 'u', 'x'))
 ORDER BY ic.relname
"""

_SEQUENCES = """
SELECT c.relname AS name, quote_ident(c.relname) AS quoted, format_type(s.seqtypid, NULL) AS type,
       s.seqstart AS start, s.seqincrement AS increment, s.seqcache AS cache,
       s.seqcycle AS cycle, o.relname AS owner, quote_ident(o.relname) AS owner_quoted,
       quote_ident(a.attname) AS column
  FROM pg_class c
  JOIN pg_sequence s ON s.seqrelid = c.oid
  LEFT JOIN pg_depend d ON d.objid = c.oid AND d.classid = 'pg_class'::regclass
                       AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
  LEFT JOIN pg_class o ON o.oid = d.refobjid
  LEFT JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'S'
   AND d.deptype IS DISTINCT FROM 'i'
 ORDER BY c.relname
"""

_SCHEMA = "SELECT quote_ident(current_schema()) AS schema"

# Not an extension's.
_FUNCTIONS = """
SELECT p.proname AS name, pg_get_functiondef(p.oid) AS definition
  FROM pg_proc p
 WHERE p.pronamespace = current_schema()::regnamespace
   AND p.prokind IN ('f', 'p')
   AND NOT EXISTS (SELECT 1 FROM pg_depend d
                    WHERE d.objid = p.oid AND d.classid = 'pg_proc'::regclass
                      AND d.deptype = 'e')
 ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)
"""

_TRIGGERS = """
SELECT p.proname AS function, quote_ident(c.relname) AS "table", quote_ident(t.tgname) AS name,
       pg_get_triggerdef(t.oid, true) AS definition, t.tgenabled AS enabled
  FROM pg_trigger t
  JOIN pg_class c ON c.oid = t.tgrelid
  JOIN pg_proc p ON p.oid = t.tgfoid
 WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
 ORDER BY p.proname, c.relname, t.tgname
"""

# Kinds of object the files do not say yet: found, they stop the writer rather than be left
# out unseen.
_UNSAID = """
SELECT 'aggregate or window function ' || p.proname AS object
  FROM pg_proc p
 WHERE p.pronamespace = current_schema()::regnamespace AND p.prokind IN ('a', 'w')
UNION ALL
SELECT 'type ' || t.typname
  FROM pg_type t
 WHERE t.typnamespace = current_schema()::regnamespace AND t.typtype IN ('e', 'd', 'r', 'm')
UNION ALL
SELECT 'rule ' || r.rulename || ' on ' || c.relname
  FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class
 WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind <> 'v'
UNION ALL
SELECT 'statistics ' || x.stxname
  FROM pg_statistic_ext x
 WHERE x.stxnamespace = current_schema()::regnamespace
UNION ALL
SELECT 'policy ' || y.polname || ' on ' || c.relname
  FROM pg_policy y JOIN pg_class c ON c.oid = y.polrelid
 WHERE c.relnamespace = current_schema()::regnamespace
"""


def files(
    connection: BaseDatabaseWrapper, committed: dict[str, str] | None = None
) -> dict[str, str]:
    """Each schema file's text as ``connection``'s database says it, with the prose and the
    order of ``committed`` (file name to text; the files in queues/schema/ by default)."""
    if committed is None:
        committed = {name: _read(name) for name in FILES}
    with connection.cursor() as cursor:
        tables = _ledger_tables(cursor)
        return {
            "tables.sql": _file("tables.sql", _tables(cursor, tables), committed["tables.sql"]),
            "functions.sql": _file("functions.sql", _functions(cursor), committed["functions.sql"]),
        }


def _rows(cursor: Any, query: str, *params: Any) -> list[Any]:
    """The rows of ``query``, each a named tuple by the query's own column names."""
    cursor.execute(query, params)
    Row = namedtuple("Row", [column.name for column in cursor.description])  # type: ignore[misc]
    return [Row(*row) for row in cursor.fetchall()]


def _read(name: str) -> str:
    path = FOLDER / name
    return path.read_text() if path.exists() else ""


def _file(name: str, generated: dict[str, str], committed: str) -> str:
    """The preamble, then every section in the committed order (new ones after, by name),
    each with its committed prose."""
    _, kept = sections(committed)
    order = [n for n in kept if n in generated] + sorted(set(generated) - set(kept))
    parts = [PREAMBLES[name]]
    for section in order:
        prose = kept[section][0] if section in kept and kept[section][0] else UNDESCRIBED
        parts.append(f"-- name: {section} --\n{prose}\n{generated[section].strip()}\n")
    return "\n".join(parts)


def _ledger_tables(cursor: Any) -> list[Any]:
    """The schema's tables that no other app's model owns (and no view or the like, which
    the files cannot say yet)."""
    others = {"django_migrations"}
    for model in apps.get_models(include_auto_created=True):
        if model._meta.app_label != "queues":
            others.add(model._meta.db_table)
    tables = [row for row in _rows(cursor, _TABLES) if row.name not in others]
    unsaid = [row.object for row in _rows(cursor, _UNSAID)]
    unsaid += [f"relation {t.name} (kind {t.kind})" for t in tables if t.kind not in ("r", "p")]
    if unsaid:
        raise ValueError(
            "the schema files cannot say these yet (teach queues/schema/catalog.py): "
            + ", ".join(unsaid)
        )
    return tables


def _tables(cursor: Any, tables: list[Any]) -> dict[str, str]:
    found = {}
    for table in tables:
        found[table.name] = _table(
            table,
            _rows(cursor, _COLUMNS, table.oid),
            _rows(cursor, _CONSTRAINTS, table.oid),
            [row.definition for row in _rows(cursor, _INDEXES, table.oid)],
        )
    for sequence in _rows(cursor, _SEQUENCES):
        if sequence.owner is not None and sequence.owner not in found:
            continue  # another app's
        owned = sequence.owner and f"\n    OWNED BY {sequence.owner_quoted}.{sequence.column}"
        found[sequence.name] = (
            f"CREATE SEQUENCE {sequence.quoted} AS {sequence.type}{_sequence_options(sequence)}"
            f"{owned or ''};"
        )
    return found


def _table(table: Any, columns: list[Any], constraints: list[Any], indexes: list[str]) -> str:
    width = max(len(column.name) for column in columns)
    lines = [f"{column.name:<{width}} {_column(column)}" for column in columns]
    lines += [f"CONSTRAINT {c.name} {c.definition}" for c in constraints]
    body = ",\n".join(_wrap(_indented(line, "    "), "    ") for line in lines)
    unlogged = "UNLOGGED " if table.persistence == "u" else ""
    storage = f" WITH ({', '.join(sorted(table.options))})" if table.options else ""
    after = []
    for column in columns:
        alter = f"ALTER TABLE {table.quoted} ALTER COLUMN {column.name}"
        if column.statistics >= 0:
            after.append(f"{alter} SET STATISTICS {column.statistics};")
        if column.storage:
            storage_kind = {"p": "PLAIN", "e": "EXTERNAL", "m": "MAIN", "x": "EXTENDED"}
            after.append(f"{alter} SET STORAGE {storage_kind[column.storage]};")
    return "\n".join(
        [
            f"CREATE {unlogged}TABLE {table.quoted} (\n{body}\n" + _wrap(f"){storage};", "    "),
            *after,
            *(_index(definition) for definition in indexes),
        ]
    )


def _column(column: Any) -> str:
    words = [column.type]
    if column.collation:
        words.append(f"COLLATE {column.collation}")
    if column.identity:
        always = "ALWAYS" if column.identity == "a" else "BY DEFAULT"
        options = _sequence_options(column).strip()
        words.append(f"GENERATED {always} AS IDENTITY" + (f" ({options})" if options else ""))
    elif column.generated:
        words.append(f"GENERATED ALWAYS AS ({column.expression}) STORED")
    elif column.expression is not None:
        words.append(f"DEFAULT {column.expression}")
    if column.not_null:
        words.append("NOT NULL")
    return " ".join(words)


def _sequence_options(sequence: Any) -> str:
    """The options that differ from a new sequence's (ascending from 1, one at a time)."""
    words = []
    if sequence.start not in (None, 1):
        words.append(f"START WITH {sequence.start}")
    if sequence.increment not in (None, 1):
        words.append(f"INCREMENT BY {sequence.increment}")
    if sequence.cache not in (None, 1):
        words.append(f"CACHE {sequence.cache}")
    if sequence.cycle:
        words.append("CYCLE")
    return "".join(f" {word}" for word in words)


def _index(definition: str) -> str:
    # A long one's predicate on a line of its own; an expression PostgreSQL wrote on several
    # lines (a CASE) indented under its first.
    definition += ";"
    head, where, predicate = definition.rpartition(" WHERE ")
    if where and len(definition) > WIDTH:
        definition = f"{head}\nWHERE {predicate}"
    first, *rest = definition.split("\n")
    return "\n".join([_wrap(first, "    "), *(_wrap(f"    {line}", "    ") for line in rest)])


def _functions(cursor: Any) -> dict[str, str]:
    (schema,) = _rows(cursor, _SCHEMA)
    found: dict[str, list[str]] = {}
    for function in _rows(cursor, _FUNCTIONS):
        found.setdefault(function.name, []).append(_function(function.definition, schema.schema))
    for trigger in _rows(cursor, _TRIGGERS):
        found.setdefault(trigger.function, []).append(_trigger(trigger))
    return {name: "\n".join(parts) for name, parts in found.items()}


def _function(definition: str, schema: str) -> str:
    """``pg_get_functiondef``'s text, its name unqualified (a migration makes it in the
    schema it runs in) and its arguments wrapped; the body as it was written."""
    header, _, rest = definition.partition("\n")
    for kind in ("FUNCTION", "PROCEDURE"):
        header = header.replace(f"{kind} {schema}.", f"{kind} ", 1)
    return f"{_wrap(header, '    ')}\n{rest.rstrip()};\n"


def _trigger(trigger: Any) -> str:
    """``pg_get_triggerdef``'s text as ``CREATE OR REPLACE`` (a migration that loads the
    function makes its triggers again), a line for each clause."""
    definition = trigger.definition.replace("CREATE TRIGGER ", "CREATE OR REPLACE TRIGGER ", 1)
    call = definition.rindex(" EXECUTE FUNCTION ")
    head, execute = definition[:call], definition[call + 1 :]
    # After ON: REFERENCING (if any), then FOR EACH with its WHEN.
    clauses = [head.find(c) for c in (" REFERENCING ", " FOR EACH ROW", " FOR EACH STATEMENT")]
    at = min(c for c in clauses if c >= 0)
    head, rest = head[:at], head[at + 1 :]
    lines = [_wrap(head, "    "), *(_wrap(f"    {part}", "    ") for part in (rest, execute))]
    text = "\n".join(lines) + ";\n"
    if trigger.enabled != "O":
        mode = {"D": "DISABLE", "R": "ENABLE REPLICA", "A": "ENABLE ALWAYS"}[trigger.enabled]
        text += f"ALTER TABLE {trigger.table} {mode} TRIGGER {trigger.name};\n"
    return text


def _indented(text: str, indent: str) -> str:
    return "\n".join(indent + line for line in text.split("\n"))


# Where a long line may break: after a comma or before one of these words, and only where
# that is not enough, before the second kind; never inside a quoted literal or name (matched
# whole, first).
_QUOTED = r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\""
_BREAKS = (
    re.compile(
        _QUOTED + r"|, | (?=(?:AND|OR|CHECK|FOREIGN KEY|REFERENCES|DEFERRABLE|USING|INCLUDE|WITH) )"
    ),
    re.compile(_QUOTED + r"| (?=IS DISTINCT FROM )"),
)


def _wrap(text: str, indent: str) -> str:
    """Each line of ``text`` broken to ``WIDTH`` where ``_BREAKS`` allow, its later lines
    indented by ``indent`` beyond its own."""
    if "\n" in text:
        return "\n".join(_wrap(line, indent) for line in text.split("\n"))
    own = text[: len(text) - len(text.lstrip())]
    parts = [text.strip()]
    for pattern in _BREAKS:
        parts = [
            piece
            for n, part in enumerate(parts)
            for piece in _broken(
                part, pattern, len(own if n == 0 else own + indent), len(own + indent)
            )
        ]
    return own + f"\n{own}{indent}".join(parts)


def _broken(text: str, pattern: re.Pattern, first: int, rest: int) -> list[str]:
    """``text`` in pieces that fit ``WIDTH`` after ``first`` spaces (the first piece) or
    ``rest`` (the others), broken greedily at ``pattern``'s breaks."""
    if first + len(text) <= WIDTH:
        return [text]
    breaks = [m.end() for m in pattern.finditer(text) if m.group() in (", ", " ")]
    pieces: list[str] = []
    start = last = 0
    for at in [*breaks, len(text)]:
        if (rest if pieces else first) + at - start > WIDTH and last > start:
            pieces.append(text[start:last].strip())
            start = last
        last = at
    return [*pieces, text[start:].strip()]
