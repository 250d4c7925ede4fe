-- The ledger's functions, each with the triggers that call it, as migrating from zero leaves
-- them (queues/migrations/). Written by `python -m switchboard.queues.schema --write` from the catalogs
-- of a migrated database; edit only the lines that say what a function does (the writer
-- keeps them, and the order). A migration that changes a function loads it from here:
-- `migrations.RunSQL(schema.function("name"), ...)` (queues/schema/__init__.py).

-- name: todos_valid --
-- A todo's row rules, the one CHECK of `todos`: the state list, the priority range, the
-- counters, a claimed todo has a lease, a waiting retry a time, only an ended todo an end,
-- a dead one a reason. PL/pgSQL so the CHECK is one short call (compiled once a session).
CREATE OR REPLACE FUNCTION todos_valid(state character varying, priority smallint,
    max_attempts smallint, attempt integer, failures integer, round integer,
    attempts_pruned integer, lease_expires_at timestamp with time zone,
    next_retry_at timestamp with time zone, ended_at timestamp with time zone,
    dead_letter_reason character varying)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
BEGIN
    RETURN state IN ('pending', 'claimed', 'retry_wait', 'done', 'dead', 'canceled', 'waiting')  -- todos_state_valid
       AND priority BETWEEN -100 AND 100                                 -- todos_priority_range
       AND max_attempts >= 1                                             -- todos_max_attempts_min
       AND attempt >= 0 AND failures >= 0 AND round >= 1
       AND attempts_pruned >= 0                                          -- todos_counters_valid
       AND (state <> 'claimed' OR lease_expires_at IS NOT NULL)          -- todos_claimed_has_lease
       AND (state <> 'retry_wait' OR next_retry_at IS NOT NULL)          -- todos_retry_wait_has_time
       AND (state IN ('done', 'dead', 'canceled') OR ended_at IS NULL)   -- todos_ended_only_terminal
       AND (state <> 'dead' OR dead_letter_reason <> '');                -- todos_dead_has_reason
END
$function$;

-- name: todo_attempts_valid --
-- An attempt's row rules, the one CHECK of `todo_attempts`: who holds it, an open attempt
-- has no outcome and a closed one has one of each, and the summary's words are its words.
CREATE OR REPLACE FUNCTION todo_attempts_valid(claimer_kind character varying, endpoint_id bigint,
    user_id integer, ended_at timestamp with time zone, outcome character varying,
    disposition character varying, summary text, summary_document tsvector)
 RETURNS boolean
 LANGUAGE plpgsql
 IMMUTABLE PARALLEL SAFE
AS $function$
BEGIN
    -- an endpoint attempt names its endpoint and no user
    RETURN ((claimer_kind = 'endpoint' AND endpoint_id IS NOT NULL AND user_id IS NULL)
            OR claimer_kind = 'owner')
       -- an open attempt has no outcome or disposition, a closed one one of each
       AND ((ended_at IS NULL AND outcome = '' AND disposition = '')
            OR (ended_at IS NOT NULL
                AND outcome IN ('completed', 'failed', 'released', 'lease_expired', 'reaped',
                                'canceled', 'revoked', 'taken_over', 'asked')
                AND disposition IN ('done', 'retry_scheduled', 'requeued', 'dead_lettered',
                                    'canceled', 'taken_over', 'waiting')))
       -- the summary's words are its words (the Board's search reads them)
       AND CASE WHEN summary > '' THEN summary_document IS NOT NULL
                                       AND summary_document = to_tsvector('simple', summary)
                ELSE summary_document IS NULL END;
END
$function$;

