"""The Board's server time over a large ledger (issue 4, "Speed"): section ``board``.

Seeds by SQL (generate_series, INSERT ... SELECT) one team's todos and exactly as many attempt
rows as asked, consistent with the ledger's rules (checked by queries before measuring), with
a second team's todos interleaved by id; then measures each page in this process through
django.test.Client: p50/p95/max, statements per request, time inside cursor.execute, the same
statements replayed on a bare psycopg cursor, and EXPLAIN (ANALYZE, BUFFERS) of the slowest.
A page that does not answer 200 is reported with its status and no verdict.
"""

from __future__ import annotations

import html
import re
import statistics
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

from bench import db
from bench.inprocess import log
from bench.ledger import percentile
from bench.table import f, table
from queues.transitions import Actor

QUEUE_TARGET_MS = 100.0  # issue 4: queue page p95
DRAWER_TARGET_MS = 50.0  # issue 4: drawer (50 attempts) p95
WARMUPS = 5
TEAM_B_EVERY = 11  # every 11th todo id belongs to the other team: a tenth of the measured team's
DRAWER_ATTEMPTS = 50
DRAWER_OLDER_SEQ = 5  # ?attempt=: a try of the first round
MIN_REQUESTS = 20  # a page over its time budget still gets this many
BULK_TARGET_S = 2.0  # issue 15: a bulk rerun of 1,000 dead letters
BULK_ROWS = 1000  # board.triage.BULK_MAX
SMALL_TEAM_TODOS = 12  # the small team's: its pages must not read the big teams' volume
# A 199-character hyphen chain: 101 one-letter prefixes to PostgreSQL, refused before any query.
HOSTILE_SEARCH = "-".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(100))
BULK_RUNS = 3  # bulk reruns timed (each takes 1,000 more dead letters out of the pile)


def add_arguments(p, ints=None) -> None:
    p.add_argument(
        "--board-todos",
        type=int,
        default=None,
        help="todos of the measured team [100000; quick 20000]; the other team gets a tenth",
    )
    p.add_argument(
        "--board-attempts",
        type=int,
        default=None,
        help="attempt rows of the measured team's todos, 8 to 12 per todo [10 per todo: "
        "1000000; quick 200000]",
    )
    p.add_argument(
        "--board-requests", type=int, default=None, help="timed requests per page [200; quick 50]"
    )
    p.add_argument(
        "--board-budget",
        type=float,
        default=60.0,
        help="seconds per page after which a slow page stops early, with at least "
        f"{MIN_REQUESTS} requests (the table says how many) [60]",
    )


def finish_arguments(args) -> None:
    args.board_todos = args.board_todos or (20_000 if args.quick else 100_000)
    args.board_attempts = args.board_attempts or 10 * args.board_todos
    args.board_requests = args.board_requests or (50 if args.quick else 200)
    if args.board_todos < 1000 or args.board_todos % 10:
        raise SystemExit("--board-todos: a multiple of 10, at least 1000")
    # The draws give about 10 per todo; the seed nudges done todos by one to hit the total.
    if not 8 * args.board_todos <= args.board_attempts <= 12 * args.board_todos:
        raise SystemExit("--board-attempts: between 8 and 12 per todo")


def _log(msg: str) -> None:
    log(f"board: {msg}")


# --- seeding ------------------------------------------------------------------------------------


@dataclass
class Fixture:
    user_id: int
    username: str
    drawer_todo: int
    other_team_todo: int
    endpoint_id: int = 0  # the endpoint page's: the busiest endpoint (4 in 10 todos)
    small_user_id: int = 0  # the owner of a team of SMALL_TEAM_TODOS beside the big ones
    counts: dict = field(default_factory=dict)
    seconds: float = 0.0


# One row per todo id: which team and endpoint, its final state, how many attempts in how many
# rounds. Team B (the other team) holds every 11th id, so its rows sit between the measured
# team's in every index. The newest 5% of ids hold the live states. Attempts per todo follow
# 1 + floor(u^3 * 38): a third of todos took one try, a long tail took up to 38.
PLAN = """
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
"""

# The counters that depend on the draws above, once the attempt total is final.
PLAN_FINISH = """
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
"""

