"""An attempt's summary words are written by the statement that writes its summary, and the
row's CHECK holds them to it (issue 13, ledger speed). The same CHECK now also says what the
claims always did: an endpoint attempt names no user (the agent's own close reads the
attempt's names without joining users, queues/sql/close.py).

0020 made ``summary_document`` a stored generated column. PostgreSQL reads a generated
column's expression from its node text and plans it again on every statement that writes the
table, as it does a CHECK (migration 0021): every claim (an insert) and every close paid for
it, with or without a summary, about 7 % of the backend's instructions per todo.

Now it is a plain column: the close sets it in the same UPDATE that sets ``summary``
(queues/sql/close.py, ``summary_words``), and ``todo_attempts_valid`` refuses a row whose
words are not ``to_tsvector('simple', summary)`` (NULL without a summary), so the two still
cannot drift apart. The check computes the words only for a row with a summary (a claim and a
close without one compute nothing); a close with one computes them twice, about 12 µs.

``DROP EXPRESSION`` keeps the column's values and rewrites nothing; adding the new CHECK reads
every attempt once (a summary's words computed again) under a SHARE ROW EXCLUSIVE lock.
"""

import importlib

from django.contrib.postgres.search import SearchVectorField
from django.db import migrations, models

TODO_ATTEMPTS_VALID = """
CREATE FUNCTION todo_attempts_valid(
    claimer_kind varchar, endpoint_id bigint, user_id integer, ended_at timestamptz,
    outcome varchar, disposition varchar, summary text, summary_document tsvector
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    -- an endpoint attempt names its endpoint and no user
    RETURN ((claimer_kind = 'endpoint' AND endpoint_id IS NOT NULL AND user_id IS NULL)
            OR claimer_kind = 'owner')
       -- an open attempt has no outcome or disposition, a closed one one of each
       AND ((ended_at IS NULL AND outcome = '' AND disposition = '')
            OR (ended_at IS NOT NULL
                AND outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped',
                                'canceled', 'revoked')
                AND disposition IN ('done', 'retry_scheduled', 'requeued', 'dead_lettered',
                                    'canceled')))
       -- the summary's words are its words (the Board's search reads them)
       AND CASE WHEN summary > '' THEN summary_document IS NOT NULL
                                       AND summary_document = to_tsvector('simple', summary)
                ELSE summary_document IS NULL END;
END
$$;
"""

OLD_SIGNATURE = "todo_attempts_valid(varchar, bigint, timestamptz, varchar, varchar)"
NEW_SIGNATURE = (
    "todo_attempts_valid(varchar, bigint, integer, timestamptz, varchar, varchar, text, tsvector)"
)


_0021 = importlib.import_module("switchboard.queues.migrations.0021_row_rules_in_one_function")
OLD_FUNCTION = _0021.TODO_ATTEMPTS_VALID  # reversed: 0021's function back
_rules = _0021._rules


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0021_row_rules_in_one_function"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="todoattempt", name="todo_attempts_valid"),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    "ALTER TABLE todo_attempts ALTER COLUMN summary_document DROP EXPRESSION;",
                    # Back to the generated column: drop and add it again (a rewrite).
                    """
                    ALTER TABLE todo_attempts DROP COLUMN summary_document;
                    ALTER TABLE todo_attempts ADD COLUMN summary_document tsvector
                      GENERATED ALWAYS AS (CASE WHEN summary > '' THEN
                        to_tsvector('simple'::regconfig, COALESCE(summary, '')) END) STORED;
                    CREATE INDEX todo_attempts_search ON todo_attempts
                      USING gin (summary_document) WHERE summary > '';
                    """,
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="todoattempt",
                    name="summary_document",
                    field=SearchVectorField(null=True),
                ),
            ],
        ),
        migrations.RunSQL(
            TODO_ATTEMPTS_VALID + f"DROP FUNCTION {OLD_SIGNATURE};",
            f"DROP FUNCTION {NEW_SIGNATURE};" + OLD_FUNCTION,
        ),
        migrations.AddConstraint(
            model_name="todoattempt",
            constraint=models.CheckConstraint(
                condition=_rules(
                    "todo_attempts_valid",
                    "claimer_kind",
                    "endpoint",
                    "user",
                    "ended_at",
                    "outcome",
                    "disposition",
                    "summary",
                    "summary_document",
                ),
                name="todo_attempts_valid",
            ),
        ),
    ]