-- name: switchboard_utc --
-- A timestamp as the API writes it (UTC, microseconds, a Z), for the outbox's payloads.
CREATE OR REPLACE FUNCTION switchboard_utc(ts timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $function$;

-- name: switchboard_todo_unclaimed --
-- Is the todo unclaimed since a claim's snapshot, and claimable still, as a row read with a
-- snapshot of its own says (the same newest attempt, a live state)? A claim's pick asks it of
-- each candidate before locking it, so it passes over a row another transaction claimed (or
-- closed for good) since the statement began, where `FOR UPDATE` would lock that row's newest
-- version in passing, to the claim's commit, and a close of the same todo would wait on it
-- (docs/benchmarks.md, "A lock in passing"). A move between live states that claims nothing
-- (a due retry requeued, a lapsed lease reaped or released) keeps the answer true: the pick
-- locks the row and takes it, as before. VOLATILE so it takes that snapshot; PL/pgSQL so its
-- query is planned once a session.
CREATE OR REPLACE FUNCTION switchboard_todo_unclaimed(p_id bigint, p_seq integer)
 RETURNS boolean
 LANGUAGE plpgsql
AS $function$
BEGIN
    RETURN EXISTS (SELECT 1 FROM todos
                    WHERE id = p_id AND last_attempt_seq = p_seq
                      AND state IN ('pending', 'claimed', 'retry_wait'));
END
$function$;

-- name: switchboard_outbox_dead_letter --
-- When a todo dies: one outbox row per active dead-letter sink of its team, with the todo
-- and the attempt it died closing.
CREATE OR REPLACE FUNCTION switchboard_outbox_dead_letter()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
     WHERE a.todo_id = NEW.id AND a.seq = NEW.last_attempt_seq
       AND OLD.state = 'claimed';
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
    INSERT INTO outbox (kind, team_id, sink_id, endpoint_id, todo_id, url, payload)
    SELECT 'dead_letter', s.team_id, s.id, NEW.endpoint_id, NEW.id, s.url, v_payload
      FROM dead_letter_sinks s JOIN endpoints e ON e.team_id = s.team_id
     WHERE e.id = NEW.endpoint_id AND s.active;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER todos_outbox_dead_letter AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN (new.state::text = 'dead'::text
        AND old.state::text IS DISTINCT FROM 'dead'::text)
    EXECUTE FUNCTION switchboard_outbox_dead_letter();

-- name: switchboard_outbox_doorbell --
-- When a todo becomes claimable (made pending, or back to pending): ring the endpoint's
-- doorbell URL through the outbox, coalesced to one pending ring per endpoint.
CREATE OR REPLACE FUNCTION switchboard_outbox_doorbell()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
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
    INSERT INTO outbox (kind, team_id, endpoint_id, todo_id, url, payload)
    VALUES ('doorbell', v_team_id, NEW.endpoint_id, NEW.id, v_url, v_payload)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER todos_outbox_doorbell_created AFTER INSERT ON todos
    FOR EACH ROW WHEN (new.state::text = 'pending'::text)
    EXECUTE FUNCTION switchboard_outbox_doorbell();

CREATE OR REPLACE TRIGGER todos_outbox_doorbell_pending AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN (new.state::text = 'pending'::text
        AND old.state::text IS DISTINCT FROM 'pending'::text)
    EXECUTE FUNCTION switchboard_outbox_doorbell();

-- name: todo_search_document_on_insert --
-- When a todo is made: write its title's and body's search words (todo_search_documents).
CREATE OR REPLACE FUNCTION todo_search_document_on_insert()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO todo_search_documents (todo_id, document)
    VALUES (NEW.id, to_tsvector('simple'::regconfig,
                                COALESCE(NEW.title, '') || ' ' || COALESCE(NEW.body, '')));
    RETURN NULL;
END $function$;

CREATE OR REPLACE TRIGGER todo_search_document_on_insert AFTER INSERT ON todos
    FOR EACH ROW
    EXECUTE FUNCTION todo_search_document_on_insert();

-- name: todo_attempt_result_words --
-- Before an attempt's result is written: its search words beside it (`result_document`).
CREATE OR REPLACE FUNCTION todo_attempt_result_words()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    NEW.result_document := NULLIF(
        jsonb_to_tsvector('simple'::regconfig, NEW.result, '["string", "numeric", "key"]'),
        ''::tsvector);
    RETURN NEW;
END $function$;

CREATE OR REPLACE TRIGGER todo_attempt_result_words BEFORE INSERT OR UPDATE OF result,
    result_document ON todo_attempts
    FOR EACH ROW WHEN (new.result IS NOT NULL OR new.result_document IS NOT NULL)
    EXECUTE FUNCTION todo_attempt_result_words();

-- name: switchboard_endpoint_changed --
-- When an endpoint changes (but for the admission window a claim writes), is deleted or
-- truncated: say its id (or `*`) on `switchboard_endpoint`, so every process forgets the
-- endpoint its token cache holds.
CREATE OR REPLACE FUNCTION switchboard_endpoint_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    IF TG_LEVEL = 'STATEMENT' THEN
        PERFORM pg_notify('switchboard_endpoint', '*');
    ELSE
        PERFORM pg_notify('switchboard_endpoint', OLD.id::text);
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER endpoints_changed AFTER UPDATE ON endpoints
    FOR EACH ROW WHEN ((to_jsonb(old.*) - 'admission_window_at'::text - 'admission_claims'::text)
        IS DISTINCT FROM (to_jsonb(new.*) - 'admission_window_at'::text - 'admission_claims'::text))
    EXECUTE FUNCTION switchboard_endpoint_changed();

CREATE OR REPLACE TRIGGER endpoints_deleted AFTER DELETE ON endpoints
    FOR EACH ROW
    EXECUTE FUNCTION switchboard_endpoint_changed();

CREATE OR REPLACE TRIGGER endpoints_truncated AFTER TRUNCATE ON endpoints
    FOR EACH STATEMENT
    EXECUTE FUNCTION switchboard_endpoint_changed();

-- name: switchboard_board_todos --
-- Once per statement that makes or changes todos: say each changed todo of a watched team
-- on `switchboard_board` as a BoardNotice (queues/notify/channels.py: `what` is `new`,
-- `ended` when an attempt ended, `changed` otherwise) for the Board's live stream. A
-- statement of a few rows (a claim, a complete: the hot path) joins its old and new rows in a
-- plan made once; one of many (a release of 1,000 dependents, a sweeper's batch, a bulk
-- cancel) is planned for its count each time and without nested loops: a plan made once for a
-- few rows joined 1,000 by nested loop over the transition tables (docs/benchmarks.md,
-- "Waits", for the figures); a function-wide SET enable_nestloop would cost every claim and
-- complete the setting saved and restored and a hash built for two rows.
CREATE OR REPLACE FUNCTION switchboard_board_todos()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_nestloop text;
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM pg_notify('switchboard_board',
                          json_build_object('team', e.team_id, 'what', 'new',
                                            'endpoint', n.endpoint_id, 'todo', n.id)::text)
           FROM board_new n
           JOIN endpoints e ON e.id = n.endpoint_id
          WHERE EXISTS (SELECT 1 FROM board_watches w
                         WHERE w.team_id = e.team_id AND w.expires_at > statement_timestamp());
    ELSIF (SELECT count(*) FROM (SELECT 1 FROM board_new LIMIT 9) few) <= 8 THEN
        PERFORM pg_notify('switchboard_board',
                          json_build_object('team', e.team_id,
                                            'what', CASE WHEN o.state = 'claimed'
                                                              AND (n.state <> 'claimed'
                                                                   OR n.last_attempt_seq
                                                                      <> o.last_attempt_seq)
                                                         THEN 'ended' ELSE 'changed' END,
                                            'endpoint', n.endpoint_id, 'todo', n.id)::text)
           FROM board_new n
           JOIN board_old o ON o.id = n.id
           JOIN endpoints e ON e.id = n.endpoint_id
          WHERE o IS DISTINCT FROM n
            AND EXISTS (SELECT 1 FROM board_watches w
                         WHERE w.team_id = e.team_id AND w.expires_at > statement_timestamp());
    ELSE
        v_nestloop := current_setting('enable_nestloop');
        PERFORM set_config('enable_nestloop', 'off', true);
        EXECUTE $many$
        SELECT count(pg_notify('switchboard_board',
                               json_build_object('team', e.team_id,
                                                 'what', CASE WHEN o.state = 'claimed'
                                                                   AND (n.state <> 'claimed'
                                                                        OR n.last_attempt_seq
                                                                           <> o.last_attempt_seq)
                                                              THEN 'ended' ELSE 'changed' END,
                                                 'endpoint', n.endpoint_id, 'todo', n.id)::text))
          FROM board_new n
          JOIN board_old o ON o.id = n.id
          JOIN endpoints e ON e.id = n.endpoint_id
         WHERE o IS DISTINCT FROM n
           AND EXISTS (SELECT 1 FROM board_watches w
                        WHERE w.team_id = e.team_id AND w.expires_at > statement_timestamp())
        $many$;
        PERFORM set_config('enable_nestloop', v_nestloop, true);
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER todos_board_changed AFTER UPDATE ON todos
    REFERENCING OLD TABLE AS board_old NEW TABLE AS board_new FOR EACH STATEMENT
    EXECUTE FUNCTION switchboard_board_todos();

CREATE OR REPLACE TRIGGER todos_board_new AFTER INSERT ON todos
    REFERENCING NEW TABLE AS board_new FOR EACH STATEMENT
    EXECUTE FUNCTION switchboard_board_todos();

-- name: switchboard_board_changed --
-- When an endpoint is made or changes what the Board shows of it, or an audit row is written:
-- say it on `switchboard_board` as a BoardNotice (`endpoint`, `event`) if its team is watched.
CREATE OR REPLACE FUNCTION switchboard_board_changed()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_notice json;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM board_watches w
                    WHERE w.team_id = NEW.team_id AND w.expires_at > statement_timestamp()) THEN
        RETURN NULL;
    END IF;
    IF TG_TABLE_NAME = 'endpoints' THEN
        v_notice := json_build_object('team', NEW.team_id, 'what', 'endpoint',
                                      'endpoint', NEW.id);
    ELSE  -- todo_events
        v_notice := json_build_object('team', NEW.team_id, 'what', 'event',
                                      'todo', NEW.todo_id);
    END IF;
    PERFORM pg_notify('switchboard_board', v_notice::text);
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER endpoints_board_changed AFTER UPDATE ON endpoints
    FOR EACH ROW WHEN (old.paused_at IS DISTINCT FROM new.paused_at
        OR old.revoked_at IS DISTINCT FROM new.revoked_at
        OR old.rotated_at IS DISTINCT FROM new.rotated_at
        OR old.notify_url::text IS DISTINCT FROM new.notify_url::text
        OR old.name::text IS DISTINCT FROM new.name::text OR old.verbs IS DISTINCT FROM new.verbs)
    EXECUTE FUNCTION switchboard_board_changed();