TITLES = [
    "Rebuild the docs site for {}",
    "Fix the flaky upload test in {}",
    "Triage new issues labelled {}",
    "Translate the release notes of {} into German",
    "Bump the dependencies of {}",
    "Summarize last night's CI failures in {}",
    "Regenerate the API docs for {}",
    "Review the open pull request on {}",
    "Backfill missing changelog entries for {}",
    "Check broken links in the {} docs",
    "Reproduce the reported crash in {}",
    "Draft a migration guide for {}",
]
SUBJECTS = "billing|auth|search|uploads|notifications|payments|reports|admin|sdk-python|sdk-js|the CLI|the mobile app".split(
    "|"
)
COMPLETED = [
    "Rebuilt 142 pages; 3 warnings about broken anchors in api/reference, no errors.",
    "Opened PR #4821 with the fix; CI green on the second run (the first hit the flaky"
    " upload test).",
    "Translated 38 strings; 2 left untranslated because the glossary has no entry for them.",
    "Labelled the issue a duplicate of #1193 and linked the two; no code change needed.",
    "Bumped 7 dependencies; lockfile regenerated, the full suite passed in 4m12s.",
    "Summarized 12 CI failures: 9 are the same timeout in test_sweeper_batch, 3 are network"
    " flakes.",
    "Regenerated the API reference from the OpenAPI document. Changed pages: verbs/claim_next,"
    " verbs/complete, errors. The examples in docs/api.md still use the old field name"
    " lease_seconds_max; I left a note in the PR description rather than editing prose I was"
    " not asked to touch.",
    "Übersetzt: 38 Zeichenketten; zwei fehlen im Glossar (»Lease«, »Fence«).",
]
FAILED = [
    "pip install failed: ResolutionImpossible for numpy<2 and scipy>=1.14; lockfile left"
    " untouched.",
    "Tests failed: 2 of 318 (test_retry_backoff, test_sweeper_batch); the log is the artifact.",
    "The upstream API answered 503 three times in a row; giving up on this attempt.",
    "git push was rejected: the branch moved while I worked; it needs a rebase first.",
    "The sandbox ran out of memory building the search index (limit 2 GiB).",
    "Could not reproduce the crash on main; the issue needs a failing test from the reporter.",
]
RELEASED = [
    "Releasing: this needs credentials for the staging bucket that this worker lacks.",
    "Handing back: the repository is locked by a migration in progress.",
    "Not my kind of task (needs a GPU); releasing it for another worker.",
]
LOG_LINE = (
    "FAILED tests/queues/test_sweeper.py::test_batch_reaps_only_lapsed - AssertionError:"
    " expected 3 reaped, got 2\n"
)

# One row per attempt, every column final. r = round of seq, j = its try in the round, k = tries
# in the round (rounds split the todo's attempts evenly). Outcomes: a try that is not the last
# of its round was followed by another: failed (retry scheduled), reaped or released
# (requeued), or lease_expired (requeued by the claim that took it over). The last try of an
# earlier round ended it (dead, done or canceled: a rerun followed); the last try of the last
# round gives the todo its state.
ATTEMPTS = """
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
"""

# Per todo: the counters of its last round and what its newest attempt left behind.
AGGREGATE = """
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
"""

TODOS = """
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
"""

ATTEMPT_ROWS = """
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
"""

# What the seeding must have produced; each count must be 0.
CHECKS = {
    "open attempts on todos not claimed": """
        SELECT count(*) FROM todo_attempts a JOIN todos t ON t.id = a.todo_id
         WHERE a.ended_at IS NULL AND t.state <> 'claimed'""",
    "claimed todos whose newest attempt is not open": """
        SELECT count(*) FROM todos t JOIN todo_attempts a
            ON a.todo_id = t.id AND a.seq = t.last_attempt_seq
         WHERE t.state = 'claimed' AND a.ended_at IS NOT NULL""",
    "todos whose attempt rows are not seq 1..last_attempt_seq": """
        SELECT count(*) FROM todos t LEFT JOIN LATERAL (
            SELECT count(*) AS n, coalesce(max(seq), 0) AS top FROM todo_attempts a
             WHERE a.todo_id = t.id) x ON true
         WHERE x.n <> t.last_attempt_seq - t.attempts_pruned OR x.top <> t.last_attempt_seq""",
    "todos whose counters disagree with their last round": """
        SELECT count(*) FROM todos t JOIN LATERAL (
            SELECT count(*) AS tries,
                   count(*) FILTER (WHERE outcome IN ('failed', 'reaped', 'lease_expired')) AS f
              FROM todo_attempts a WHERE a.todo_id = t.id AND a.round = t.round) x ON true
         WHERE t.last_attempt_seq > 0 AND (x.tries <> t.attempt OR x.f <> t.failures
               OR t.failures > t.max_attempts)""",
    "lease_expired attempts with no later attempt": """
        SELECT count(*) FROM todo_attempts a JOIN todos t ON t.id = a.todo_id
         WHERE a.outcome = 'lease_expired' AND a.disposition <> 'dead_lettered'
           AND a.seq = t.last_attempt_seq""",
}


