"""Endpoints' tokens, admission limits and the sign-in throttle.

Why raw SQL: every agent request starts with the token lookup, so it is one prepared statement
rather than an ORM query compiled per request (docs/benchmarks.md, "The token lookup as one
prepared statement"); admission and the throttle are upserts whose new values depend on the
old row (a window that may be over), returning what the caller decides on, in one round trip.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.models import Endpoint

ENDPOINT_FIELDS = [f.attname for f in Endpoint._meta.concrete_fields]

ENDPOINT_BY_TOKEN = Statement(
    "endpoint_by_token",
    f"SELECT {', '.join(ENDPOINT_FIELDS)} FROM endpoints WHERE token_hash = %(token_hash)s",
    why="the hottest read there is: one prepared statement by the token's digest",
    prepare=True,
)
# Also says whether the endpoint is paused now: a waiter of a paused endpoint keeps waiting,
# and claims once it wakes to find it resumed.
ENDPOINT_STILL_VALID = Statement(
    "endpoint_still_valid",
    "SELECT paused_at FROM endpoints WHERE id = %(id)s AND token_hash = %(token_hash)s"
    " AND revoked_at IS NULL",
    why="a long-poll's re-check when it wakes, as cheap as the lookup itself",
    prepare=True,
)
# An endpoint changed (any column but the admission window; the trigger is
# switchboard_endpoint_changed, queues/schema/functions.sql): its id, or "*" when the table was
# truncated. The process's LISTEN connection (queues/notify) hears it for the token cache.
ENDPOINT_CHANNEL = "switchboard_endpoint"
LISTEN_ENDPOINTS = Statement(
    "listen_endpoints",
    f"LISTEN {ENDPOINT_CHANNEL}",
    why="LISTEN, on the process's LISTEN connection (queues/notify), for agents/token_cache.py",
)
# The LISTEN connection's proof that it hears: each ping says a fresh nonce on this channel
# from another session, and the token cache is trusted only while the nonce comes back (a
# connection through a transaction pooler answers queries but hears nothing).
PING_CHANNEL = "switchboard_ping"
LISTEN_PING = Statement(
    "listen_ping",
    f"LISTEN {PING_CHANNEL}",
    why="LISTEN, on the process's LISTEN connection (queues/notify/listener.py)",
)
PING_SELF = Statement(
    "ping_self",
    f"SELECT pg_notify('{PING_CHANNEL}', %(nonce)s)",
    why="pg_notify to the process's LISTEN connection: the ping it must hear back",
)
LIVE_ENDPOINT_IN_TEAM = Statement(
    "live_endpoint_in_team",
    f"SELECT {', '.join(ENDPOINT_FIELDS)} FROM endpoints"
    " WHERE team_id = %(team_id)s AND agent_id = %(agent_id)s AND revoked_at IS NULL",
    why="create_todo's `to`: the same row shape as the token lookup, on the async path too",
)

# ---------------------------------------------------------------------------------------
# Admission (SWITCHBOARD_CLAIMS_PER_MINUTE): a fixed one-minute window per endpoint. Open
# locks the endpoint row, starts a new window when the last one is over, and returns the
# claims already made in it and the seconds until it ends; charge adds the claim just made.
# Both run in the claim's transaction, so a refused or failed claim writes nothing.

ADMISSION_OPEN = Statement(
    "admission_open",
    """
WITH cur AS (
    SELECT e.id, (e.admission_window_at IS NULL
                  OR e.admission_window_at <= statement_timestamp() - interval '60 seconds') AS fresh
      FROM endpoints e
     WHERE e.id = %(endpoint_id)s
       FOR UPDATE
)
UPDATE endpoints e
   SET admission_window_at = CASE WHEN cur.fresh THEN statement_timestamp()
                                  ELSE e.admission_window_at END,
       admission_claims = CASE WHEN cur.fresh THEN 0 ELSE e.admission_claims END
  FROM cur
 WHERE e.id = cur.id
RETURNING e.admission_claims,
          extract(epoch FROM e.admission_window_at + interval '60 seconds'
                             - statement_timestamp())::float8
""",
    why="lock, maybe reset, and read a window in one statement",
)

ADMISSION_CHARGE = Statement(
    "admission_charge",
    """
UPDATE endpoints SET admission_claims = admission_claims + 1 WHERE id = %(endpoint_id)s
RETURNING admission_claims
""",
    why="an increment in the database (no read-modify-write race)",
)

# ---------------------------------------------------------------------------------------
# The sign-in throttle (queues/signin_throttle.py): sign-ins counted per key in a fixed
# window, charged before the password is checked.

# One more sign-in for each key: a new window when there is none or the last one is over,
# else the count + 1. Keys in sorted order, so two charges lock shared rows in one order.
SIGNIN_CHARGE = Statement(
    "signin_charge",
    """
INSERT INTO sign_in_throttles AS s (key, window_started_at, failures)
SELECT k, statement_timestamp(), 1 FROM unnest(%(keys)s::text[]) AS k ORDER BY k
ON CONFLICT (key) DO UPDATE
   SET window_started_at = CASE
           WHEN s.window_started_at <= statement_timestamp() - make_interval(secs => %(window)s)
           THEN statement_timestamp() ELSE s.window_started_at END,
       failures = CASE
           WHEN s.window_started_at <= statement_timestamp() - make_interval(secs => %(window)s)
           THEN 1 ELSE s.failures + 1 END
RETURNING s.key, s.failures,
          extract(epoch FROM s.window_started_at + make_interval(secs => %(window)s)
                             - statement_timestamp())::float8
""",
    why="an upsert whose update depends on the row's old window (bulk_create can only copy)",
)

# Forget a few windows that are over (oldest first), skipping rows a charge holds. Run in a
# statement of its own after a charge that opened a window, so it never holds a lock the
# charge needs: the table stays as small as the keys seen in one window.
SIGNIN_PRUNE = Statement(
    "signin_prune",
    """
DELETE FROM sign_in_throttles
 WHERE key IN (SELECT key FROM sign_in_throttles
                WHERE window_started_at <= statement_timestamp() - make_interval(secs => %(window)s)
                ORDER BY window_started_at
                LIMIT %(batch)s
                  FOR UPDATE SKIP LOCKED)
RETURNING key
""",
    why="a DELETE of an ordered, limited, SKIP LOCKED pick (the ORM refuses a sliced delete)",
)