CREATE OR REPLACE TRIGGER endpoints_board_new AFTER INSERT ON endpoints
    FOR EACH ROW
    EXECUTE FUNCTION switchboard_board_changed();

CREATE OR REPLACE TRIGGER todo_events_board_new AFTER INSERT ON todo_events
    FOR EACH ROW
    EXECUTE FUNCTION switchboard_board_changed();

-- name: switchboard_wait_ended --
-- When a todo leaves `waiting` (answered, its time run out, claimed by a person, canceled,
-- revoked): it waits for nothing more, and a question still open is withdrawn (an answer or
-- the sweeper's expiry end theirs first, saying how).
CREATE OR REPLACE FUNCTION switchboard_wait_ended()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    NEW.waiting_for := '';
    UPDATE todo_questions
       SET ended_at = statement_timestamp(), ending = 'withdrawn'
     WHERE todo_id = NEW.id AND ended_at IS NULL;
    RETURN NEW;
END
$function$;

CREATE OR REPLACE TRIGGER todos_wait_ended BEFORE UPDATE OF state ON todos
    FOR EACH ROW WHEN (old.state::text = 'waiting'::text AND new.state::text <> 'waiting'::text)
    EXECUTE FUNCTION switchboard_wait_ended();

-- name: switchboard_task_state --
-- A todo as a protocol task's state (agents/task_view.py ``task_state`` says the same in Python;
-- tests/agents/test_task_view.py holds the two together for every ledger state): A2A
-- ListTasks' filter (queues/sql/reads.py) and a push notification's status.
CREATE OR REPLACE FUNCTION switchboard_task_state(p_state text, p_attempt integer,
    p_waiting_for text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
AS $function$
SELECT CASE p_state
    WHEN 'pending' THEN CASE WHEN p_attempt = 0 THEN 'submitted' ELSE 'working' END
    WHEN 'claimed' THEN 'working'
    WHEN 'retry_wait' THEN 'working'
    WHEN 'waiting' THEN CASE WHEN p_waiting_for = 'people' THEN 'input_required'
                             ELSE 'working' END
    WHEN 'done' THEN 'completed'
    WHEN 'dead' THEN 'failed'
    WHEN 'canceled' THEN 'canceled' END
$function$;

-- name: switchboard_outbox_task_push --
-- When a todo with A2A push-notification configs changes state: one `task.push` outbox row per
-- config, its payload A2A's status update (the task id is kept with the config: a MAC the
-- database cannot make). Fires only for a todo that has configs (`push_configs`).
CREATE OR REPLACE FUNCTION switchboard_outbox_task_push()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
    INSERT INTO outbox (kind, team_id, endpoint_id, push_config_id, todo_id, url, payload)
    SELECT 'task.push', c.team_id, c.endpoint_id, c.id, NEW.id, c.url,
           jsonb_build_object('statusUpdate', jsonb_build_object(
               'taskId', c.task_id, 'contextId', c.task_id,
               'status', jsonb_build_object(
                   'state', 'TASK_STATE_'
                            || upper(switchboard_task_state(NEW.state, NEW.attempt,
                                                            NEW.waiting_for)),
                   'timestamp', switchboard_utc(statement_timestamp()))))
      FROM task_push_configs c
     WHERE c.todo_id = NEW.id;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER todos_outbox_task_push AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN (new.push_configs > 0 AND old.state::text IS DISTINCT FROM new.state::text)
    EXECUTE FUNCTION switchboard_outbox_task_push();

