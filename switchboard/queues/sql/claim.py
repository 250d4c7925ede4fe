"""Claims: claim_next (the endpoint's best claimable todo) and claim (one todo, by an agent or
a person). One statement each.

Why raw SQL: in one statement a claim picks the best claimable todo with ``FOR UPDATE SKIP
LOCKED``, closes a lapsed attempt (``lease_expired``, or dead-letters the todo at the cap),
prunes history over the cap (carrying uncounted rows' counts to the metrics fold), moves the
todo and opens the new attempt. The ORM would need five round trips and five Python objects.
The five newest closed attempts it hands back are read after it (PRIOR_ATTEMPTS), only for a
todo that has any: a first claim does not pay for the read, its joins and its wide rows.

Triggers it relies on (queues/schema/functions.sql): ``todos_outbox_dead_letter`` writes the
dead-letter outbox row when a lapsed lease at the cap kills the todo.

Snapshot freshness: under READ COMMITTED, ``FOR UPDATE`` locks the newest version of the todo
row, but the other reads in this statement (the todo's attempts, read by the claims that can
take over a lapsed lease; the fast claim_next reads none) see the snapshot taken when the
statement began. If a claim or close of this todo committed in between, the snapshot's
newest attempt disagrees with the locked row; then nothing is written, the first column
(``ok``) is false, and the caller runs the statement again: a new statement has a new
snapshot, and the row lock is already ours. Every write to a todo's attempts happens under
the todo's row lock, so agreement here means the snapshot holds exactly the attempts there
are. (Found by tests/queues/test_concurrency.py: the one-open-attempt constraint caught it.)
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.sql.fragments import (
    LIVE,
    NO_QUESTION,
    SCOPE_ENDPOINT,
    SCOPE_USER,
    attempt_columns,
    attempt_joins,
    claimable_at,
    todo_columns,
)

# The statement's common table expressions, then its row; its attempt arms (below) fill
# {history_arms}, {pruned_count} and {opened}. The row's first columns: ``ok`` (the snapshot
# agreed with the locked row), ``slow`` (the fast claim_next picked a todo that needs the
# takeover arms, and wrote nothing) and the picked id.
_CLAIM_CTES = """pick AS (
    SELECT t.id, t.state AS prior_state, t.last_attempt_seq, t.attempts_pruned,
           t.last_heartbeat_at, t.lease_expires_at, t.failures, t.max_attempts,
           {dies} AS dies
      FROM todos t
     WHERE {pick_filter}
       AND {claimable}{lapse_guard}{key_filter}
     ORDER BY t.priority DESC, {claimable_at}, t.id
     LIMIT 1
       FOR UPDATE OF t {lock_mode}
),
{history_arms}moved AS (
    UPDATE todos t
       SET state = CASE WHEN f.dies THEN 'dead' ELSE 'claimed' END,
           failures = t.failures + CASE WHEN f.prior_state = 'claimed' THEN {lapse_spends}
                                        ELSE 0 END,
           attempt = t.attempt + (NOT f.dies)::int,
           last_attempt_seq = t.last_attempt_seq + (NOT f.dies)::int,
           attempts_pruned = t.attempts_pruned + {pruned_count},
           owner = CASE WHEN f.dies THEN '' ELSE %(owner)s END,
           claimed_at = CASE WHEN f.dies THEN NULL ELSE statement_timestamp() END,
           last_heartbeat_at = NULL,
           lease_expires_at = CASE WHEN f.dies THEN NULL ELSE
               statement_timestamp() + make_interval(secs => %(lease_seconds)s) END,
           next_retry_at = NULL,
           dead_letter_reason = CASE WHEN f.dies THEN {lapse_reason} ELSE '' END,
           ended_at = CASE WHEN f.dies THEN statement_timestamp() END,
           updated_at = statement_timestamp()
      FROM fresh f
     WHERE f.ok AND NOT f.slow AND t.id = f.id
 RETURNING t.*
){opened}"""
_CLAIM_ROW = """
SELECT f.ok, f.slow, f.id, f.failures, f.max_attempts, {todo_cols}
  FROM fresh f
  LEFT JOIN moved m ON true
  LEFT JOIN endpoints e ON e.id = m.endpoint_id
  LEFT JOIN endpoints rq ON rq.id = m.requester_id
