"""Each table's row rules in one CHECK that calls one function (issue 13, ledger speed).

PostgreSQL reads a table's CHECK constraints from their stored node text and plans them again
on every statement that writes the table (ExecConstraints: stringToNode, then
expression_planner), however many rows it writes. ``todos`` had nine (9.4 KB of node text)
and every claim, heartbeat and close writes a todo; ``todo_attempts`` had two (6.6 KB, the
outcome and disposition lists), written by every claim and close. Counted with callgrind
over a drain (docs/benchmarks.md, "Instructions per todo"), that was a third of the
backend's instructions per todo.

Now each table has one CHECK, ``todos_valid(...)`` / ``todo_attempts_valid(...)``: a call of
an IMMUTABLE PL/pgSQL function with the row's columns. Its stored text is a short function
call; PL/pgSQL compiles the body once per session. The rules are the same, word for word, as
the constraints they replace (the old names in the comments); tests/queues/test_row_rules.py
breaks each rule once and checks the function's value lists against the model's enums, so a
new state or outcome that is not added here fails there.

PL/pgSQL, not SQL: PostgreSQL inlines an SQL function into the expression, which parses its
body on every statement again.

``max_attempts`` loses its column CHECK (>= 0, a PositiveSmallIntegerField's): the ``>= 1``
rule covers it.
"""

from django.db import migrations, models

TODOS_VALID = """
CREATE OR REPLACE FUNCTION todos_valid(
    state varchar, priority smallint, max_attempts smallint, attempt integer,
    failures integer, round integer, attempts_pruned integer,
    lease_expires_at timestamptz, next_retry_at timestamptz, ended_at timestamptz,
    dead_letter_reason varchar
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN state IN ('pending', 'claimed', 'retry_wait', 'done', 'dead', 'canceled')  -- todos_state_valid
       AND priority BETWEEN -100 AND 100                                 -- todos_priority_range
       AND max_attempts >= 1                                             -- todos_max_attempts_min
       AND attempt >= 0 AND failures >= 0 AND round >= 1
       AND attempts_pruned >= 0                                          -- todos_counters_valid
       AND (state <> 'claimed' OR lease_expires_at IS NOT NULL)          -- todos_claimed_has_lease
       AND (state <> 'retry_wait' OR next_retry_at IS NOT NULL)          -- todos_retry_wait_has_time
       AND (state IN ('done', 'dead', 'canceled') OR ended_at IS NULL)   -- todos_ended_only_terminal
       AND (state <> 'dead' OR dead_letter_reason <> '');                -- todos_dead_has_reason
END
$$;
"""

TODO_ATTEMPTS_VALID = """
CREATE OR REPLACE FUNCTION todo_attempts_valid(
    claimer_kind varchar, endpoint_id bigint, ended_at timestamptz, outcome varchar,
    disposition varchar
) RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    -- todo_attempts_claimer_valid
    RETURN ((claimer_kind = 'endpoint' AND endpoint_id IS NOT NULL) OR claimer_kind = 'owner')
       -- todo_attempts_closed_valid
       AND ((ended_at IS NULL AND outcome = '' AND disposition = '')
            OR (ended_at IS NOT NULL
                AND outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped',
                                'canceled', 'revoked')
                AND disposition IN ('done', 'retry_scheduled', 'requeued', 'dead_lettered',
                                    'canceled')));
END
$$;
"""

# The constraints the two functions replace (their rules are in the comments above).
OLD_TODO_CHECKS = [
    "todos_state_valid",
    "todos_priority_range",
    "todos_max_attempts_min",
    "todos_counters_valid",
    "todos_claimed_has_lease",
    "todos_retry_wait_has_time",
    "todos_ended_only_terminal",
    "todos_dead_has_reason",
]
OLD_ATTEMPT_CHECKS = ["todo_attempts_claimer_valid", "todo_attempts_closed_valid"]


def _rules(function: str, *columns: str):
    return models.Func(*columns, function=function, output_field=models.BooleanField())


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0020_attempt_summary_document"),
    ]

    operations = [
        migrations.RunSQL(
            TODOS_VALID + TODO_ATTEMPTS_VALID,
            # Reversed after the constraints that call them are gone (operations reverse in
            # order).
            "DROP FUNCTION todos_valid; DROP FUNCTION todo_attempts_valid;",
        ),
        *(migrations.RemoveConstraint(model_name="todo", name=n) for n in OLD_TODO_CHECKS),
        *(
            migrations.RemoveConstraint(model_name="todoattempt", name=n)
            for n in OLD_ATTEMPT_CHECKS
        ),
        migrations.AlterField(
            model_name="todo",
            name="max_attempts",
            field=models.SmallIntegerField(),
        ),
        migrations.AddConstraint(
            model_name="todo",
            constraint=models.CheckConstraint(
                condition=_rules(
                    "todos_valid",
                    "state",
                    "priority",
                    "max_attempts",
                    "attempt",
                    "failures",
                    "round",
                    "attempts_pruned",
                    "lease_expires_at",
                    "next_retry_at",
                    "ended_at",
                    "dead_letter_reason",
                ),
                name="todos_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="todoattempt",
            constraint=models.CheckConstraint(
                condition=_rules(
                    "todo_attempts_valid",
                    "claimer_kind",
                    "endpoint",
                    "ended_at",
                    "outcome",
                    "disposition",
                ),
                name="todo_attempts_valid",
            ),
        ),
    ]
