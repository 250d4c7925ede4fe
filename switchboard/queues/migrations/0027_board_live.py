"""The Board's live stream (board/live.py): a change a Board viewer should see is said on
``switchboard_board`` in the transaction that made it, but only for a team someone watches.

Why a watch list: PostgreSQL's NOTIFY takes a database-wide lock at commit, so a notification
on every claim, heartbeat and completion of every team would put all of a busy server's
commits in one line, watched or not. ``board_watches`` holds the teams some web process
streams (each process upserts its own rows, with an expiry it renews; a process that dies
leaves rows that expire), and the row triggers below look there first: one index probe for a
team nobody watches, nothing more.

Payload ``team:endpoint:todo:flag`` (todo empty for an endpoint's own change), flag ``e`` when
an attempt ended (a close, a reap, a take-over), ``n`` for a new todo or a new audit row, ``u``
otherwise: the stream reads the feed again only after an ``e`` or an ``n``. An unchanged row
(an UPDATE that wrote the same values) says nothing (the WHEN clause, evaluated in C).
Retention's deletes say nothing either: what it deletes is old and done, and a row the
Board shows that is gone is marked as such by its next full refresh.

UNLOGGED: the watch list is rebuilt by the web processes within seconds after a crash.
"""

from django.db import migrations

# The function and the todos' row triggers are named apart: 0030 puts them back when it is
# reversed.
BOARD_CHANGED = r"""
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
    ELSIF TG_TABLE_NAME = 'todo_events' THEN
        v_team := NEW.team_id;
        v_endpoint := 0;
        v_todo := COALESCE(NEW.todo_id::text, '');
        v_flag := 'n';
    ELSE
        SELECT e.team_id INTO v_team FROM endpoints e WHERE e.id = NEW.endpoint_id;
        v_endpoint := NEW.endpoint_id;
        v_todo := NEW.id::text;
        IF TG_OP = 'INSERT' THEN
            v_flag := 'n';
        ELSIF OLD.state = 'claimed'
              AND (NEW.state <> 'claimed' OR NEW.last_attempt_seq <> OLD.last_attempt_seq) THEN
            v_flag := 'e';
        END IF;
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

TODOS_ROW_TRIGGERS = r"""
CREATE TRIGGER todos_board_new AFTER INSERT ON todos
    FOR EACH ROW EXECUTE FUNCTION switchboard_board_changed();
CREATE TRIGGER todos_board_changed AFTER UPDATE ON todos
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION switchboard_board_changed();
"""

FORWARD = (
    r"""
CREATE UNLOGGED TABLE board_watches (
    team_id bigint NOT NULL,
    holder text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (team_id, holder)
);
"""
    + BOARD_CHANGED
    + TODOS_ROW_TRIGGERS
    + r"""
CREATE TRIGGER endpoints_board_new AFTER INSERT ON endpoints
    FOR EACH ROW EXECUTE FUNCTION switchboard_board_changed();
-- What the Board shows of an endpoint; not the admission window a claim may write.
CREATE TRIGGER endpoints_board_changed AFTER UPDATE ON endpoints
    FOR EACH ROW WHEN ((OLD.paused_at, OLD.revoked_at, OLD.rotated_at, OLD.notify_url,
                        OLD.name, OLD.verbs)
                       IS DISTINCT FROM (NEW.paused_at, NEW.revoked_at, NEW.rotated_at,
                                         NEW.notify_url, NEW.name, NEW.verbs))
    EXECUTE FUNCTION switchboard_board_changed();
CREATE TRIGGER todo_events_board_new AFTER INSERT ON todo_events
    FOR EACH ROW EXECUTE FUNCTION switchboard_board_changed();
"""
)

BACKWARD = r"""
DROP TRIGGER todo_events_board_new ON todo_events;
DROP TRIGGER endpoints_board_changed ON endpoints;
DROP TRIGGER endpoints_board_new ON endpoints;
DROP TRIGGER todos_board_changed ON todos;
DROP TRIGGER todos_board_new ON todos;
DROP FUNCTION switchboard_board_changed();
DROP TABLE board_watches;
"""


class Migration(migrations.Migration):
    dependencies = [("queues", "0026_attempt_wake_time")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
