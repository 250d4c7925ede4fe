"""What a try reported as its result is searched too (issue 30, item 5): "pods" finds a todo
whose try failed with ``{"error": "pods evicted"}``, and one a person completed by hand with
a result that says it.

A try's result (the JSON ``result`` of ``complete`` and ``fail``, an agent's or a person's)
is on its attempt row, written by the close that ends it (queues/sql/close.py), like its
summary. Its words go beside it, as the summary's do (migrations 0020, 0022):
``todo_attempts.result_document``, ``jsonb_to_tsvector('simple', result, '["string",
"numeric", "key"]')`` (the strings, numbers and keys the drawer shows; not true, false or
null), NULL without a result (or with one of no words, ``{}``). A GIN index over it, partial
like the summaries' (``todo_attempts_result_search``), serves the Board's search below the
rows it checks one by one; those rows' probe of their attempts reads the words on the row.

Written by a BEFORE trigger on the attempt (``todo_attempt_result_words``), not by the close
statement: the close does not change, and the trigger holds the words to the result whatever
writes it (a close, a copy, a fix by hand). Its WHEN is evaluated in C: a claim's insert and
a close without a result (a release, a reap, a cancel) call nothing; a close with a result
computes its words once. Because the trigger writes ``result_document``, the column is the
database's alone: the Django model does not name it (the Board's search reads it through
queues.selectors.search, in SQL).

The column is added without a default (no rewrite), the trigger is made, then the attempts
that already hold a result get their words, a batch of ``BACKFILL_BATCH`` attempt ids per
transaction (each batch locks only its own rows, briefly), and last the index is built
CONCURRENTLY (so the migration is not atomic): agents keep claiming and closing throughout.
"""

from django.db import migrations, transaction

BACKFILL_BATCH = 20_000

FORWARD = """
ALTER TABLE todo_attempts ADD COLUMN result_document tsvector;

CREATE FUNCTION todo_attempt_result_words() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.result_document := NULLIF(
        jsonb_to_tsvector('simple'::regconfig, NEW.result, '["string", "numeric", "key"]'),
        ''::tsvector);
    RETURN NEW;
END $$;

CREATE TRIGGER todo_attempt_result_words
    BEFORE INSERT OR UPDATE OF result, result_document ON todo_attempts
    FOR EACH ROW WHEN (NEW.result IS NOT NULL OR NEW.result_document IS NOT NULL)
    EXECUTE FUNCTION todo_attempt_result_words();
"""

BACKWARD = """
DROP TRIGGER todo_attempt_result_words ON todo_attempts;
DROP FUNCTION todo_attempt_result_words();
ALTER TABLE todo_attempts DROP COLUMN result_document;
"""

# Assigning the result to itself fires the trigger, which writes the words.
BACKFILL = """
UPDATE todo_attempts SET result = result
 WHERE id >= %(low)s AND id < %(high)s AND result IS NOT NULL AND result_document IS NULL
"""


def backfill(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT min(id), max(id) FROM todo_attempts WHERE result IS NOT NULL")
        low, top = cursor.fetchone()
    if low is None:
        return
    while low <= top:
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(BACKFILL, {"low": low, "high": low + BACKFILL_BATCH})
        low += BACKFILL_BATCH


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("queues", "0027_board_live"),
    ]

    operations = [
        migrations.RunSQL(FORWARD, BACKWARD),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
        migrations.RunSQL(
            "CREATE INDEX CONCURRENTLY todo_attempts_result_search ON todo_attempts"
            " USING gin (result_document) WHERE result_document IS NOT NULL;",
            "DROP INDEX CONCURRENTLY todo_attempts_result_search;",
        ),
    ]