def seed(args) -> Fixture:
    """Empty the ledger tables, make the teams, users and endpoints, and write the todos and
    attempts by SQL. Returns what the pages need (the user, the drawer's todo)."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from queues import endpoints, teams
    from queues.models import Membership

    started = time.monotonic()
    n = args.board_todos
    ids = n + n // 10  # team B: every 11th id
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE todos, todo_attempts, todo_events RESTART IDENTITY CASCADE")

    users = get_user_model().objects
    owner = users.create_user(username="acme-owner", password=None)
    member = users.create_user(username="acme-member", password=None)
    other_owner = users.create_user(username="globex-owner", password=None)
    acme = teams.get_or_create_team("acme-agents", name="Acme agents")
    teams.add_member(acme, owner, role=Membership.Role.OWNER)
    teams.add_member(acme, member, role=Membership.Role.MEMBER, by=owner)
    globex = teams.get_or_create_team("globex", name="Globex")
    teams.add_member(globex, other_owner, role=Membership.Role.OWNER)
    agents = ["docs-builder", "ci-fixer", "triage-bot", "translator"]
    endpoint_ids = [endpoints.vend(acme, a, verbs="all", user=owner)[0].pk for a in agents]
    endpoint_ids.append(endpoints.vend(globex, "globex-agent", verbs="all")[0].pk)
    agents.append("globex-agent")

    drawer_todo = ids - 3
    while drawer_todo % TEAM_B_EVERY == 0:
        drawer_todo -= 1
    params = {
        "ids": ids,
        "endpoints": endpoint_ids,
        "agents": agents,
        "member": member.pk,
        "other_owner": other_owner.pk,
        "titles": TITLES,
        "n_titles": len(TITLES),
        "subjects": SUBJECTS,
        "n_subjects": len(SUBJECTS),
        "completed": COMPLETED,
        "n_completed": len(COMPLETED),
        "failed": FAILED,
        "n_failed": len(FAILED),
        "released": RELEASED,
        "n_released": len(RELEASED),
        "log_line": LOG_LINE,
    }
    with connection.cursor() as cursor:

        def run(label: str, statement: str, values=None) -> None:
            t = time.monotonic()
            cursor.execute(statement, values)
            _log(f"  {label}: {time.monotonic() - t:.1f}s")

        cursor.execute("SELECT setseed(0.4242)")
        cursor.execute("DROP TABLE IF EXISTS board_plan, board_att, board_agg")
        run("plan", PLAN.format(every=TEAM_B_EVERY), params)
        cursor.execute(
            "ALTER TABLE board_plan ADD COLUMN max_attempts int, ADD COLUMN endpoint_id bigint,"
            " ADD COLUMN agent_id text, ADD COLUMN human_id int, ADD COLUMN created_at timestamptz"
        )
        # The drawer's todo: 50 tries over 3 rounds (dead, then canceled, then done).
        cursor.execute(
            "UPDATE board_plan SET state = 'done', total = %s, rounds = 3, at_cap = false,"
            " forced_ends = '{failed,canceled,completed}', ep_slot = 1 WHERE id = %s",
            (DRAWER_ATTEMPTS, drawer_todo),
        )
        _exact_total(cursor, args.board_attempts, drawer_todo)
        run("plan counters", PLAN_FINISH, params)
        run("attempts (temp)", ATTEMPTS, params)
        run("per-todo aggregates", AGGREGATE)
        # ANALYZE before each: the rows' deferred foreign-key checks (to todos) run at commit
        # on this session's cached plans, which a plan made over a small table turns into a
        # scan per check (bench/seed.py add_history).
        run("ANALYZE", "ANALYZE todos")
        run("todos", TODOS, params)
        run("ANALYZE", "ANALYZE todos")
        run("todo_attempts", ATTEMPT_ROWS)
        cursor.execute("SELECT setval(pg_get_serial_sequence('todos', 'id'), %s)", (ids,))
        cursor.execute("SELECT id FROM board_plan WHERE team_b ORDER BY id DESC LIMIT 1")
        other_team_todo = cursor.fetchone()[0]
        cursor.execute("DROP TABLE board_plan, board_att, board_agg")
        run("VACUUM (ANALYZE)", "VACUUM (ANALYZE) todos, todo_attempts, todo_events")
        failures = {}
        for label, statement in CHECKS.items():
            cursor.execute(statement)
            failures[label] = cursor.fetchone()[0]
        counts = _counts(cursor, acme.pk, drawer_todo)
    bad = {k: v for k, v in failures.items() if v}
    if bad:
        raise RuntimeError(f"board seed is inconsistent: {bad}")
    if counts["team_attempts"] != args.board_attempts or counts["team_todos"] != n:
        raise RuntimeError(f"board seed has the wrong size: {counts}")
    if counts["drawer_attempts"] != DRAWER_ATTEMPTS:
        raise RuntimeError(f"the drawer's todo has {counts['drawer_attempts']} attempts")
    small_user = _small_team(users)
    fixture = Fixture(
        small_user_id=small_user.pk,
        user_id=member.pk,
        username=member.username,
        drawer_todo=drawer_todo,
        other_team_todo=other_team_todo,
        endpoint_id=endpoint_ids[0],
        counts=counts,
        seconds=round(time.monotonic() - started, 1),
    )
    _log(
        f"seeded {counts['team_todos']:,} todos / {counts['team_attempts']:,} attempts "
        f"(+ other team {counts['other_todos']:,} / {counts['other_attempts']:,}) in "
        f"{fixture.seconds:.0f}s; consistency checks passed"
    )
    return fixture


def _exact_total(cursor, attempts: int, drawer_todo: int) -> None:
    """Nudge done, single-round todos by one attempt each until the measured team's total is
    exactly ``attempts``."""
    for _ in range(20):
        cursor.execute("SELECT coalesce(sum(total), 0) FROM board_plan WHERE NOT team_b")
        diff = attempts - cursor.fetchone()[0]
        if diff == 0:
            return
        cursor.execute(
            """
            UPDATE board_plan SET total = total + %(step)s
             WHERE id IN (SELECT id FROM board_plan
                           WHERE NOT team_b AND state = 'done' AND rounds = 1 AND NOT at_cap
                             AND id <> %(drawer)s AND total BETWEEN 2 AND 44
                           ORDER BY u_misc LIMIT %(n)s)
            """,
            {"step": 1 if diff > 0 else -1, "drawer": drawer_todo, "n": abs(diff)},
        )
    raise RuntimeError("board seed: could not reach the attempt total")


def _counts(cursor, team_id: int, drawer_todo: int) -> dict:
    def one(statement: str, params=None):
        cursor.execute(statement, params)
        return cursor.fetchone()

    team = """coalesce(sum({x}) FILTER (WHERE e.team_id = %(team)s), 0),
        coalesce(sum({x}) FILTER (WHERE e.team_id <> %(team)s), 0)"""
    counts = one(
        f"SELECT {team.format(x=1)}, {team.format(x='t.last_attempt_seq')}"
        " FROM todos t JOIN endpoints e ON e.id = t.endpoint_id",
        {"team": team_id},
    )
    cursor.execute(
        "SELECT t.state, count(*) FROM todos t JOIN endpoints e ON e.id = t.endpoint_id"
        " WHERE e.team_id = %s GROUP BY 1 ORDER BY 2 DESC",
        (team_id,),
    )
    states = dict(cursor.fetchall())
    sizes = one(
        "SELECT pg_size_pretty(pg_total_relation_size('todos')),"
        " pg_size_pretty(pg_total_relation_size('todo_attempts'))"
    )
    keys = ("team_todos", "other_todos", "team_attempts", "other_attempts")
    return {
        **dict(zip(keys, map(int, counts), strict=True)),
        "states": states,
        "drawer_attempts": one(
            "SELECT count(*) FROM todo_attempts WHERE todo_id = %s", (drawer_todo,)
        )[0],
        "todos_size": sizes[0],
        "todo_attempts_size": sizes[1],
    }


# --- measuring ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    name: str
    path: str
    kind: str  # "queue" or "drawer": which target applies
    htmx_target: str | None = None  # sent as HX-Target with HX-Request: true; None: no htmx

    @property
    def target_ms(self) -> float:
        return DRAWER_TARGET_MS if self.kind == "drawer" else QUEUE_TARGET_MS

    @property
    def headers(self) -> dict:
        if self.htmx_target is None:
            return {}
        return {"HX-Request": "true", "HX-Target": self.htmx_target}


def pages(fixture: Fixture) -> list[Page]:
    """The URL contract of the Board; the older page is added once the first page names it.
    The drawer's URL is held to the drawer's target whether htmx asks for the partial or a
    browser without JavaScript gets it as a whole page."""
    todo = f"/todos/{fixture.drawer_todo}/"
    return [
        Page("queue", "/", "queue"),
        Page("queue ?state=dead", "/?state=dead", "queue"),
        Page("queue ?died=1", "/?died=1", "queue"),
        Page("queue ?q=docs", "/?q=docs", "queue"),
        # Issue 15: search words in any order, across titles and attempt summaries.
        Page("search ?q=upload flaky (two words)", "/?q=upload+flaky", "queue"),
        Page("search ?q=resolutionimpossible (summaries)", "/?q=resolutionimpossible", "queue"),
        Page("dead letters ?state=dead&q=sandbox", "/?state=dead&q=sandbox", "queue"),
        Page(
            f"triage: confirm rerun of all dead (<= {BULK_ROWS:,})",
            "/triage/?do=rerun&all=1&state=dead",
            "queue",
        ),
        Page("queue refresh (htmx #queue)", "/", "queue", htmx_target="queue"),
        Page("drawer (htmx)", todo, "drawer", htmx_target="drawer"),
        Page(
            f"drawer ?attempt={DRAWER_OLDER_SEQ} (htmx)",
            f"{todo}?attempt={DRAWER_OLDER_SEQ}",
            "drawer",
            htmx_target="drawer",
        ),
        Page("drawer, whole page (no JS)", todo, "drawer"),
        Page("endpoint page (health)", f"/endpoints/{fixture.endpoint_id}/", "queue"),
        Page("search ?q=a-b-c-... (199 chars: refused)", f"/?q={HOSTILE_SEARCH}", "queue"),
    ]


def small_team_pages() -> list[Page]:
    """Read as the small team's owner: their queue and Activity beside the big teams."""
    return [
        Page(f"small team ({SMALL_TEAM_TODOS} todos): queue", "/", "queue"),
        Page(f"small team ({SMALL_TEAM_TODOS} todos): activity", "/activity/", "queue"),
    ]


