-- The Board bench's seed (bench/board_pages.py): one big team's todos and attempts written
-- by SQL, and the texts they draw from. Each part begins with a `-- name: <part>` line
-- (procrastinate's named queries); the texts are one line each.

-- name: plan
-- One row per todo id: which team and endpoint, its final state, how many attempts in how many
-- rounds. Team B (the other team) holds every 11th id, so its rows sit between the measured
-- team's in every index. The newest 5% of ids hold the live states. Attempts per todo follow
-- 1 + floor(u^3 * 38): a third of todos took one try, a long tail took up to 38.
CREATE TEMP TABLE board_plan AS
WITH draws AS (
    SELECT g AS id, g %% {every} = 0 AS team_b, g::float8 / %(ids)s AS age,
           random() AS u_state, random() AS u_total, random() AS u_round,
           random() AS u_ep, random() AS u_cap, random() AS u_misc
      FROM generate_series(1, %(ids)s) g
),
states AS (
    SELECT d.*,
           CASE WHEN d.age <= 0.95 THEN
                CASE WHEN d.u_state < 0.93 THEN 'done' WHEN d.u_state < 0.98 THEN 'dead'
                     ELSE 'canceled' END
           ELSE CASE WHEN d.u_state < 0.30 THEN 'pending' WHEN d.u_state < 0.50 THEN 'claimed'
                     WHEN d.u_state < 0.65 THEN 'retry_wait' WHEN d.u_state < 0.90 THEN 'done'
                     WHEN d.u_state < 0.97 THEN 'dead' ELSE 'canceled' END
           END AS state
      FROM draws d
),
totals AS (
    SELECT s.*,
           CASE WHEN s.state = 'pending' AND s.u_misc < 0.5 THEN 0  -- never claimed yet
                WHEN s.team_b THEN 1 + floor(s.u_total ^ 3 * 18)::int
                ELSE 1 + floor(s.u_total ^ 3 * 38)::int END AS total
      FROM states s
)
SELECT t.id, t.team_b, t.age, t.state, t.total, t.u_misc,
       CASE WHEN t.total >= 3 AND t.u_round < 0.02 THEN 3
            WHEN t.total >= 2 AND t.u_round < 0.08 THEN 2 ELSE 1 END AS rounds,
       t.state = 'dead' AND t.u_cap < 0.4 AND t.total >= 1 AS at_cap,
       NULL::text[] AS forced_ends,
       CASE WHEN t.team_b THEN 5
            WHEN t.u_ep < 0.4 THEN 1 WHEN t.u_ep < 0.7 THEN 2 WHEN t.u_ep < 0.9 THEN 3
            ELSE 4 END AS ep_slot
  FROM totals t

-- name: plan_finish
-- The counters that depend on the draws above, once the attempt total is final.
UPDATE board_plan p
   SET rounds = CASE WHEN p.at_cap THEN 1 ELSE p.rounds END,
       max_attempts = CASE
           WHEN p.at_cap THEN p.total  -- its last round spent the whole budget
           -- room for every try of the longest round: the cap is never hit by accident
           ELSE greatest(5, ((ceil(p.total::numeric / p.rounds)::int + 1 + 4) / 5) * 5) END,
       endpoint_id = (%(endpoints)s::bigint[])[p.ep_slot],
       agent_id = (%(agents)s::text[])[p.ep_slot],
       human_id = CASE WHEN p.team_b THEN %(other_owner)s ELSE %(member)s END,
       created_at = (CASE WHEN p.state = 'claimed' THEN now() - p.u_misc * interval '10 min'
                          ELSE now() - (1 - p.age) * interval '30 days' - interval '10 min' END)
                    - greatest(p.total - 1, 0) * interval '400 s' - interval '5 s'

-- name: attempts
-- One row per attempt, every column final. r = round of seq, j = its try in the round, k = tries
-- in the round (rounds split the todo's attempts evenly). Outcomes: a try that is not the last
-- of its round was followed by another: failed (retry scheduled), reaped or released
-- (requeued), or lease_expired (requeued by the claim that took it over). The last try of an
-- earlier round ended it (dead, done or canceled: a rerun followed); the last try of the last
-- round gives the todo its state.
CREATE TEMP TABLE board_att AS
WITH a AS (
    SELECT p.id AS todo_id, p.state, p.rounds, p.at_cap, p.forced_ends, p.endpoint_id,
           p.agent_id, p.human_id, p.created_at AS t0, s AS seq, x.r,
           s - x.lo AS j, x.hi - x.lo AS k,
           random() AS u1, random() AS u2, random() AS u3, random() AS u4, random() AS u5
      FROM board_plan p
     CROSS JOIN LATERAL generate_series(1, p.total) s
     CROSS JOIN LATERAL (SELECT ceil(s * p.rounds / p.total::numeric)::int AS r) r0
     CROSS JOIN LATERAL (SELECT r0.r, (p.total * (r0.r - 1)) / p.rounds AS lo,
                                (p.total * r0.r) / p.rounds AS hi) x
),
b AS (
    SELECT a.*, a.r = a.rounds AS last_round,
           a.forced_ends IS NOT NULL AND a.seq IN (20, 21) OR a.u3 < 0.02 AS by_owner,
           CASE
             WHEN a.j < a.k THEN
                  CASE WHEN a.at_cap THEN  -- every try of a round that hit the cap counted
                            CASE WHEN a.u1 < 0.6 THEN 'failed' WHEN a.u1 < 0.85 THEN 'reaped'
                                 ELSE 'lease_expired' END
                       WHEN a.u1 < 0.45 THEN 'failed' WHEN a.u1 < 0.65 THEN 'reaped'
                       WHEN a.u1 < 0.75 THEN 'lease_expired' ELSE 'released' END
             WHEN a.r < a.rounds THEN coalesce(a.forced_ends[a.r],
                  CASE WHEN a.u1 < 0.6 THEN 'failed' WHEN a.u1 < 0.9 THEN 'completed'
                       ELSE 'canceled' END)
             WHEN a.forced_ends IS NOT NULL THEN a.forced_ends[a.r]
             ELSE CASE a.state
                    WHEN 'done' THEN 'completed'
                    WHEN 'dead' THEN CASE WHEN NOT a.at_cap OR a.u1 < 0.5 THEN 'failed'
                                          WHEN a.u1 < 0.8 THEN 'reaped'
                                          ELSE 'lease_expired' END
                    WHEN 'canceled' THEN 'canceled'
                    WHEN 'retry_wait' THEN 'failed'
                    WHEN 'pending' THEN CASE WHEN a.u1 < 0.6 THEN 'released' ELSE 'reaped' END
                    ELSE '' END  -- claimed: the open attempt
           END AS outcome,
           a.t0 + (a.seq - 1) * interval '400 s' + interval '5 s' AS claimed_at,
           (20 + a.u2 * 80) * interval '1 s' AS took
      FROM a
),
c AS (
    SELECT b.*,
           CASE WHEN b.outcome = '' THEN NULL
                WHEN b.outcome IN ('reaped', 'lease_expired') AND b.u3 < 0.7
                     THEN b.claimed_at + b.took * 0.5
                WHEN b.outcome NOT IN ('reaped', 'lease_expired') AND b.took > interval '35 s'
                     THEN b.claimed_at + b.took * 0.7 END AS heartbeat_at,
           CASE b.outcome WHEN '' THEN ''
                WHEN 'completed' THEN 'done' WHEN 'canceled' THEN 'canceled'
                ELSE CASE WHEN b.j = b.k AND (NOT b.last_round OR b.state = 'dead')
                               THEN 'dead_lettered'
                          WHEN b.outcome = 'failed' THEN 'retry_scheduled'
                          ELSE 'requeued' END END AS disposition,
           CASE WHEN b.outcome = 'completed' THEN
                     (%(completed)s::text[])[1 + (b.todo_id * 31 + b.seq) %% %(n_completed)s]
                WHEN b.outcome = 'failed' AND b.u5 > 0.97 THEN repeat(%(log_line)s, 30)
                WHEN b.outcome = 'failed' THEN
                     (%(failed)s::text[])[1 + (b.todo_id * 31 + b.seq) %% %(n_failed)s]
                WHEN b.outcome = 'released' AND b.u4 < 0.1
                     THEN 'Released from the Board: the worker looked stuck.'
                WHEN b.outcome = 'released' THEN
                     (%(released)s::text[])[1 + (b.todo_id * 31 + b.seq) %% %(n_released)s]
                WHEN b.outcome = 'canceled' AND b.u4 < 0.5
                     THEN 'Canceled from the Board: superseded by a newer todo.' END AS said
      FROM b
)
SELECT c.todo_id, c.seq, c.r AS round, c.j AS attempt, c.last_round,
       CASE WHEN c.by_owner THEN 'owner' ELSE 'endpoint' END AS claimer_kind,
       CASE WHEN c.by_owner THEN NULL ELSE c.endpoint_id END AS endpoint_id,
       CASE WHEN c.by_owner THEN c.human_id END AS user_id,
       CASE WHEN NOT c.by_owner AND c.u5 < 0.15
            THEN 'mcp-' || left(md5(c.todo_id || ':' || c.seq), 24) ELSE '' END AS mcp_session_id,
       CASE WHEN c.by_owner THEN 'user:' || c.human_id ELSE 'agent:' || c.agent_id END AS owner,
       CASE WHEN c.by_owner THEN ''
            ELSE 'buildbox-' || 1 + (c.todo_id + c.seq) %% 6 || '/' || c.agent_id || '/run-'
                 || (c.todo_id * 7 + c.seq) %% 10000 END AS claimant,
       c.claimed_at, c.heartbeat_at,
       CASE WHEN c.outcome = '' THEN c.claimed_at + interval '30 min'
            ELSE coalesce(c.heartbeat_at, c.claimed_at) + interval '300 s' END AS lease_expires_at,
       CASE c.outcome WHEN '' THEN NULL
            WHEN 'reaped' THEN coalesce(c.heartbeat_at, c.claimed_at) + interval '300 s'
                               + (1 + c.u3 * 5) * interval '1 s'
            WHEN 'lease_expired' THEN c.claimed_at + interval '400 s'  -- the taker's claim
            ELSE c.claimed_at + c.took END AS ended_at,
       c.outcome, c.disposition,
       CASE WHEN c.outcome = 'canceled' OR (c.outcome = 'released' AND c.u4 < 0.1)
            THEN c.human_id END AS ended_by_id,
       left(c.said, 2048) AS summary,
       coalesce(octet_length(c.said) > 2048, false) AS summary_truncated,
       coalesce(octet_length(c.said), 0) AS summary_bytes,
       CASE WHEN c.outcome = 'completed' AND c.u4 < 0.5
                 THEN 'https://ci.example.com/runs/' || c.todo_id || '-' || c.seq
            WHEN c.outcome = 'failed' AND c.u4 < 0.4
                 THEN 'mcp://artifacts/logs/' || c.todo_id || '/' || c.seq || '.txt' END
           AS artifact,
       CASE WHEN c.outcome = 'completed' THEN
                 jsonb_build_object('ok', true, 'pages', c.todo_id %% 300, 'warnings', c.seq %% 4)
            WHEN c.outcome = 'failed' THEN
                 jsonb_build_object('ok', false, 'error', 'exit status 1',
                                    'stage', (ARRAY['install', 'test', 'push'])[1 + c.seq %% 3])
            END AS result,
       CASE WHEN NOT c.by_owner AND c.u5 BETWEEN 0.15 AND 0.5
            THEN md5('lease:' || c.todo_id || ':' || c.seq) || md5('fence:' || c.seq)
            END AS lease_token_hash
  FROM c

-- name: aggregate
-- Per todo: the counters of its last round and what its newest attempt left behind.
CREATE TEMP TABLE board_agg AS
SELECT todo_id,
       count(*) FILTER (WHERE last_round) AS attempt,
       count(*) FILTER (WHERE last_round AND outcome IN ('failed', 'reaped', 'lease_expired'))
           AS failures,
       -- complete and fail set the todo's result; a rerun cleared it
       (array_agg(result ORDER BY seq DESC)
            FILTER (WHERE last_round AND outcome IN ('completed', 'failed')))[1] AS result,
       (array_agg(outcome ORDER BY seq DESC))[1] AS last_outcome,
       (array_agg(owner ORDER BY seq DESC))[1] AS last_owner,
       (array_agg(lease_expires_at ORDER BY seq DESC))[1] AS last_lease,
       max(claimed_at) AS last_claimed_at,
       max(ended_at) AS last_ended_at,
       max(coalesce(ended_at, claimed_at)) AS last_at
  FROM board_att
 GROUP BY todo_id

-- name: todos
INSERT INTO todos (id, endpoint_id, requester_id, created_by_id, title, body, priority,
                   idempotency_key, state, max_attempts, attempt, failures, round,
                   last_attempt_seq, attempts_pruned, not_before, next_retry_at, owner,
                   claimed_at, last_heartbeat_at, lease_expires_at, result, dead_letter_reason,
                   created_at, updated_at, ended_at)
SELECT p.id, p.endpoint_id,
       CASE WHEN NOT p.team_b AND p.ep_slot <> 3 AND p.u_misc > 0.95
            THEN (%(endpoints)s::bigint[])[3] END,
       CASE WHEN NOT p.team_b AND p.u_misc < 0.05 THEN %(member)s END,
       CASE WHEN p.team_b THEN '[globex] ' ELSE '' END
           || replace((%(titles)s::text[])[1 + p.id %% %(n_titles)s], '{}',
                      (%(subjects)s::text[])[1 + (p.id / 7) %% %(n_subjects)s]),
       CASE WHEN p.id %% 5 = 0 THEN ''
            ELSE 'Requested in the weekly sync. Keep the change small; link the run in the'
                 || ' summary. Ticket ' || (1000 + p.id %% 9000) || '.' END,
       CASE WHEN (p.id * 7919) %% 100 < 85 THEN 0 WHEN (p.id * 7919) %% 100 < 93 THEN 10
            WHEN (p.id * 7919) %% 100 < 97 THEN -10 ELSE 50 END,
       NULL, p.state, p.max_attempts, coalesce(g.attempt, 0), coalesce(g.failures, 0), p.rounds,
       p.total, 0,
       CASE WHEN p.state = 'pending' AND p.total = 0 AND p.u_misc < 0.1
            THEN now() + interval '1 hour' END,
       CASE WHEN p.state = 'retry_wait'
            THEN greatest(g.last_ended_at + interval '10 s',
                          now() + (p.u_misc - 0.3) * interval '1 hour') END,
       CASE WHEN p.state = 'claimed' THEN g.last_owner ELSE '' END,
       CASE WHEN p.state = 'claimed' THEN g.last_claimed_at END,
       CASE WHEN p.state = 'claimed' AND g.last_claimed_at + interval '30 s' < now()
            THEN g.last_claimed_at + interval '30 s' END,
       CASE WHEN p.state = 'claimed' THEN g.last_lease END,
       g.result,
       CASE WHEN p.state = 'dead' THEN g.last_outcome ELSE '' END,
       p.created_at,
       coalesce(g.last_at, p.created_at),
       CASE WHEN p.state IN ('done', 'dead', 'canceled') THEN g.last_ended_at END
  FROM board_plan p
  LEFT JOIN board_agg g ON g.todo_id = p.id
 ORDER BY p.id

-- name: attempt_rows
INSERT INTO todo_attempts (
    todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id, mcp_session_id,
    mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated, claimant_bytes, claimed_at, last_heartbeat_at,
    lease_expires_at, ended_at, outcome, disposition, ended_by_id, summary, summary_truncated,
    summary_bytes, summary_document, artifact, artifact_truncated, artifact_bytes, result,
    lease_token_hash)
SELECT todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id, mcp_session_id,
       false, octet_length(mcp_session_id), owner, claimant, false, octet_length(claimant), claimed_at, heartbeat_at, lease_expires_at,
       ended_at, outcome, disposition, ended_by_id, summary, summary_truncated, summary_bytes,
       CASE WHEN summary > '' THEN to_tsvector('simple', summary) END,
       artifact, false, coalesce(octet_length(artifact), 0), result, lease_token_hash
  FROM board_att
 ORDER BY todo_id, seq

-- name: titles
Rebuild the docs site for {}
Fix the flaky upload test in {}
Triage new issues labelled {}
Translate the release notes of {} into German
Bump the dependencies of {}
Summarize last night's CI failures in {}
Regenerate the API docs for {}
Review the open pull request on {}
Backfill missing changelog entries for {}
Check broken links in the {} docs
Reproduce the reported crash in {}
Draft a migration guide for {}

-- name: completed
Rebuilt 142 pages; 3 warnings about broken anchors in api/reference, no errors.
Opened PR #4821 with the fix; CI green on the second run (the first hit the flaky upload test).
Translated 38 strings; 2 left untranslated because the glossary has no entry for them.
Labelled the issue a duplicate of #1193 and linked the two; no code change needed.
Bumped 7 dependencies; lockfile regenerated, the full suite passed in 4m12s.
Summarized 12 CI failures: 9 are the same timeout in test_sweeper_batch, 3 are network flakes.
Regenerated the API reference from the OpenAPI document. Changed pages: verbs/claim_next, verbs/complete, errors. The examples in docs/api.md still use the old field name lease_seconds_max; I left a note in the PR description rather than editing prose I was not asked to touch.
Übersetzt: 38 Zeichenketten; zwei fehlen im Glossar (»Lease«, »Fence«).

-- name: failed
pip install failed: ResolutionImpossible for numpy<2 and scipy>=1.14; lockfile left untouched.
Tests failed: 2 of 318 (test_retry_backoff, test_sweeper_batch); the log is the artifact.
The upstream API answered 503 three times in a row; giving up on this attempt.
git push was rejected: the branch moved while I worked; it needs a rebase first.
The sandbox ran out of memory building the search index (limit 2 GiB).
Could not reproduce the crash on main; the issue needs a failing test from the reporter.

-- name: released
Releasing: this needs credentials for the staging bucket that this worker lacks.
Handing back: the repository is locked by a migration in progress.
Not my kind of task (needs a GPU); releasing it for another worker.