-- name: switchboard_outbox_todo_waiting --
-- When an agent asks a question (a todo starts waiting on people): one `todo.waiting` outbox
-- row per active dead-letter sink of its team (people: any member may answer), and one to the
-- notify URL of the endpoint that may answer it (its requester, or the endpoint that made it
-- on its own queue) if that endpoint holds the `answer` verb. A row names its sink or its
-- endpoint, never both.
CREATE OR REPLACE FUNCTION switchboard_outbox_todo_waiting()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_team_id bigint;
    v_answerer bigint;
    v_payload jsonb;
BEGIN
    SELECT e.team_id,
           COALESCE(t.requester_id, CASE WHEN t.created_by_id IS NULL THEN t.endpoint_id END),
           jsonb_build_object(
               'event', 'todo.waiting',
               'todo', jsonb_build_object(
                   'id', t.id, 'title', t.title, 'endpoint', e.agent_id, 'team', tm.slug,
                   'state', t.state, 'waiting_for', NULLIF(t.waiting_for, ''),
                   'round', t.round, 'attempt', t.attempt, 'failures', t.failures,
                   'max_attempts', t.max_attempts, 'requester', rq.agent_id,
                   'created_at', switchboard_utc(t.created_at)),
               'question', jsonb_build_object(
                   'attempt_seq', NEW.attempt_seq, 'text', NEW.text,
                   'text_truncated', NEW.text_truncated, 'text_bytes', NEW.text_bytes,
                   'choices', NEW.choices, 'answer_schema', NEW.answer_schema,
                   'asked_at', switchboard_utc(NEW.asked_at),
                   'answer_within_seconds', NEW.answer_within_seconds,
                   'expires_at', switchboard_utc(NEW.expires_at),
                   'on_no_answer', NEW.on_no_answer,
                   'claimant', NULLIF(a.claimant, ''), 'endpoint', ae.agent_id))
      INTO v_team_id, v_answerer, v_payload
      FROM todos t
      JOIN endpoints e ON e.id = t.endpoint_id
      JOIN teams tm ON tm.id = e.team_id
      LEFT JOIN endpoints rq ON rq.id = t.requester_id
      LEFT JOIN todo_attempts a ON a.todo_id = t.id AND a.seq = NEW.attempt_seq
      LEFT JOIN endpoints ae ON ae.id = a.endpoint_id
     WHERE t.id = NEW.todo_id;
    INSERT INTO outbox (kind, team_id, sink_id, endpoint_id, todo_id, url, payload)
    SELECT 'todo.waiting', s.team_id, s.id, NULL, NEW.todo_id, s.url, v_payload
      FROM dead_letter_sinks s
     WHERE s.team_id = v_team_id AND s.active
    UNION ALL
    SELECT 'todo.waiting', v_team_id, NULL, n.id, NEW.todo_id, n.notify_url, v_payload
      FROM endpoints n
     WHERE n.id = v_answerer AND n.notify_url <> '' AND n.revoked_at IS NULL
       AND 'answer' = ANY(n.verbs);
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER todo_questions_outbox_waiting AFTER INSERT ON todo_questions
    FOR EACH ROW
    EXECUTE FUNCTION switchboard_outbox_todo_waiting();

