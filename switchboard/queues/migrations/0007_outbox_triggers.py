"""Outbox rows written by PostgreSQL triggers, in the transaction of the change itself.

Why triggers: a todo dies inside single SQL statements (queues/sql.py: a close at the cap, a
claim taking over a lapsed lease at the cap, the sweeper's reap at the cap, revocation, a fail
that is not retryable), some of them run in autocommit, and a todo becomes claimable in half
a dozen places. A row trigger sees every one of them, in the same transaction, with nothing
to forget in Python. The WHEN clauses are evaluated in C before any PL/pgSQL runs, so the
updates that neither kill a todo nor make it pending (claims, completes, heartbeats, which do
not even list `state`) pay nothing measurable.

An AFTER ROW trigger fires at the end of the statement that queued it, after every
data-modifying CTE of that statement has run, and a VOLATILE function's queries take a fresh
snapshot: the dead-letter payload sees the attempt row the same statement closed
(tests/queues/test_outbox.py checks each dead-lettering path).

Doorbells coalesce: one pending doorbell per endpoint (the partial unique index of 0006). A
ring that finds that row already leased by a sender (in flight) or waiting out a backoff
(`next_attempt_at` in the future) writes its payload into it, so the sender, on a 2xx, sees
the payload changed and rings once more (queues/outbox.py) rather than count as heard a ring
the receiver may have missed. Otherwise the ring inserts, and a conflict with the pending row
does nothing: the common case takes no row lock, so rings of one endpoint do not queue.
docs/notifications.md describes the payloads.
"""

from django.db import migrations

FORWARD = r"""
CREATE FUNCTION switchboard_utc(ts timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$ SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $$;

CREATE FUNCTION switchboard_outbox_dead_letter() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_final jsonb;
    v_payload jsonb;
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM dead_letter_sinks s JOIN endpoints e ON e.team_id = s.team_id
         WHERE e.id = NEW.endpoint_id AND s.active) THEN
        RETURN NULL;
    END IF;
    SELECT jsonb_build_object(
               'seq', a.seq, 'round', a.round, 'attempt', a.attempt,
               'claimer_kind', a.claimer_kind, 'claimant', NULLIF(a.claimant, ''),
               'claimed_at', switchboard_utc(a.claimed_at),
               'last_heartbeat_at', switchboard_utc(a.last_heartbeat_at),
               'ended_at', switchboard_utc(a.ended_at),
               'outcome', NULLIF(a.outcome, ''), 'disposition', NULLIF(a.disposition, ''),
               'died', a.outcome IN ('lease_expired', 'reaped'),
               'summary', a.summary, 'summary_truncated', a.summary_truncated,
               'artifact', a.artifact, 'artifact_truncated', a.artifact_truncated)
      INTO v_final
      FROM todo_attempts a
     WHERE a.todo_id = NEW.id AND a.seq = NEW.last_attempt_seq;
    SELECT jsonb_build_object(
               'event', 'dead_letter',
               'todo', jsonb_build_object(
                   'id', NEW.id, 'title', NEW.title, 'endpoint', e.agent_id, 'team', tm.slug,
                   'state', NEW.state, 'round', NEW.round, 'attempt', NEW.attempt,
                   'failures', NEW.failures, 'max_attempts', NEW.max_attempts,
                   'created_at', switchboard_utc(NEW.created_at),
                   'ended_at', switchboard_utc(NEW.ended_at)),
               'dead_letter_reason', NEW.dead_letter_reason,
               'final_attempt', v_final,
               'attempts_total', NEW.last_attempt_seq - NEW.attempts_pruned)
      INTO v_payload
      FROM endpoints e JOIN teams tm ON tm.id = e.team_id
     WHERE e.id = NEW.endpoint_id;
    INSERT INTO outbox (kind, team_id, sink_id, endpoint_id, todo_id, url, payload,
                        created_at, next_attempt_at, attempts, last_error)
    SELECT 'dead_letter', s.team_id, s.id, NEW.endpoint_id, NEW.id, s.url, v_payload,
           statement_timestamp(), statement_timestamp(), 0, ''
      FROM dead_letter_sinks s JOIN endpoints e ON e.team_id = s.team_id
     WHERE e.id = NEW.endpoint_id AND s.active;
    RETURN NULL;
END
$$;

CREATE FUNCTION switchboard_outbox_doorbell() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    v_team_id bigint;
    v_url text;
    v_payload jsonb;
BEGIN
    SELECT e.team_id, e.notify_url,
           jsonb_build_object('event', 'doorbell', 'endpoint', e.agent_id, 'team', tm.slug,
                              'todo_id', NEW.id,
                              'rung_at', switchboard_utc(statement_timestamp()))
      INTO v_team_id, v_url, v_payload
      FROM endpoints e JOIN teams tm ON tm.id = e.team_id
     WHERE e.id = NEW.endpoint_id AND e.notify_url <> '' AND e.revoked_at IS NULL;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- The pending doorbell is in flight or backing off: mark it rung again (see above).
    UPDATE outbox o SET payload = v_payload
     WHERE o.endpoint_id = NEW.endpoint_id AND o.kind = 'doorbell'
       AND o.delivered_at IS NULL AND o.gave_up_at IS NULL
       AND o.next_attempt_at > statement_timestamp();
    IF FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO outbox (kind, team_id, sink_id, endpoint_id, todo_id, url, payload,
                        created_at, next_attempt_at, attempts, last_error)
    VALUES ('doorbell', v_team_id, NULL, NEW.endpoint_id, NEW.id, v_url, v_payload,
            statement_timestamp(), statement_timestamp(), 0, '')
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER todos_outbox_dead_letter
AFTER UPDATE OF state ON todos
FOR EACH ROW WHEN (NEW.state = 'dead' AND OLD.state IS DISTINCT FROM 'dead')
EXECUTE FUNCTION switchboard_outbox_dead_letter();

-- Two triggers: an INSERT trigger's WHEN may not name OLD.
CREATE TRIGGER todos_outbox_doorbell_created
AFTER INSERT ON todos
FOR EACH ROW WHEN (NEW.state = 'pending')
EXECUTE FUNCTION switchboard_outbox_doorbell();

CREATE TRIGGER todos_outbox_doorbell_pending
AFTER UPDATE OF state ON todos
FOR EACH ROW WHEN (NEW.state = 'pending' AND OLD.state IS DISTINCT FROM 'pending')
EXECUTE FUNCTION switchboard_outbox_doorbell();
"""

BACKWARD = """
DROP TRIGGER todos_outbox_doorbell_pending ON todos;
DROP TRIGGER todos_outbox_doorbell_created ON todos;
DROP TRIGGER todos_outbox_dead_letter ON todos;
DROP FUNCTION switchboard_outbox_doorbell();
DROP FUNCTION switchboard_outbox_dead_letter();
DROP FUNCTION switchboard_utc(timestamptz);
"""


class Migration(migrations.Migration):
    dependencies = [("queues", "0006_outbox_sinks_sweeper_metrics_admission")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
