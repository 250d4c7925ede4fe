"""The search document of a todo moves off the todo row (issue 13 after issue 15).

0015's ``todos_search`` was a GIN index on ``to_tsvector(title || ' ' || body)`` of the todo
row itself. No update of that row is HOT (the lease columns are indexed), so every claim,
heartbeat and close recomputed the expression over up to 64 KiB of body and wrote a GIN
entry (≈190 B of WAL each). Title and body never change after a todo is made, so the
document is now written once, by a trigger on insert, into ``todo_search_documents`` (its
own GIN index), and goes with its todo by ON DELETE CASCADE. Existing todos are backfilled
here. The expression is Django's SearchVector("title", "body", config="simple"), word for
word, so a search reads the same as it did.
"""

import django.contrib.postgres.indexes
import django.contrib.postgres.search
import django.db.models.deletion
from django.db import migrations, models

TRIGGER = """
CREATE FUNCTION todo_search_document_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO todo_search_documents (todo_id, document)
    VALUES (NEW.id, to_tsvector('simple'::regconfig,
                                COALESCE(NEW.title, '') || ' ' || COALESCE(NEW.body, '')));
    RETURN NULL;
END $$;
CREATE TRIGGER todo_search_document_on_insert AFTER INSERT ON todos
    FOR EACH ROW EXECUTE FUNCTION todo_search_document_on_insert();
INSERT INTO todo_search_documents (todo_id, document)
    SELECT id, to_tsvector('simple'::regconfig, COALESCE(title, '') || ' ' || COALESCE(body, ''))
    FROM todos;
"""

UNDO = """
DROP TRIGGER todo_search_document_on_insert ON todos;
DROP FUNCTION todo_search_document_on_insert();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0017_attempt_history"),
    ]

    operations = [
        migrations.CreateModel(
            name="TodoSearchDocument",
            fields=[
                (
                    "todo",
                    models.OneToOneField(
                        db_column="todo_id",
                        on_delete=django.db.models.deletion.DB_CASCADE,
                        primary_key=True,
                        related_name="search_document",
                        serialize=False,
                        to="queues.todo",
                    ),
                ),
                ("document", django.contrib.postgres.search.SearchVectorField()),
            ],
            options={
                "db_table": "todo_search_documents",
            },
        ),
        migrations.RemoveIndex(
            model_name="todo",
            name="todos_search",
        ),
        migrations.RunSQL(TRIGGER, UNDO),
        migrations.AddIndex(
            model_name="todosearchdocument",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["document"], name="todo_search_documents_words"
            ),
        ),
    ]
