-- The ledger's schema as migrations 0001 to 0047 leave it, as one script: what
-- 0001_squashed_0047_attempts_start_empty.py runs on a database that has none of them.
-- Written once, by `schema.script()` from queues/schema/tables.sql and functions.sql as they
-- were at 0047, and never edited (a later change is a later migration): the functions, the
-- tables and their indexes, the foreign keys, the triggers.

SET check_function_bodies = off;

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

CREATE OR REPLACE FUNCTION switchboard_utc(ts timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 STABLE PARALLEL SAFE
AS $function$ SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') $function$;

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

-- teams
CREATE TABLE teams (
    id         bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    slug       character varying(64) NOT NULL,
    name       character varying(200) NOT NULL,
    personal   boolean NOT NULL,
    created_at timestamp with time zone NOT NULL,
    CONSTRAINT teams_pkey PRIMARY KEY (id),
    CONSTRAINT teams_slug_key UNIQUE (slug)
);
CREATE INDEX teams_slug_e4533e92_like ON teams USING btree (slug varchar_pattern_ops);

-- team_members
CREATE TABLE team_members (
    id         bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    role       character varying(16) NOT NULL,
    created_at timestamp with time zone NOT NULL,
    user_id    integer NOT NULL,
    team_id    bigint NOT NULL,
    CONSTRAINT team_members_pkey PRIMARY KEY (id),
    CONSTRAINT team_members_unique UNIQUE (team_id, user_id),
    CONSTRAINT team_members_role_valid CHECK (role IN ('owner', 'member'))
);
CREATE INDEX team_members_team_id_eb8b893a ON team_members USING btree (team_id);
CREATE INDEX team_members_user_id_cfdfac1d ON team_members USING btree (user_id);

-- team_invitations
CREATE TABLE team_invitations (
    id             bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    username       character varying(150) NOT NULL,
    role           character varying(16) NOT NULL,
    created_at     timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    accepted_at    timestamp with time zone,
    declined_at    timestamp with time zone,
    answered_by_id integer,
    invited_by_id  integer,
    team_id        bigint NOT NULL,
    CONSTRAINT team_invitations_pkey PRIMARY KEY (id),
    CONSTRAINT team_invitations_one_answer CHECK (accepted_at IS NULL OR declined_at IS NULL),
    CONSTRAINT team_invitations_role_valid
        CHECK (role IN ('owner', 'member'))
);
CREATE INDEX team_invitations_answered_by_id_53e3f9f6 ON team_invitations
    USING btree (answered_by_id);
CREATE INDEX team_invitations_invited_by_id_198c0ac6 ON team_invitations
    USING btree (invited_by_id);
CREATE UNIQUE INDEX team_invitations_one_pending ON team_invitations
    USING btree (upper(username::text), team_id)
    WHERE accepted_at IS NULL AND declined_at IS NULL;
CREATE INDEX team_invitations_team_id_1af3a772 ON team_invitations USING btree (team_id);

-- endpoints
CREATE TABLE endpoints (
    id                  bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    agent_id            character varying(64) NOT NULL,
    name                character varying(200) NOT NULL,
    token_hash          character varying(64) NOT NULL,
    verbs               character varying(32)[] NOT NULL,
    notify_url          character varying(500) NOT NULL,
    created_at          timestamp with time zone NOT NULL,
    rotated_at          timestamp with time zone,
    revoked_at          timestamp with time zone,
    team_id             bigint NOT NULL,
    admission_claims    integer NOT NULL,
    admission_window_at timestamp with time zone,
    notify_secret       character varying(128) NOT NULL,
    paused_at           timestamp with time zone,
    paused_by_id        integer,
    max_claimed         integer,
    max_claimed_per_key integer,
    waited_at           timestamp with time zone,
    CONSTRAINT endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT endpoints_agent_id_unique UNIQUE (team_id, agent_id),
    CONSTRAINT endpoints_token_hash_key UNIQUE (token_hash),
    CONSTRAINT endpoints_verbs_known CHECK (verbs <@ ARRAY['create_todo'::character varying(32),
        'list_todos'::character varying(32), 'get_todo'::character varying(32),
        'claim'::character varying(32), 'claim_next'::character varying(32),
        'heartbeat'::character varying(32), 'complete'::character varying(32),
        'fail'::character varying(32), 'release'::character varying(32),
        'cancel'::character varying(32), 'answer'::character varying(32)])
);
CREATE INDEX endpoints_agent_id_32876a85 ON endpoints USING btree (agent_id);
CREATE INDEX endpoints_agent_id_32876a85_like ON endpoints
    USING btree (agent_id varchar_pattern_ops);
CREATE INDEX endpoints_team_id_695c16fe ON endpoints USING btree (team_id);
CREATE INDEX endpoints_token_hash_1a868db9_like ON endpoints
    USING btree (token_hash varchar_pattern_ops);

-- todos
CREATE TABLE todos (
    id                 bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    title              character varying(500) NOT NULL,
    body               text NOT NULL,
    priority           smallint NOT NULL,
    idempotency_key    character varying(200),
    state              character varying(16) NOT NULL,
    max_attempts       smallint NOT NULL,
    attempt            integer NOT NULL,
    failures           integer NOT NULL,
    round              integer NOT NULL,
    last_attempt_seq   integer NOT NULL,
    attempts_pruned    integer NOT NULL,
    not_before         timestamp with time zone,
    next_retry_at      timestamp with time zone,
    owner              character varying(200) NOT NULL,
    claimed_at         timestamp with time zone,
    last_heartbeat_at  timestamp with time zone,
    lease_expires_at   timestamp with time zone,
    result             jsonb,
    dead_letter_reason character varying(16) NOT NULL,
    created_at         timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    updated_at         timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    ended_at           timestamp with time zone,
    created_by_id      integer,
    endpoint_id        bigint NOT NULL,
    requester_id       bigint,
    waiting_for        character varying(16) DEFAULT ''::character varying NOT NULL,
    after_left         integer DEFAULT 0 NOT NULL,
    after_policy       character varying(16) DEFAULT 'all_done'::character varying NOT NULL,
    after_total        integer DEFAULT 0 NOT NULL,
    children_open      integer DEFAULT 0 NOT NULL,
    children_total     integer DEFAULT 0 NOT NULL,
    has_dependents     boolean DEFAULT false NOT NULL,
    key                character varying(200) DEFAULT ''::character varying NOT NULL,
    parent_id          bigint,
    scheduled_for      timestamp with time zone,
    schedule_id        bigint,
    push_configs       integer DEFAULT 0 NOT NULL,
    CONSTRAINT todos_pkey PRIMARY KEY (id),
    CONSTRAINT todos_valid CHECK (todos_valid(state, priority, max_attempts, attempt, failures,
        round, attempts_pruned, lease_expires_at, next_retry_at, ended_at, dead_letter_reason))
) WITH (autovacuum_analyze_scale_factor=0.02, autovacuum_analyze_threshold=200,
    autovacuum_vacuum_scale_factor=0, autovacuum_vacuum_threshold=2000);
CREATE INDEX todos_claimable ON todos USING btree (endpoint_id, priority DESC, (
    CASE
        WHEN state::text = 'claimed'::text THEN lease_expires_at
        WHEN state::text = 'retry_wait'::text THEN next_retry_at
        WHEN state::text = 'pending'::text THEN COALESCE(not_before, created_at)
        ELSE NULL::timestamp with time zone
    END), id)
    WHERE state IN ('pending', 'retry_wait', 'claimed');
CREATE INDEX todos_created_by ON todos USING btree (created_by_id) WHERE created_by_id IS NOT NULL;
CREATE INDEX todos_endpoint_list ON todos USING btree (endpoint_id, id DESC);
CREATE INDEX todos_endpoint_state ON todos USING btree (endpoint_id, state, id DESC);
CREATE UNIQUE INDEX todos_idempotency_key_unique ON todos USING btree (endpoint_id, requester_id,
    idempotency_key) NULLS NOT DISTINCT
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX todos_key ON todos USING btree (endpoint_id, key) WHERE NOT key::text = ''::text;
CREATE INDEX todos_key_claimed ON todos USING btree (endpoint_id, key)
    WHERE state::text = 'claimed'::text AND NOT key::text = ''::text;
CREATE INDEX todos_parent ON todos USING btree (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX todos_requester ON todos USING btree (requester_id) WHERE requester_id IS NOT NULL;
CREATE UNIQUE INDEX todos_schedule_slot ON todos USING btree (schedule_id, scheduled_for)
    WHERE schedule_id IS NOT NULL;
CREATE INDEX todos_sweep_due ON todos USING btree (state, (
    CASE
        WHEN state::text = 'claimed'::text THEN lease_expires_at
        WHEN state::text = 'retry_wait'::text THEN next_retry_at
        WHEN state::text = 'pending'::text THEN COALESCE(not_before, created_at)
        ELSE NULL::timestamp with time zone
    END))
    WHERE state IN ('claimed', 'retry_wait');
CREATE INDEX todos_terminal ON todos USING btree (endpoint_id, ended_at)
    WHERE state IN ('done', 'dead', 'canceled');
CREATE INDEX todos_terminal_age ON todos USING btree (ended_at)
    WHERE state IN ('done', 'dead', 'canceled');

-- todo_attempts
CREATE TABLE todo_attempts (
    id                       bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    seq                      integer NOT NULL,
    round                    integer NOT NULL,
    attempt                  integer NOT NULL,
    claimer_kind             character varying(16) NOT NULL,
    mcp_session_id           character varying(200) DEFAULT ''::character varying NOT NULL,
    owner                    character varying(200) NOT NULL,
    claimant                 character varying(200) DEFAULT ''::character varying NOT NULL,
    claimant_truncated       boolean DEFAULT false NOT NULL,
    claimant_bytes           integer DEFAULT 0 NOT NULL,
    claimed_at               timestamp with time zone NOT NULL,
    last_heartbeat_at        timestamp with time zone,
    lease_expires_at         timestamp with time zone NOT NULL,
    ended_at                 timestamp with time zone,
    outcome                  character varying(16) DEFAULT ''::character varying NOT NULL,
    disposition              character varying(16) DEFAULT ''::character varying NOT NULL,
    summary                  text,
    summary_truncated        boolean DEFAULT false NOT NULL,
    summary_bytes            integer DEFAULT 0 NOT NULL,
    artifact                 character varying(600),
    artifact_truncated       boolean DEFAULT false NOT NULL,
    artifact_bytes           integer DEFAULT 0 NOT NULL,
    result                   jsonb,
    lease_token_hash         character varying(64),
    ended_by_id              integer,
    endpoint_id              bigint,
    todo_id                  bigint NOT NULL,
    user_id                  integer,
    ended_by_endpoint_id     bigint,
    mcp_session_id_bytes     integer DEFAULT 0 NOT NULL,
    mcp_session_id_truncated boolean DEFAULT false NOT NULL,
    summary_document         tsvector,
    not_before               timestamp with time zone,
    result_document          tsvector,
    trace_id                 character varying(32) DEFAULT ''::character varying NOT NULL,
    CONSTRAINT todo_attempts_pkey PRIMARY KEY (id),
    CONSTRAINT todo_attempts_todo_seq UNIQUE (todo_id, seq),
    CONSTRAINT todo_attempts_valid CHECK (todo_attempts_valid(claimer_kind, endpoint_id, user_id,
        ended_at, outcome, disposition, summary, summary_document))
) WITH (autovacuum_analyze_scale_factor=0.02, autovacuum_analyze_threshold=200,
    autovacuum_vacuum_scale_factor=0, autovacuum_vacuum_threshold=2000);
CREATE INDEX todo_attempts_ended_by ON todo_attempts USING btree (ended_by_id)
    WHERE ended_by_id IS NOT NULL;
CREATE INDEX todo_attempts_ended_recent ON todo_attempts USING btree (ended_at DESC)
    WHERE ended_at IS NOT NULL;
CREATE INDEX todo_attempts_endpoint_ended ON todo_attempts USING btree (endpoint_id, ended_at)
    INCLUDE (outcome, claimed_at, last_heartbeat_at)
    WHERE ended_at IS NOT NULL;
CREATE UNIQUE INDEX todo_attempts_one_open ON todo_attempts USING btree (todo_id)
    WHERE ended_at IS NULL;
CREATE INDEX todo_attempts_owner_lapsed ON todo_attempts USING btree (ended_at DESC)
    WHERE claimer_kind::text = 'owner'::text AND ended_at IS NOT NULL AND ended_by_id IS NULL
        AND ended_by_endpoint_id IS NULL
        AND (outcome IN ('lease_expired', 'reaped', 'revoked'));
CREATE INDEX todo_attempts_result_search ON todo_attempts USING gin (result_document)
    WHERE result_document IS NOT NULL;
CREATE INDEX todo_attempts_search ON todo_attempts USING gin (summary_document)
    WHERE summary > ''::text;
CREATE INDEX todo_attempts_user ON todo_attempts USING btree (user_id) WHERE user_id IS NOT NULL;

-- todo_events
CREATE TABLE todo_events (
    id                bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    kind              character varying(32) NOT NULL,
    detail            jsonb NOT NULL,
    created_at        timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    actor_endpoint_id bigint,
    actor_user_id     integer,
    team_id           bigint NOT NULL,
    todo_id           bigint,
    CONSTRAINT todo_events_pkey PRIMARY KEY (id),
    CONSTRAINT todo_events_kind_known CHECK (kind IN ('create', 'claim', 'extend', 'release', 'complete', 'fail', 'cancel', 'retry_now', 'rerun', 'take_over', 'answer', 'unanswered', 'revoke_dead_letter', 'start_now', 'cancel_child', 'schedule_add', 'schedule_edit', 'schedule_pause', 'schedule_resume', 'schedule_remove', 'vend', 'rotate', 'endpoint_revoke', 'notify_url', 'notify_secret_rotate', 'pause', 'resume', 'limits', 'member_add', 'member_remove', 'member_invite', 'invite_accept', 'invite_decline', 'invite_revoke', 'sink_add', 'sink_activate', 'sink_deactivate', 'sink_remove'))
);
CREATE INDEX todo_events_actor_endpoint_id_8428459c ON todo_events USING btree (actor_endpoint_id);
CREATE INDEX todo_events_actor_user_id_2be2834c ON todo_events USING btree (actor_user_id);
CREATE INDEX todo_events_team_recent ON todo_events USING btree (team_id, created_at DESC);
CREATE INDEX todo_events_todo_id_7cd45425 ON todo_events USING btree (todo_id);

-- todo_search_documents
CREATE TABLE todo_search_documents (
    todo_id  bigint NOT NULL,
    document tsvector NOT NULL,
    CONSTRAINT todo_search_documents_pkey PRIMARY KEY (todo_id)
);
CREATE INDEX todo_search_documents_words ON todo_search_documents USING gin (document);

-- dead_letter_sinks
CREATE TABLE dead_letter_sinks (
    id            bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    url           character varying(500) NOT NULL,
    secret        character varying(128) NOT NULL,
    active        boolean NOT NULL,
    created_at    timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    created_by_id integer,
    team_id       bigint NOT NULL,
    CONSTRAINT dead_letter_sinks_pkey PRIMARY KEY (id)
);
CREATE INDEX dead_letter_sinks_created_by_id_38a247bb ON dead_letter_sinks
    USING btree (created_by_id);
CREATE INDEX dead_letter_sinks_team_id_902890f6 ON dead_letter_sinks USING btree (team_id);

-- outbox
CREATE TABLE outbox (
    id              bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    kind            character varying(16) NOT NULL,
    todo_id         bigint,
    url             character varying(500) NOT NULL,
    payload         jsonb NOT NULL,
    created_at      timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    next_attempt_at timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    attempts        integer DEFAULT 0 NOT NULL,
    last_status     integer,
    last_error      character varying(500) DEFAULT ''::character varying NOT NULL,
    delivered_at    timestamp with time zone,
    gave_up_at      timestamp with time zone,
    endpoint_id     bigint,
    sink_id         bigint,
    team_id         bigint NOT NULL,
    push_config_id  bigint,
    CONSTRAINT outbox_pkey PRIMARY KEY (id),
    CONSTRAINT outbox_waiting_one_target CHECK (NOT kind::text = 'todo.waiting'::text
        OR sink_id IS NULL OR endpoint_id IS NULL)
);
CREATE INDEX outbox_due ON outbox USING btree (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX outbox_endpoint_id_58f99c7c ON outbox USING btree (endpoint_id);
CREATE UNIQUE INDEX outbox_one_pending_doorbell ON outbox USING btree (endpoint_id)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL AND kind::text = 'doorbell'::text;
CREATE INDEX outbox_push_config_id_fae11099 ON outbox USING btree (push_config_id);
CREATE INDEX outbox_sink_id_ba3f2bc3 ON outbox USING btree (sink_id);
CREATE INDEX outbox_team_recent ON outbox USING btree (team_id, created_at DESC);

-- sweeper_status
CREATE TABLE sweeper_status (
    id                   smallint NOT NULL,
    last_started_at      timestamp with time zone,
    last_finished_at     timestamp with time zone,
    passes               bigint NOT NULL,
    last_report          jsonb NOT NULL,
    last_error           character varying(500) NOT NULL,
    metrics_folded_until timestamp with time zone,
    CONSTRAINT sweeper_status_pkey PRIMARY KEY (id),
    CONSTRAINT sweeper_status_one_row CHECK (id = 1)
);

-- metric_counters
CREATE TABLE metric_counters (
    id    bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    name  character varying(100) NOT NULL,
    label character varying(100) NOT NULL,
    value double precision NOT NULL,
    CONSTRAINT metric_counters_pkey PRIMARY KEY (id),
    CONSTRAINT metric_counters_name_label UNIQUE (name, label)
);

-- metric_deltas
CREATE TABLE metric_deltas (
    id       bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    name     character varying(100) NOT NULL,
    label    character varying(100) NOT NULL,
    value    double precision NOT NULL,
    ended_at timestamp with time zone NOT NULL,
    CONSTRAINT metric_deltas_pkey PRIMARY KEY (id)
);

-- sign_in_throttles
CREATE TABLE sign_in_throttles (
    key               character varying(200) NOT NULL,
    window_started_at timestamp with time zone NOT NULL,
    failures          integer NOT NULL,
    CONSTRAINT sign_in_throttles_pkey PRIMARY KEY (key)
);
CREATE INDEX sign_in_throttles_key_06b798fa_like ON sign_in_throttles
    USING btree (key varchar_pattern_ops);
CREATE INDEX sign_in_throttles_window ON sign_in_throttles USING btree (window_started_at);

-- board_watches
CREATE UNLOGGED TABLE board_watches (
    team_id    bigint NOT NULL,
    holder     text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT board_watches_pkey PRIMARY KEY (team_id, holder)
);

-- board_streams
CREATE UNLOGGED TABLE board_streams (
    id              bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    holder          text NOT NULL,
    user_id         bigint NOT NULL,
    session_key     character varying(40) NOT NULL,
    password_digest bytea NOT NULL,
    team_ids        bigint[] NOT NULL,
    opened_at       timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    expires_at      timestamp with time zone NOT NULL,
    CONSTRAINT board_streams_pkey PRIMARY KEY (id)
);
CREATE INDEX board_streams_expires ON board_streams USING btree (expires_at);
CREATE INDEX board_streams_session ON board_streams USING btree (session_key);
CREATE INDEX board_streams_user ON board_streams USING btree (user_id);

-- todo_questions
CREATE TABLE todo_questions (
    id                      bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    attempt_seq             integer NOT NULL,
    asked_at                timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    text                    text NOT NULL,
    text_truncated          boolean NOT NULL,
    text_bytes              integer NOT NULL,
    choices                 jsonb,
    answer_schema           jsonb,
    answer_within_seconds   integer,
    expires_at              timestamp with time zone,
    on_no_answer            character varying(16) NOT NULL,
    ended_at                timestamp with time zone,
    ending                  character varying(16) NOT NULL,
    answer                  jsonb,
    answered_by_endpoint_id bigint,
    answered_by_user_id     integer,
    todo_id                 bigint NOT NULL,
    CONSTRAINT todo_questions_pkey PRIMARY KEY (id),
    CONSTRAINT todo_questions_seq UNIQUE (todo_id, attempt_seq),
    CONSTRAINT todo_questions_choices_or_schema CHECK (choices IS NULL OR answer_schema IS NULL),
    CONSTRAINT todo_questions_ending_valid CHECK (ended_at IS NULL AND ending::text = ''::text
        OR ended_at IS NOT NULL AND (ending IN ('answered', 'unanswered', 'withdrawn')))
);
CREATE INDEX todo_questions_ended ON todo_questions USING btree (ended_at)
    WHERE ended_at IS NOT NULL;
CREATE INDEX todo_questions_expiring ON todo_questions USING btree (expires_at)
    WHERE ended_at IS NULL AND expires_at IS NOT NULL;
CREATE UNIQUE INDEX todo_questions_open ON todo_questions USING btree (todo_id)
    WHERE ended_at IS NULL;

-- schedules
CREATE TABLE schedules (
    id               bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    name             character varying(100) NOT NULL,
    cron             character varying(100) NOT NULL,
    timezone         character varying(64) NOT NULL,
    interval_seconds integer,
    title_template   character varying(500) NOT NULL,
    body_template    text NOT NULL,
    priority         smallint NOT NULL,
    max_attempts     smallint,
    catch_up         character varying(8) NOT NULL,
    paused_at        timestamp with time zone,
    next_run_at      timestamp with time zone,
    last_run_at      timestamp with time zone,
    created_at       timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    updated_at       timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    created_by_id    integer,
    endpoint_id      bigint NOT NULL,
    last_todo_id     bigint,
    CONSTRAINT schedules_pkey PRIMARY KEY (id),
    CONSTRAINT schedules_name_unique UNIQUE (endpoint_id, name),
    CONSTRAINT schedules_cron_or_interval CHECK (cron::text = ''::text AND interval_seconds >= 60
        OR NOT cron::text = ''::text AND interval_seconds IS NULL)
);
CREATE INDEX schedules_due ON schedules USING btree (next_run_at) WHERE paused_at IS NULL;

-- todo_after
CREATE TABLE todo_after (
    todo_id  bigint NOT NULL,
    after_id bigint NOT NULL,
    ended    character varying(16) DEFAULT ''::character varying NOT NULL,
    CONSTRAINT todo_after_pkey PRIMARY KEY (todo_id, after_id)
);
CREATE INDEX todo_after_after_id_2988a857 ON todo_after USING btree (after_id);
CREATE INDEX todo_after_unmarked ON todo_after USING btree (after_id) WHERE ended::text = ''::text;

-- task_push_configs
CREATE TABLE task_push_configs (
    id               bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    config_id        character varying(64) NOT NULL,
    task_id          character varying(64) NOT NULL,
    url              character varying(500) NOT NULL,
    token            character varying(500) NOT NULL,
    auth_scheme      character varying(32) NOT NULL,
    auth_credentials character varying(1000) NOT NULL,
    secret           character varying(128) NOT NULL,
    created_at       timestamp with time zone DEFAULT statement_timestamp() NOT NULL,
    endpoint_id      bigint NOT NULL,
    team_id          bigint NOT NULL,
    todo_id          bigint NOT NULL,
    CONSTRAINT task_push_configs_pkey PRIMARY KEY (id),
    CONSTRAINT task_push_config_id UNIQUE (todo_id, config_id)
);
CREATE INDEX task_push_configs_endpoint_id_1ecc7598 ON task_push_configs USING btree (endpoint_id);
CREATE INDEX task_push_configs_todo_id_13e903b1 ON task_push_configs USING btree (todo_id);

ALTER TABLE team_members ADD CONSTRAINT team_members_team_id_eb8b893a_fk_teams_id FOREIGN KEY (team_id) REFERENCES teams(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE team_members ADD CONSTRAINT team_members_user_id_cfdfac1d_fk_auth_user_id FOREIGN KEY (user_id) REFERENCES auth_user(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE team_invitations ADD CONSTRAINT team_invitations_answered_by_id_53e3f9f6_fk_auth_user_id FOREIGN KEY (answered_by_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE team_invitations ADD CONSTRAINT team_invitations_invited_by_id_198c0ac6_fk_auth_user_id FOREIGN KEY (invited_by_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE team_invitations ADD CONSTRAINT team_invitations_team_id_1af3a772_fk_teams_id FOREIGN KEY (team_id) REFERENCES teams(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_paused_by_id_68e4a8c8_fk_auth_user_id FOREIGN KEY (paused_by_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE endpoints ADD CONSTRAINT endpoints_team_id_695c16fe_fk_teams_id FOREIGN KEY (team_id) REFERENCES teams(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todos ADD CONSTRAINT todos_created_by_id_35c8b432_fk_auth_user_id FOREIGN KEY (created_by_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todos ADD CONSTRAINT todos_endpoint_id_b3d07049_fk_endpoints_id FOREIGN KEY (endpoint_id) REFERENCES endpoints(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todos ADD CONSTRAINT todos_parent_id_c0fe3401_fk_todos_id FOREIGN KEY (parent_id) REFERENCES todos(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todos ADD CONSTRAINT todos_requester_id_20f73b9d_fk_endpoints_id FOREIGN KEY (requester_id) REFERENCES endpoints(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todos ADD CONSTRAINT todos_schedule_id_fd2fa2ac_fk_schedules_id FOREIGN KEY (schedule_id) REFERENCES schedules(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_attempts ADD CONSTRAINT todo_attempts_ended_by_endpoint_id_d92a4b1a_fk_endpoints_id FOREIGN KEY (ended_by_endpoint_id) REFERENCES endpoints(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_attempts ADD CONSTRAINT todo_attempts_ended_by_id_48180c9f_fk_auth_user_id FOREIGN KEY (ended_by_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_attempts ADD CONSTRAINT todo_attempts_todo_id_5a7612a2_fk_todos_id FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_attempts ADD CONSTRAINT todo_attempts_user_id_a74d55c7_fk_auth_user_id FOREIGN KEY (user_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_events ADD CONSTRAINT todo_events_actor_endpoint_id_8428459c_fk_endpoints_id FOREIGN KEY (actor_endpoint_id) REFERENCES endpoints(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_events ADD CONSTRAINT todo_events_actor_user_id_2be2834c_fk_auth_user_id FOREIGN KEY (actor_user_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_events ADD CONSTRAINT todo_events_team_id_2f02f7c3_fk_teams_id FOREIGN KEY (team_id) REFERENCES teams(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_events ADD CONSTRAINT todo_events_todo_id_7cd45425_fk_todos_id FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_search_documents ADD CONSTRAINT todo_search_documents_todo_id_d9b4d0ad_fk_todos_id FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE dead_letter_sinks ADD CONSTRAINT dead_letter_sinks_created_by_id_38a247bb_fk_auth_user_id FOREIGN KEY (created_by_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE dead_letter_sinks ADD CONSTRAINT dead_letter_sinks_team_id_902890f6_fk_teams_id FOREIGN KEY (team_id) REFERENCES teams(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE outbox ADD CONSTRAINT outbox_endpoint_id_58f99c7c_fk_endpoints_id FOREIGN KEY (endpoint_id) REFERENCES endpoints(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE outbox ADD CONSTRAINT outbox_push_config_id_fae11099_fk_task_push_configs_id FOREIGN KEY (push_config_id) REFERENCES task_push_configs(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE outbox ADD CONSTRAINT outbox_sink_id_ba3f2bc3_fk_dead_letter_sinks_id FOREIGN KEY (sink_id) REFERENCES dead_letter_sinks(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE outbox ADD CONSTRAINT outbox_team_id_62268c32_fk_teams_id FOREIGN KEY (team_id) REFERENCES teams(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_questions ADD CONSTRAINT todo_questions_answered_by_endpoint_id_9867e0a3_fk_endpoints_id FOREIGN KEY (answered_by_endpoint_id) REFERENCES endpoints(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_questions ADD CONSTRAINT todo_questions_answered_by_user_id_c5a09fd7_fk_auth_user_id FOREIGN KEY (answered_by_user_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_questions ADD CONSTRAINT todo_questions_todo_id_e9512653_fk_todos_id FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE schedules ADD CONSTRAINT schedules_created_by_id_9e61b892_fk_auth_user_id FOREIGN KEY (created_by_id) REFERENCES auth_user(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE schedules ADD CONSTRAINT schedules_endpoint_id_4d4f57b9_fk_endpoints_id FOREIGN KEY (endpoint_id) REFERENCES endpoints(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE schedules ADD CONSTRAINT schedules_last_todo_id_61788b1f_fk_todos_id FOREIGN KEY (last_todo_id) REFERENCES todos(id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_after ADD CONSTRAINT todo_after_after_id_2988a857_fk_todos_id FOREIGN KEY (after_id) REFERENCES todos(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE todo_after ADD CONSTRAINT todo_after_todo_id_f3895e4d_fk_todos_id FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE task_push_configs ADD CONSTRAINT task_push_configs_endpoint_id_1ecc7598_fk_endpoints_id FOREIGN KEY (endpoint_id) REFERENCES endpoints(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE task_push_configs ADD CONSTRAINT task_push_configs_team_id_e3aa7819_fk_teams_id FOREIGN KEY (team_id) REFERENCES teams(id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE task_push_configs ADD CONSTRAINT task_push_configs_todo_id_13e903b1_fk_todos_id FOREIGN KEY (todo_id) REFERENCES todos(id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;

CREATE OR REPLACE TRIGGER todos_outbox_dead_letter AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN (new.state::text = 'dead'::text
        AND old.state::text IS DISTINCT FROM 'dead'::text)
    EXECUTE FUNCTION switchboard_outbox_dead_letter();

CREATE OR REPLACE TRIGGER todos_outbox_doorbell_created AFTER INSERT ON todos
    FOR EACH ROW WHEN (new.state::text = 'pending'::text)
    EXECUTE FUNCTION switchboard_outbox_doorbell();

CREATE OR REPLACE TRIGGER todos_outbox_doorbell_pending AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN (new.state::text = 'pending'::text
        AND old.state::text IS DISTINCT FROM 'pending'::text)
    EXECUTE FUNCTION switchboard_outbox_doorbell();

CREATE OR REPLACE TRIGGER todo_search_document_on_insert AFTER INSERT ON todos
    FOR EACH ROW
    EXECUTE FUNCTION todo_search_document_on_insert();

CREATE OR REPLACE TRIGGER todo_attempt_result_words BEFORE INSERT OR UPDATE OF result,
    result_document ON todo_attempts
    FOR EACH ROW WHEN (new.result IS NOT NULL OR new.result_document IS NOT NULL)
    EXECUTE FUNCTION todo_attempt_result_words();

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

CREATE OR REPLACE TRIGGER todos_board_changed AFTER UPDATE ON todos
    REFERENCING OLD TABLE AS board_old NEW TABLE AS board_new FOR EACH STATEMENT
    EXECUTE FUNCTION switchboard_board_todos();

CREATE OR REPLACE TRIGGER todos_board_new AFTER INSERT ON todos
    REFERENCING NEW TABLE AS board_new FOR EACH STATEMENT
    EXECUTE FUNCTION switchboard_board_todos();

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

CREATE OR REPLACE TRIGGER todos_wait_ended BEFORE UPDATE OF state ON todos
    FOR EACH ROW WHEN (old.state::text = 'waiting'::text AND new.state::text <> 'waiting'::text)
    EXECUTE FUNCTION switchboard_wait_ended();

CREATE OR REPLACE TRIGGER todos_outbox_task_push AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN (new.push_configs > 0 AND old.state::text IS DISTINCT FROM new.state::text)
    EXECUTE FUNCTION switchboard_outbox_task_push();

CREATE OR REPLACE TRIGGER todo_questions_outbox_waiting AFTER INSERT ON todo_questions
    FOR EACH ROW
    EXECUTE FUNCTION switchboard_outbox_todo_waiting();

CREATE OR REPLACE TRIGGER todos_waits_follow AFTER UPDATE OF state ON todos
    FOR EACH ROW WHEN ((new.has_dependents OR new.parent_id IS NOT NULL
        OR new.key::text <> ''::text) AND old.state::text <> new.state::text)
    EXECUTE FUNCTION switchboard_waits_follow();

RESET check_function_bodies;
