"""The Board's open live streams (board/live.py), one row each, so that what a stream may go on
showing is asked of the database rather than remembered by the process that holds it.

A row says whose stream it is (the user, the session key it was opened with, a digest of the
user's password hash as the request saw it), which teams it shows, which process holds it and
until when (renewed while the stream is open). Each web process asks, every couple of seconds
and in one statement for all its streams, which of them are no longer allowed (the session
signed out or expired, the password changed, the user gone or made inactive, a team no longer
the user's) and ends those (queues/sql/live.py ``BOARD_STREAMS_CHECK``). The same rows make
the per-person cap one count across every web process.

No foreign keys: a user, a session or a membership that goes away is exactly what the check
looks for, so nothing here may stop its deletion or vanish with it unseen.

UNLOGGED, like ``board_watches``: after a crash of PostgreSQL the rows are gone, and every
process's next check ends its streams (the browsers reconnect and are counted again).
"""

from django.db import migrations

FORWARD = r"""
CREATE UNLOGGED TABLE board_streams (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    holder text NOT NULL,
    user_id bigint NOT NULL,
    session_key varchar(40) NOT NULL,
    password_digest bytea NOT NULL,
    team_ids bigint[] NOT NULL,
    opened_at timestamptz NOT NULL DEFAULT statement_timestamp(),
    expires_at timestamptz NOT NULL
);
-- The cap's count (one person's rows), a team switch's (one session's rows) and the rows of
-- processes gone (expired).
CREATE INDEX board_streams_user ON board_streams (user_id);
CREATE INDEX board_streams_session ON board_streams (session_key);
CREATE INDEX board_streams_expires ON board_streams (expires_at);
"""

BACKWARD = "DROP TABLE board_streams;"


class Migration(migrations.Migration):
    dependencies = [("queues", "0030_board_notices_per_statement")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