"""

# The attempt arms: the snapshot-freshness read of the newest attempt, closing a lapsed one,
# pruning (and carrying pruned counts to the metrics fold) and opening the new attempt. The
# prior attempts are read by PRIOR_ATTEMPTS below, after the claim and only when the todo
# has any.
_CLAIM_ATTEMPT_ARMS = """newest AS (
    -- The todo's newest attempt in this statement's snapshot, for the freshness check: one
    -- backward probe of the (todo_id, seq) index keyed by an InitPlan parameter.
    SELECT x.seq, x.ended_at FROM todo_attempts x
     WHERE x.todo_id = (SELECT pick.id FROM pick)
     ORDER BY x.seq DESC
     LIMIT 1
),
fresh AS (
    SELECT pick.*,
           CASE WHEN pick.last_attempt_seq = 0 THEN newest.seq IS NULL
                ELSE newest.seq IS NOT DISTINCT FROM pick.last_attempt_seq
                     AND (newest.ended_at IS NULL) = (pick.prior_state = 'claimed')
           END AS ok,
           false AS slow
      FROM pick LEFT JOIN newest ON true
),
lapsed AS (
    -- Only a lapsed lease has an attempt to close: the keys are InitPlan parameters, NULL
    -- otherwise, and an index scan for NULL reads nothing.
    UPDATE todo_attempts a
       SET ended_at = statement_timestamp(),
           outcome = 'lease_expired',
           disposition = %(lapse_disposition)s,
           last_heartbeat_at = f.last_heartbeat_at,
           lease_expires_at = f.lease_expires_at
      FROM fresh f
     WHERE a.todo_id = (SELECT l.id FROM fresh l WHERE l.ok AND l.prior_state = 'claimed')
       AND a.seq = (SELECT l.last_attempt_seq FROM fresh l
                     WHERE l.ok AND l.prior_state = 'claimed')
       AND a.ended_at IS NULL
 RETURNING a.seq
),
pruned AS (
    -- Kept rows are exactly seq in (attempts_pruned, last_attempt_seq]: the range bounds the
    -- index scan, and the scan runs only when the cap can bite (more rows kept than the cap
    -- allows once this claim opens one). A row closed by `lapsed` above is not deleted in
    -- the same statement (it is still open in this statement's snapshot); the next claim
    -- prunes it.
    DELETE FROM todo_attempts a
     USING fresh f
     WHERE f.ok AND NOT f.dies
       AND f.last_attempt_seq + 1 - %(history_cap)s > f.attempts_pruned
       AND a.todo_id = f.id
       AND a.seq > f.attempts_pruned
       AND a.seq <= f.last_attempt_seq + 1 - %(history_cap)s
       AND a.ended_at IS NOT NULL
 RETURNING a.seq, a.outcome, a.ended_at
),
carried AS (
    -- A pruned row the metrics fold may not have counted yet (it ended at or after the mark
    -- as this statement reads it) leaves its count behind with its ended_at, so no close goes
    -- uncounted (queues/counters.py). Evaluated only when rows were pruned (the sub-select
    -- runs on first use). No lock: a fold that counted the row while it was still visible has
    -- a window past its ended_at, and the fold drops a delta that ended before its window.
    INSERT INTO metric_deltas (name, label, ended_at, value)
    SELECT 'attempts_closed_total', p.outcome, p.ended_at, count(*)
      FROM pruned p
     WHERE p.ended_at >= COALESCE(
               (SELECT s.metrics_folded_until FROM sweeper_status s WHERE s.id = 1),
               '-infinity'::timestamptz)
     GROUP BY p.outcome, p.ended_at
),
"""
# The fast claim reads no attempt, so it needs no freshness check: a pick that is pending or
# waiting to retry has no open attempt in the locked row's version (every move out of
# ``claimed`` closes it in the same statement), the new attempt's seq comes from that
# version, and the unique indexes check against committed rows, not this snapshot.
_CLAIM_FAST_ARMS = """fresh AS (
    SELECT pick.*, true AS ok,
           -- The arms this statement leaves out are needed: a lapsed lease to take over (or
           -- dead-letter), or history the cap would prune. Then nothing is written and the
           -- plan runs CLAIM_NEXT_TAKEOVER for this todo.
           (pick.prior_state = 'claimed'
            OR pick.last_attempt_seq + 1 - %(history_cap)s > pick.attempts_pruned) AS slow
      FROM pick
),
"""
_CLAIM_OPENED = """,
opened AS (
    INSERT INTO todo_attempts (
        todo_id, seq, round, attempt, claimer_kind, endpoint_id, user_id, mcp_session_id,
        mcp_session_id_truncated, mcp_session_id_bytes, owner, claimant, claimant_truncated,
        claimant_bytes, claimed_at, lease_expires_at, lease_token_hash, trace_id)
    SELECT m.id, m.last_attempt_seq, m.round, m.attempt, %(claimer_kind)s,
           %(claimer_endpoint)s, %(claimer_user)s, %(mcp_session_id)s,
           %(mcp_session_id_truncated)s, %(mcp_session_id_bytes)s, m.owner,
           %(claimant)s, %(claimant_truncated)s, %(claimant_bytes)s, m.claimed_at,
           m.lease_expires_at, %(token_hash)s, %(trace_id)s
      FROM moved m
     WHERE m.state = 'claimed'{after_lapsed}
 RETURNING seq
)"""
# Opened after `lapsed` has closed the attempt whose lease lapsed: at most one open attempt
# per todo is a unique index, checked as each row goes in (migration 0017).
_AFTER_LAPSED = """
       AND (SELECT count(*) FROM lapsed) >= 0"""


# How a lapsed lease ends is decided in Python (queues/transitions/decide.py, Close.lapse()),
# on the failure budget the fast pick read (its row's ``failures``, ``max_attempts``), and
# applied here as parameters, guarded by the count it was decided on: a todo whose count
# moved since is not picked (the plan looks again). The fast claim never takes over a lapsed
# lease (such a pick comes back ``slow``), so it has no decision to apply.
_LAPSE_DECIDED = {
    "dies": "(t.state = 'claimed' AND %(lapse_dies)s::boolean)",
    "lapse_guard": "\n       AND (t.state <> 'claimed' OR t.failures = %(failures_seen)s::int)",
    "lapse_spends": "%(lapse_spends)s::int",
    "lapse_reason": "%(lapse_reason)s",
}
_NO_LAPSE = {"dies": "false", "lapse_guard": "", "lapse_spends": "0", "lapse_reason": "''"}


def claim_parts(
    pick_filter: str,
    lock_mode: str = "SKIP LOCKED",
    *,
    takeover: bool = False,
    waiting_too: bool = False,
    keyed: bool = False,
    freed: str = "0",
    passing: bool = False,
) -> tuple[str, str]:
    """A claim statement's common table expressions (``pick``, ``fresh``, ``moved``,
    ``opened`` and, with the takeover arms, ``newest``, ``lapsed``, ``pruned``, ``carried``)
    and its row (CLAIM_HEAD: ``ok``, ``slow``, the picked id and its failure budget; then
    the todo's columns), for one pick.

    By default the fast claim: the freshness check and the new attempt, and nothing else; a
    pick that needs more (a lapsed lease, history over the cap) comes back ``slow`` with
    nothing written. ``takeover=True`` adds the arms that close a lapsed attempt, prune and
    carry pruned counts. A close that claims next in the same statement
    (queues/sql/close.py, CLOSE_THEN_CLAIM_NEXT) puts these after its own. ``waiting_too``:
    a waiting todo may be picked as well (a person claims one instead of answering it; the
    trigger todos_wait_ended withdraws its question). ``keyed``: a todo whose key has
    ``%(max_per_key)s`` claimed (as this statement's snapshot shows it) is passed over; the
    trigger todos_waits_follow refuses a claim the snapshot missed.
    ``freed``: what the statement's own close frees of the candidate's key ``t.key`` (an
    SQL expression; the snapshot still counts it claimed). ``passing``: a pick of the best
    of many (claim_next's) passes over a candidate claimed since the statement's snapshot
    (switchboard_todo_unclaimed) rather than lock it in passing (_PASSING below)."""
    if takeover:
        arms = {
            "history_arms": _CLAIM_ATTEMPT_ARMS,
            "pruned_count": "(SELECT count(*) FROM pruned)",
            "opened": _CLAIM_OPENED.format(after_lapsed=_AFTER_LAPSED),
            **_LAPSE_DECIDED,
        }
    else:
        arms = {
            "history_arms": _CLAIM_FAST_ARMS,
            "pruned_count": "0",
            "opened": _CLAIM_OPENED.format(after_lapsed=""),
            **_NO_LAPSE,
        }
    claimable = f"t.state IN {LIVE}\n       AND {claimable_at('t')} <= statement_timestamp()"
    if waiting_too:
        claimable = f"(t.state = 'waiting' OR ({claimable}))"
    ctes = _CLAIM_CTES.format(
        claimable=claimable,
        key_filter=_key_filter(freed if keyed else None, passing),
        pick_filter=pick_filter,
        lock_mode=lock_mode,
        claimable_at=claimable_at("t"),
        **arms,
    )
    return ctes, _CLAIM_ROW.format(todo_cols=todo_columns("m", **NO_QUESTION))


# The key's claimed todos, counted for each keyed candidate by the partial index of claimed
# keyed todos (todos_key_claimed: a handful of entries a key, not the key's every todo).
_KEY_UNDER_LIMIT = """(t.key = '' OR (
            SELECT count(*) FROM todos c
             WHERE c.endpoint_id = t.endpoint_id AND c.key = t.key
               AND c.state = 'claimed' AND c.key <> '') - {freed}
            < %(max_per_key)s::int)"""


# A candidate that another transaction claimed (or closed for good) after this statement's
# snapshot is passed over: read with a snapshot of its own, its newest attempt is not the one
# the snapshot shows, or its state no longer live. ``FOR UPDATE`` would otherwise lock its
# newest version, find it no longer claimable and move on, holding that lock to this claim's
# commit, and the close of that todo by the agent that just claimed it would wait for it
# (docs/benchmarks.md, "A lock in passing"). A row a transaction still holds is unclaimed in a
# committed read, and SKIP LOCKED passes over it as before; one that moved between live states
# without a claim (a due retry requeued, a lapsed lease reaped) is locked and taken as before.
# Asked last, and of a keyed candidate only once its key is under the limit (a CASE fixes the
# order; by cost the planner put the PL/pgSQL call before the key's probe).
_PASSING = "switchboard_todo_unclaimed(t.id, t.last_attempt_seq)"


def _key_filter(freed: str | None, passing: bool) -> str:
    """The pick's last conditions: the key under its limit (``freed`` is not None: what the
    statement's own close frees of it) and the row unclaimed since the snapshot
    (``passing``)."""
    if freed is None:
        return f"\n       AND {_PASSING}" if passing else ""
    under = _KEY_UNDER_LIMIT.format(freed=freed)
    if not passing:
        return f"\n       AND {under}"
    return f"\n       AND CASE WHEN {under}\n                THEN {_PASSING} ELSE false END"


def _claim(
    name: str,
    pick_filter: str,
    lock_mode: str,
    why: str,
    *,
    takeover: bool = False,
    waiting_too: bool = False,
    keyed: bool = False,
    passing: bool = False,
) -> Statement:
    """The claim statement for one pick (``claim_parts``)."""
    ctes, row = claim_parts(
        pick_filter,
        lock_mode,
        takeover=takeover,
        waiting_too=waiting_too,
        keyed=keyed,
        passing=passing,
    )
    return Statement(name, f"\nWITH {ctes}{row}", why=why, prepare=True)


CLAIM_NEXT = _claim(
    "claim_next",
    SCOPE_ENDPOINT,
    "SKIP LOCKED",
    "the endpoint's best claimable todo; rows other claimers hold are skipped",
    passing=True,
)
# An endpoint with max_claimed_per_key: the same, passing over the todos of a key that has
# its most claimed (issue 44).
CLAIM_NEXT_KEYED = _claim(
    "claim_next_keyed",
    SCOPE_ENDPOINT,
    "SKIP LOCKED",
    "the endpoint's best claimable todo whose key is under its limit",
    keyed=True,
    passing=True,
)
CLAIM_NEXT_TAKEOVER = _claim(
    "claim_next_takeover",
    "t.id = %(todo_id)s AND " + SCOPE_ENDPOINT,
    "SKIP LOCKED",
    "the todo claim_next picked when it needs the takeover arms (a lapsed lease, history"
    " over the cap); skipped if another claimer has taken it since",
    takeover=True,
)
CLAIM_ONE_AGENT = _claim(
    "claim_one_agent",
    "t.id = %(todo_id)s AND " + SCOPE_ENDPOINT,
    "",
    "one todo of the agent's queue: waits for a concurrent claimer, then re-checks",
)
CLAIM_ONE_AGENT_TAKEOVER = _claim(
    "claim_one_agent_takeover",
    "t.id = %(todo_id)s AND " + SCOPE_ENDPOINT,
    "",
    "one todo of the agent's queue that needs the takeover arms (a lapsed lease, history over"
    " the cap)",
    takeover=True,
)
CLAIM_ONE_USER = _claim(
    "claim_one_user",
    "t.id = %(todo_id)s AND " + SCOPE_USER,
    "",
    "one todo of the person's teams' queues (a waiting one too), as an owner attempt",
    waiting_too=True,
)
CLAIM_ONE_USER_TAKEOVER = _claim(
    "claim_one_user_takeover",
    "t.id = %(todo_id)s AND " + SCOPE_USER,
    "",
    "one todo of the person's teams' queues that needs the takeover arms, as an owner attempt",
    takeover=True,
    waiting_too=True,
)
# The columns every claim row starts with, before the todo's.
CLAIM_HEAD = ("ok", "slow", "picked", "failures", "max_attempts")

# The prior attempts a claim hands back: the five newest closed ones, newest first, of those
# the cap keeps. Read by the claim's plan after the claim statement, and only when the todo
# keeps an attempt besides the one just opened (queues/transitions/claim.py): a first claim,
# the usual case, reads nothing more. The claim statement's snapshot could not see its own
# close of a lapsed attempt; this read does, so that attempt (lease_expired) comes first.
# The rows are the same as in the claim's transaction: closed attempts never change, and
# only a claim of this todo (which this lease excludes) prunes them; ``seq < %(seq)s``
# leaves out the claim's own attempt whatever happened to it since.
PRIOR_ATTEMPTS = Statement(
    "prior_attempts",
    f"""
SELECT {attempt_columns("a")}
  FROM (SELECT x.* FROM todo_attempts x
         WHERE x.todo_id = %(todo_id)s
           AND x.seq < %(seq)s AND x.seq > %(seq)s - %(history_cap)s
           AND x.ended_at IS NOT NULL
         ORDER BY x.seq DESC
         LIMIT 5) a
  {attempt_joins("a")}
 ORDER BY a.seq DESC
""",
    why="a claim's prior attempts with their claimers' names, by the (todo, seq) index",
    prepare=True,
)