-- name: switchboard_waits_follow --
-- What a todo's change of state does to the todos that wait on it, in its transaction. One
-- trigger, not one a case: every UPDATE of todos prepares each row trigger's WHEN again, and
-- the claim and the complete (which have none of these cases) paid for three.
-- - After: when a todo that others were made `after` ends (done, dead, canceled), each edge
--   to it is marked with how it ended, once, and each dependent still waiting counts it down;
--   the last one makes it pending (doorbell rung), and, unless it was made with after_policy
--   any_end, one that did not end done makes it a dead letter (reason after_ended). At most
--   1000 edges here; the sweeper releases the rest in batches of as many (queues/waits.py),
--   woken on `switchboard_sweep`.
-- - Children: when a child todo ends (or, rerun, starts again), its parent's count of open
--   children follows; the last child to end makes a parent waiting for its children pending
--   (doorbell rung).
-- - Keys: a claim of a todo with a key, on an endpoint with max_claimed_per_key, counts the
--   key's claimed todos (todos_key_claimed, a statement of its own) under an advisory lock
--   of the key, held to its commit, so the claims of one key take turns; over the limit it
--   is refused (SQLSTATE SWK01: the claim looks again, or answers conflict). An end writes
--   no count: leaving `claimed` is the count's change. A todo leaving `claimed` under a
--   limit rings the endpoint's doorbell, since others of its key may be claimable now, if a
--   long-poll of the endpoint may be waiting: one began in the last 60 seconds
--   (endpoints.waited_at). Not at every end: the notifying transactions' commits take turns
--   on one lock through their WAL flush (docs/benchmarks.md, "Keys and the doorbell,
--   again"). The advisory lock (class WAIT, 1463896404, and the endpoint) is shared here and
--   exclusive where a long-poll marks waited_at (sql.MARK_WAITING), and waited_at is read
--   after it, by a statement of its own (a fresh snapshot): an end either commits before the
--   long-poll's next look, which sees it, or reads the mark and rings (docs/ledger.md,
--   "Keys").
CREATE OR REPLACE FUNCTION switchboard_waits_follow()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
DECLARE
    v_ended boolean := NEW.state IN ('done', 'dead', 'canceled');
    v_was_ended boolean := OLD.state IN ('done', 'dead', 'canceled');
    v_edges integer;
    v_endpoint bigint;
    v_claimed integer;
    v_max integer;
    v_ring boolean;
