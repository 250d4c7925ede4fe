"""The Board's notices about todos (migration 0027) said once per statement, not per row.

0027's row trigger ran a PL/pgSQL function for every todo a statement wrote: two SPI queries
(the endpoint's team, then the watch list) and the function's set-up, before it could find
that nobody watched. On the agents' path that is two calls a todo (the close, then the next
claim), and it was a tenth of the backend's CPU in the bench's drain (0.045 of 0.51 ms a todo,
docs/benchmarks.md, "The Board's notices once a statement, and a cursor kept a
connection"), watched or not.

Now ``todos`` has two statement triggers with transition tables (the rows as they were and as
they are): one call per statement, and one query that joins the changed rows to their
endpoints and says each row of a watched team, as the row trigger did:

- the payload and its flag are the same (``team:endpoint:todo:flag``; ``n`` for a new todo,
  ``e`` when an attempt ended, ``u`` otherwise);
- an unchanged row (an UPDATE that wrote the same values) says nothing, tested on the whole
  row as the row trigger's WHEN clause did;
- a statement that writes ``todos`` twice (the close and the next claim, in CTEs) fires each
  trigger once, with both rows in its transition tables.

``endpoints`` and the audit trail keep 0027's row triggers: nothing writes them per todo.
"""

import importlib

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION switchboard_board_todos() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('switchboard_board',
                          e.team_id || ':' || n.endpoint_id || ':' || n.id || ':n')
           FROM board_new n
           JOIN endpoints e ON e.id = n.endpoint_id
          WHERE EXISTS (SELECT 1 FROM board_watches w
                         WHERE w.team_id = e.team_id AND w.expires_at > statement_timestamp());
    ELSE
        PERFORM pg_notify('switchboard_board',
                          e.team_id || ':' || n.endpoint_id || ':' || n.id || ':'
                          || CASE WHEN o.state = 'claimed'
                                       AND (n.state <> 'claimed'
                                            OR n.last_attempt_seq <> o.last_attempt_seq)
                                  THEN 'e' ELSE 'u' END)
           FROM board_new n
           JOIN board_old o ON o.id = n.id
           JOIN endpoints e ON e.id = n.endpoint_id
          WHERE o IS DISTINCT FROM n
            AND EXISTS (SELECT 1 FROM board_watches w
                         WHERE w.team_id = e.team_id AND w.expires_at > statement_timestamp());
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER todos_board_new ON todos;
DROP TRIGGER todos_board_changed ON todos;
CREATE TRIGGER todos_board_new AFTER INSERT ON todos
    REFERENCING NEW TABLE AS board_new
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_board_todos();
CREATE TRIGGER todos_board_changed AFTER UPDATE ON todos
    REFERENCING OLD TABLE AS board_old NEW TABLE AS board_new
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_board_todos();

-- 0027's function now serves the endpoints and the audit trail only.
CREATE OR REPLACE FUNCTION switchboard_board_changed() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_team bigint;
    v_endpoint bigint;
    v_todo text := '';
    v_flag text := 'u';
BEGIN
    IF TG_TABLE_NAME = 'endpoints' THEN
        v_team := NEW.team_id;
        v_endpoint := NEW.id;
    ELSE  -- todo_events
        v_team := NEW.team_id;
        v_endpoint := 0;
        v_todo := COALESCE(NEW.todo_id::text, '');
        v_flag := 'n';
    END IF;
    IF EXISTS (SELECT 1 FROM board_watches w
                WHERE w.team_id = v_team AND w.expires_at > statement_timestamp()) THEN
        PERFORM pg_notify('switchboard_board',
                          v_team || ':' || v_endpoint || ':' || v_todo || ':' || v_flag);
    END IF;
    RETURN NULL;
END
$$;
"""

# 0027's row triggers and function, as they were.
_0027 = importlib.import_module("switchboard.queues.migrations.0027_board_live")
BACKWARD = (
    """
DROP TRIGGER todos_board_changed ON todos;
DROP TRIGGER todos_board_new ON todos;
DROP FUNCTION switchboard_board_todos();
"""
    + _0027.BOARD_CHANGED
    + _0027.TODOS_ROW_TRIGGERS
)


class Migration(migrations.Migration):
    dependencies = [("queues", "0029_endpoint_changes")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