@dataclass
class Statement:
    sql: str
    params: object
    many: bool
    cursor_class: type


class Recorder:
    """A connection.execute_wrapper: the time spent inside cursor.execute (the round trip
    and the server's work; rows arrive with it), and, when asked, the statements themselves
    for the replay and EXPLAIN."""

    def __init__(self) -> None:
        self.reset()

    def reset(self, *, keep: bool = False) -> None:
        self.keep = keep
        self.times: list[float] = []
        self.kept: list[Statement] = []

    def __call__(self, execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.times.append(time.perf_counter() - started)
            if self.keep:
                self.kept.append(Statement(sql, params, many, type(context["cursor"].cursor)))


_CONTROL = re.compile(
    r"\s*(SAVEPOINT|RELEASE|ROLLBACK|BEGIN|COMMIT|SET\s+TRANSACTION|START\s+TRANSACTION)\b", re.I
)
_READ = re.compile(r"\s*(SELECT|WITH|SHOW)\b", re.IGNORECASE)


def replay(raw, statements: list[Statement]) -> float:
    """Run the request's statements again on the bare psycopg connection, each on a cursor
    of the class that ran it (so a prepared statement runs prepared), execute + fetch; a
    page that wrote is replayed in a transaction that is rolled back."""
    statements = [s for s in statements if not _CONTROL.match(s.sql)]
    writes = any(not _READ.match(s.sql) for s in statements)
    total = 0.0
    with raw.transaction(force_rollback=True) if writes else nullcontext():
        for s in statements:
            cursor = s.cursor_class(raw)
            try:
                started = time.perf_counter()
                if s.many:
                    cursor.executemany(s.sql, s.params)
                elif s.params is None:
                    cursor.execute(s.sql)
                else:
                    cursor.execute(s.sql, s.params)
                if cursor.description is not None:
                    cursor.fetchall()
                total += time.perf_counter() - started
            finally:
                cursor.close()
    return total


def _small_team(users):
    """A team of SMALL_TEAM_TODOS todos, each claimed and completed through the ledger (the
    second hardening round: a small team's / and /activity/ took 400-525 ms beside a team with
    100,000 todos, against 70 ms for the big team's own)."""
    from queues import endpoints, teams, transitions
    from queues.models import Membership

    owner = users.create_user(username="initech-owner", password=None)
    initech = teams.get_or_create_team("initech", name="Initech")
    teams.add_member(initech, owner, role=Membership.Role.OWNER)
    endpoint, _ = endpoints.vend(initech, "initech-agent", verbs="all")
    agent = Actor.agent(endpoint)
    for i in range(SMALL_TEAM_TODOS):
        todo, _ = transitions.create_todo(Actor.agent(endpoint), title=f"small chore {i}")
        transitions.claim(agent, todo.id)
        transitions.complete(agent, todo.id, summary="done")
    return owner


def measure(client, page: Page, requests: int, recorder: Recorder, budget_s: float) -> dict:
    """Warm up, capture one request's statements, then time ``requests`` requests, each
    followed by a replay of the captured statements (so both see the same moment's load).
    A page still running after ``budget_s`` stops at MIN_REQUESTS or later."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(WARMUPS):
        client.get(page.path, headers=page.headers)
    recorder.reset(keep=True)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(page.path, headers=page.headers)
    # Read now: the next request's request_started signal empties the connection's log.
    queries = len(captured.captured_queries)
    body = response.content
    statements, captured_times = recorder.kept, recorder.times
    totals, in_sql, replays, counts, per_statement = [], [], [], [], []
    deadline = time.monotonic() + budget_s
    for n in range(requests):
        if n >= MIN_REQUESTS and time.monotonic() > deadline:
            break
        recorder.reset()
        started = time.perf_counter()
        answer = client.get(page.path, headers=page.headers)
        answer.content  # noqa: B018 - read the whole body, as a server would send it
        totals.append(time.perf_counter() - started)
        in_sql.append(sum(recorder.times))
        counts.append(len(recorder.times))
        per_statement.append(recorder.times)
        replays.append(replay(connection.connection, statements))
    # The slowest statements: by median over the timed requests when every request ran the
    # same statements, else as timed in the captured request.
    if statements and all(c == len(statements) for c in counts):
        medians = [statistics.median(t[i] for t in per_statement) for i in range(len(statements))]
    else:
        medians = captured_times
    order = sorted(range(len(medians)), key=medians.__getitem__, reverse=True)
    slowest = [
        {
            "index": i,
            "in_request_p50_ms": _ms(medians[i]),
            "label": _label(statements[i].sql),
            "sql": statements[i].sql,
            "params": repr(statements[i].params)[:2000],
            "explain": explain_statement(connection.connection, statements[i]),
        }
        for i in order[:2]
    ]
    rest = [t - s for t, s in zip(totals, in_sql, strict=True)]
    return {
        "page": page.name,
        "path": page.path,
        "headers": page.headers,
        "kind": page.kind,
        "target_ms": page.target_ms,
        "status": response.status_code,
        "bytes": len(body),
        "queries": queries,
        "queries_per_request": sorted(set(counts)),
        "requests": len(totals),
        "p50_ms": _ms(_pct(totals, 50)),
        "p95_ms": _ms(_pct(totals, 95)),
        "max_ms": _ms(max(totals)),
        "sql_p50_ms": _ms(_pct(in_sql, 50)),
        "sql_p95_ms": _ms(_pct(in_sql, 95)),
        "rest_p50_ms": _ms(_pct(rest, 50)),
        "replay_p50_ms": _ms(_pct(replays, 50)),
        "replay_p95_ms": _ms(_pct(replays, 95)),
        "slowest": slowest,
        "_body": body,
    }


def _pct(values: list[float], q: float) -> float:
    return percentile(values, q)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def _label(sql: str) -> str:
    """A statement in a few words: its tables, and how it orders and limits."""
    flat = " ".join(sql.split())
    verb = flat.split(" ", 1)[0].upper()
    tables: list[str] = []
    for name in re.findall(r"\b(?:FROM|JOIN)\s+\"?([a-z_]+)\"?", flat, re.IGNORECASE):
        if name.lower() not in tables and name.upper() not in ("LATERAL", "SELECT"):
            tables.append(name.lower())
    at = flat.rfind("ORDER BY")  # the statement's own, after any subquery's
    order = flat[at:] if at >= 0 else ""
    order = re.sub(r"\"[a-z_]+\"\.", "", order).replace('"', "")
    if len(order) > 70:
        order = order[:67] + "..."
    return f"{verb} {', '.join(tables) or '?'}" + (f" ({order})" if order else "")


def explain_statement(raw, statement: Statement) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) with the request's own parameters bound client-side (so
    PostgreSQL makes a custom plan for those values), in a transaction rolled back."""
    import psycopg

    from bench import explain

    if statement.many or _CONTROL.match(statement.sql):
        return {"error": "not a single statement"}
    try:
        with raw.transaction(force_rollback=True):
            cursor = psycopg.ClientCursor(raw)
            query = "EXPLAIN (ANALYZE, BUFFERS) " + statement.sql
            if statement.params is None:
                cursor.execute(query)
            else:
                cursor.execute(query, statement.params)
            lines = [row[0] for row in cursor.fetchall()]
    except Exception as exc:  # noqa: BLE001 - a bench note, not a failure
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    summary = explain.summarize(lines)
    nodes: list[str] = []
    for line in lines:
        if "(cost=" not in line:
            continue
        text = line.split("  (cost=", 1)[0].strip().removeprefix("->").strip()
        kind = re.split(r" using | on ", text, maxsplit=1)[0]
        m = explain.SCAN.search(text)
        if m:
            kind = f"{m.group(1)} {m.group(3)}" + (f" ({m.group(2)})" if m.group(2) else "")
        if "never executed" in line:
            kind += " (not run)"
        nodes.append(kind)
    rows_read: dict[str, int] = {}
    for scan in summary["scans"]:
        if scan["kind"] == "Bitmap Index Scan" or scan["rows"] is None:
            continue
        rows_read[scan["table"]] = rows_read.get(scan["table"], 0) + scan["rows"] * (
            scan["loops"] or 1
        )
    removed = [int(x) for x in re.findall(r"Rows Removed by Filter: (\d+)", "\n".join(lines))]
    sorts = sorted(
        {m for m in re.findall(r"Sort Method: ([\w -]+?)\s+(?:Memory|Disk)", "\n".join(lines))}
    )
    return {
        "lines": lines,
        "nodes": nodes,
        "scans": explain.scan_line(summary),
        "execution_ms": summary.get("execution_ms"),
        "planning_ms": summary.get("planning_ms"),
        "buffers": summary.get("buffers"),
        "rows_read": rows_read,
        "rows_removed_by_filter": sum(removed),
        "sort_methods": sorts,
        "seq_scan_todo_attempts": summary["seq_scan_todo_attempts"],
        "seq_scan_todos": summary["seq_scan_todos"],
    }


def measure_bulk(client) -> dict:
    """Issue 15: bulk rerun of the newest 1,000 dead letters, as a person does it: the
    confirmation (GET, all matching) then the POST of its items; BULK_RUNS times, each on the
    next 1,000. Each rerun is its own transition and audit row (board/triage.py)."""
    import html as html_module

    from queues.models import Todo

    runs = []
    for _ in range(BULK_RUNS):
        dead_before = Todo.objects.filter(state="dead").count()
        started = time.perf_counter()
        confirm = client.get("/triage/?do=rerun&all=1&state=dead")
        confirm_s = time.perf_counter() - started
        m = re.search(r'name="items" value="([^"]*)"', confirm.content.decode())
        if confirm.status_code != 200 or not m:
            runs.append({"status": confirm.status_code, "error": "no confirmation"})
            break
        items = html_module.unescape(m.group(1))
        started = time.perf_counter()
        done = client.post("/triage/", {"do": "rerun", "items": items, "state": "dead"})
        post_s = time.perf_counter() - started
        body = done.content.decode()
        reran = re.search(r"Rerun: (\d+) done", body)
        runs.append(
            {
                "status": done.status_code,
                "dead_before": dead_before,
                "items": len(items.split()),
                "reran": int(reran.group(1)) if reran else None,
                "confirm_ms": _ms(confirm_s),
                "post_ms": _ms(post_s),
            }
        )
        _log(f"bulk rerun: {runs[-1]}")
    return {"target_s": BULK_TARGET_S, "runs": runs}


_OLDER = re.compile(r'href="(\?[^"]*\bbefore=\d+[^"]*)"')


def older_page(body: bytes) -> str | None:
    """The queue page's link to the next (older) page, if it has one."""
    m = _OLDER.search(body.decode("utf-8", "replace"))
    return "/" + html.unescape(m.group(1)) if m else None


def run_section(ctx) -> None:
    """Seed, measure every page, and store the figures in ``ledger.notes["board"]``."""
    import os

    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    args = ctx.args
    started = time.monotonic()
    load0 = [round(x, 2) for x in os.getloadavg()]
    git = db.git_state(("board/views/queue.py", "board/views/todos.py", "queues/selectors.py"))
    fixture = seed(args)
    user = get_user_model().objects.get(pk=fixture.user_id)
    client = Client(HTTP_HOST="127.0.0.1", raise_request_exception=False)
    client.force_login(user)
    recorder = Recorder()
    rows: list[dict] = []
    todo_list = pages(fixture)
    with connection.execute_wrapper(recorder):
        while todo_list:
            page = todo_list.pop(0)
            t = time.monotonic()
            row = measure(client, page, args.board_requests, recorder, args.board_budget)
            rows.append(row)
            _log(
                f"{page.name}: status {row['status']}, {row['queries']} queries, p50 "
                f"{row['p50_ms']} ms, p95 {row['p95_ms']} ms ({time.monotonic() - t:.0f}s)"
            )
            older = older_page(row["_body"]) if page.name == "queue" else None
            if older:
                todo_list.insert(0, Page("queue, older page", older, "queue"))
        other = client.get(f"/todos/{fixture.other_team_todo}/", headers={"HX-Request": "true"})
        small = Client(HTTP_HOST="127.0.0.1", raise_request_exception=False)
        small.force_login(get_user_model().objects.get(pk=fixture.small_user_id))
        for page in small_team_pages():
            row = measure(small, page, args.board_requests, recorder, args.board_budget)
            rows.append(row)
            _log(
                f"{page.name}: status {row['status']}, p50 {row['p50_ms']} ms, p95 {row['p95_ms']} ms"
            )
    bulk = measure_bulk(client)  # last: it changes the ledger
    leaks = [r["page"] for r in rows if b"[globex]" in r["_body"]]
    for r in rows:
        del r["_body"]
    note = {
        "requests": args.board_requests,
        "budget_s": args.board_budget,
        "warmups": WARMUPS,
        "quick": args.quick,
        "fixture": {
            "user": fixture.username,
            "drawer_todo": fixture.drawer_todo,
            "other_team_todo": fixture.other_team_todo,
            "seed_s": fixture.seconds,
            **fixture.counts,
        },
        "rows": rows,
        "scope": {"other_team_drawer_status": other.status_code, "leaks": leaks},
        "bulk": bulk,
        "targets": {"queue_p95_ms": QUEUE_TARGET_MS, "drawer_p95_ms": DRAWER_TARGET_MS},
        "git": git,
        "duration_s": round(time.monotonic() - started, 1),
        "loadavg": [load0, [round(x, 2) for x in os.getloadavg()]],
    }
    ctx.ledger.notes["board"] = note
    (db.RESULTS / f"board-{ctx.stamp}.txt").write_text(render(note) + "\n")


# --- the table ----------------------------------------------------------------------------------


def render(note: dict) -> str:
    fx, f1 = note["fixture"], (lambda x: f(x, "{:.1f}"))
    states = ", ".join(f"{k} {v:,}" for k, v in fx["states"].items())
    out = [
        "The Board: server time in-process (django.test.Client, signed in as a team member with "
        f"force_login), {note['requests']} requests per page after {note['warmups']} warm-ups "
        f"(n: fewer where a page ran past its {note['budget_s']:.0f} s budget)"
        + (" (--quick: smaller counts)" if note.get("quick") else ""),
        f"data: the user's team has {fx['team_todos']:,} todos and {fx['team_attempts']:,} "
        f"attempts on 4 endpoints ({states}); another team's {fx['other_todos']:,} todos / "
        f"{fx['other_attempts']:,} attempts sit between them by id. Seeded by SQL in "
        f"{fx['seed_s']:.0f} s, VACUUM (ANALYZE); todos {fx['todos_size']}, todo_attempts "
        f"{fx['todo_attempts_size']}. Drawer: todo #{fx['drawer_todo']}, "
        f"{fx['drawer_attempts']} attempts in 3 rounds.",
        db.code_line(note["git"]),
        "",
    ]
    rows = []
    for r in note["rows"]:
        queries = str(r["queries"])
        if r["queries_per_request"] != [r["queries"]]:
            queries += f" ({'/'.join(map(str, r['queries_per_request']))})"
        verdict = (
            "- (not 200)"
            if r["status"] != 200
            else ("met" if r["p95_ms"] <= r["target_ms"] else "NOT met")
        )
        rows.append(
            [
                r["page"],
                str(r["status"]),
                r["requests"],
                f"{r['bytes'] / 1024:.0f}",
                queries,
                f1(r["p50_ms"]),
                f1(r["p95_ms"]),
                f1(r["max_ms"]),
                f"{f1(r['sql_p50_ms'])}/{f1(r['sql_p95_ms'])}",
                f"{f1(r['replay_p50_ms'])}/{f1(r['replay_p95_ms'])}",
                f1(r["rest_p50_ms"]),
                f"<= {r['target_ms']:.0f} ms",
                verdict,
            ]
        )
    headers = "page|status|n|KiB|queries|p50 ms|p95 ms|max ms|SQL p50/p95 ms|replay p50/p95 ms|rest p50 ms|target p95|verdict"
    out += table(headers.split("|"), rows, left=2)
    out += [
        "",
        "queries = statements in one request (CaptureQueriesContext); SQL = time inside "
        "cursor.execute during the request (round trip and the server's work);",
        "replay = the same statements right after each request on a bare psycopg cursor of the "
        "same connection (execute + fetch, prepared ones prepared); rest = request minus SQL: "
        "Django, the view, the template.",
        "Targets (issue 4): the queue page, its filters, older page and refresh p95 <= "
        f"{QUEUE_TARGET_MS:.0f} ms; the drawer of a todo with 50 attempts (htmx partial or whole "
        f"page) p95 <= {DRAWER_TARGET_MS:.0f} ms.",
    ]
    for kind, label in (("queue", "queue pages"), ("drawer", "drawer")):
        group = [r for r in note["rows"] if r["kind"] == kind]
        measured = [r for r in group if r["status"] == 200]
        if len(measured) < len(group):
            out.append(
                f"  {label}: {len(group) - len(measured)} of {len(group)} did not answer 200: no verdict for them"
            )
        if measured:
            worst = max(measured, key=lambda r: r["p95_ms"])
            met = all(r["p95_ms"] <= r["target_ms"] for r in measured)
            out.append(
                f"  {label}: worst p95 {worst['p95_ms']:.1f} ms ({worst['page']}) => {'MET' if met else 'NOT MET'}"
            )
    bulk = note.get("bulk") or {}
    for n, run in enumerate(bulk.get("runs", []), 1):
        if "post_ms" not in run:
            out.append(f"  bulk rerun {n}: no confirmation page (status {run.get('status')})")
            continue
        verdict = "met" if run["post_ms"] <= bulk["target_s"] * 1000 else "NOT met"
        out.append(
            f"  bulk rerun {n}: {run['reran']} of {run['items']} confirmed dead letters rerun "
            f"(of {run['dead_before']:,} dead) in {run['post_ms'] / 1000:.2f} s (POST; the "
            f"confirmation page {run['confirm_ms']:.0f} ms); target <= {bulk['target_s']:.0f} s: "
            f"{verdict}"
        )
    scope = note["scope"]
    out.append(
        f"Scope: the other team's todo answers {scope['other_team_drawer_status']} "
        f"({'as it should' if scope['other_team_drawer_status'] == 404 else 'EXPECTED 404'}); "
        + (
            "its titles appear on: " + ", ".join(scope["leaks"]) + " (LEAK)"
            if scope["leaks"]
            else "none of its titles appears on any page."
        )
    )
    out += [
        "",
        "The slowest statement of each page (and the next, when it takes 1 ms or more): EXPLAIN "
        "(ANALYZE, BUFFERS) with the request's parameters bound (a custom plan), rolled back;",
        "rows = rows the plan's scans returned from the table, over all their loops:",
    ]
    seen: dict[tuple, str] = {}
    for r in note["rows"]:
        for rank, s in enumerate(r.get("slowest") or []):
            if rank and s["in_request_p50_ms"] < 1.0:
                continue
            e = s["explain"]
            out.append(
                f"  {r['page']}: {'then ' if rank else ''}statement {s['index'] + 1} of "
                f"{r['queries']}, {s['in_request_p50_ms']} ms in the request (p50): {s['label']}"
            )
            if "error" in e:
                out.append(f"      EXPLAIN failed: {e['error']}")
                continue
            words = {t: _scan_words(e, t) for t in ("todo_attempts", "todos")}
            facts = (
                f"execution {e['execution_ms']} ms, planning {e['planning_ms']} ms, buffers "
                f"{e['buffers']}; todo_attempts: {words['todo_attempts']}; todos: {words['todos']}"
                + (f"; sort {', '.join(e['sort_methods'])}" if e["sort_methods"] else "")
            )
            counted: dict[str, int] = {}
            for node in e["nodes"]:
                counted[node] = counted.get(node, 0) + 1
            nodes = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counted.items())
            if (s["sql"], nodes) in seen:
                out.append(f"      same statement and plan as {seen[(s['sql'], nodes)]}: {facts}")
                continue
            seen[(s["sql"], nodes)] = r["page"]
            out += [f"      {facts}", f"      nodes: {nodes}"]
    out += [
        "",
        f"board section took {note['duration_s']:.0f} s; load average before/after "
        f"{note['loadavg'][0]} / {note['loadavg'][1]}",
    ]
    return "\n".join(out)


def _scan_words(e: dict, table: str) -> str:
    """'SEQ SCAN, 1,051,657 rows' / 'index, 50 rows' / 'not read'."""
    rows = e["rows_read"].get(table)
    if rows is None:
        return "not read"
    return f"{'SEQ SCAN' if e['seq_scan_' + table] else 'index'}, {rows:,} rows"