BEGIN
    IF NEW.has_dependents AND v_ended AND NOT v_was_ended THEN
        WITH edges AS (
            UPDATE todo_after a
               SET ended = NEW.state
             WHERE a.after_id = NEW.id
               AND a.todo_id IN (SELECT x.todo_id FROM todo_after x
                                  WHERE x.after_id = NEW.id AND x.ended = ''
                                  ORDER BY x.todo_id LIMIT 1000)
            RETURNING a.todo_id
        ),
        moved AS (
            UPDATE todos w
               SET after_left = w.after_left - 1,
                   state = CASE WHEN w.after_policy = 'all_done' AND NEW.state <> 'done'
                                THEN 'dead'
                                WHEN w.after_left = 1 THEN 'pending'
                                ELSE w.state END,
                   dead_letter_reason = CASE WHEN w.after_policy = 'all_done'
                                                  AND NEW.state <> 'done'
                                             THEN 'after_ended' ELSE w.dead_letter_reason END,
                   ended_at = CASE WHEN w.after_policy = 'all_done' AND NEW.state <> 'done'
                                   THEN statement_timestamp() ELSE w.ended_at END,
                   updated_at = statement_timestamp()
              FROM edges
             WHERE w.id = edges.todo_id AND w.state = 'waiting' AND w.waiting_for = 'todos'
            RETURNING w.endpoint_id, w.state
        )
        SELECT (SELECT count(*) FROM edges)
          INTO v_edges
          FROM (SELECT count(pg_notify('switchboard_todo_ready', r.endpoint_id::text))
                  FROM (SELECT DISTINCT m.endpoint_id FROM moved m
                         WHERE m.state = 'pending') r) n;
        IF v_edges >= 1000 THEN
            PERFORM pg_notify('switchboard_sweep', NEW.id::text);
        END IF;
    END IF;
    IF NEW.parent_id IS NOT NULL AND v_ended <> v_was_ended THEN
        UPDATE todos p
           SET children_open = p.children_open + CASE WHEN v_ended THEN -1 ELSE 1 END,
               state = CASE WHEN v_ended AND p.children_open = 1 AND p.state = 'waiting'
                                 AND p.waiting_for = 'children' THEN 'pending'
                            ELSE p.state END,
               updated_at = statement_timestamp()
         WHERE p.id = NEW.parent_id
        RETURNING CASE WHEN p.state = 'pending' AND v_ended AND p.children_open = 0
                       THEN p.endpoint_id END
          INTO v_endpoint;
        IF v_endpoint IS NOT NULL THEN
            PERFORM pg_notify('switchboard_todo_ready', v_endpoint::text);
        END IF;
    END IF;
    IF NEW.key <> '' AND (OLD.state = 'claimed') <> (NEW.state = 'claimed') THEN
        IF NEW.state = 'claimed' THEN
            SELECT e.max_claimed_per_key INTO v_max FROM endpoints e WHERE e.id = NEW.endpoint_id;
            IF v_max IS NOT NULL THEN
                -- Claims of one key take turns: an advisory lock of the transaction, keyed by
                -- the endpoint and the key (seed 45; unique_while_active's is 44). The count,
                -- a statement of its own (a fresh snapshot), sees every claim of the key
                -- committed before the lock was had, and this statement's own changes.
                PERFORM pg_advisory_xact_lock(
                    hashtextextended(NEW.endpoint_id::text || ':' || NEW.key, 45));
                SELECT count(*) INTO v_claimed FROM todos c
                 WHERE c.endpoint_id = NEW.endpoint_id AND c.key = NEW.key
                   AND c.state = 'claimed' AND c.key <> '';
                IF v_claimed > v_max THEN
                    RAISE EXCEPTION
                        'this key has its most claimed todos (max_claimed_per_key %)', v_max
                        USING ERRCODE = 'SWK01';
                END IF;
            END IF;
        ELSE
            PERFORM pg_advisory_xact_lock_shared(1463896404,
                                                 (NEW.endpoint_id & 2147483647)::integer);
            SELECT e.max_claimed_per_key IS NOT NULL
                   AND e.waited_at > statement_timestamp() - interval '60 seconds'
              INTO v_ring
              FROM endpoints e WHERE e.id = NEW.endpoint_id;
            IF v_ring THEN
                PERFORM pg_notify('switchboard_todo_ready', NEW.endpoint_id::text);
            END IF;
        END IF;
    END IF;
    RETURN NULL;
END
$function$;

CREATE OR REPLACE TRIGGER todos_waits_follow AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN ((new.has_dependents OR new.parent_id IS NOT NULL
        OR new.key::text <> ''::text) AND old.state::text <> new.state::text)
    EXECUTE FUNCTION switchboard_waits_follow();
