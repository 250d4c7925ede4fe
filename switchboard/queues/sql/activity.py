"""The Activity feed's two reads (queues.selectors.board_activity, the Activity page and every
queue page's ticker): the attempts that ended and the audited actions of the teams' queues,
newest first, each row with the few names its sentence uses (board/sentences.py).

Why raw SQL: the ticker runs on every queue page, and the ORM spent more of each building and
compiling the two reads and their model rows than PostgreSQL took to plan and run them
(docs/benchmarks.md, "Issue 15, a third pass"). Each filter is a ``%(x)s IS NULL OR``
arm: these are not prepared, so each runs on a custom plan, where PostgreSQL folds an absent
filter's arm away before it picks an index (the same plans as one query per filter set). The
kind filter (Activity's "Failures", "Deaths", "People's acts") is three of them: the tries'
outcomes (``outcomes``; the endpoint index carries the outcome, so the walk filters on the
index), whether endings are read at all (``endings``), and events (``events``, a person's
only with ``people_only``).

- ``ACTIVITY_ENDINGS`` walks each of the teams' endpoints' ``todo_attempts_endpoint_ended``
  newest first (a LATERAL per endpoint, each stopping at the limit), and people's own claims
  that lapsed on ``todo_attempts_owner_lapsed`` (few: a person's own actions are told by
  their events); then the newest of those. It once walked the global
  ``todo_attempts_ended_recent``, through every other team's endings: a small team's queue
  page and Activity cost a big team's volume, not its own (docs/benchmarks.md, "The second
  hardening round"). An attempt a person or a requester ended is told by their event (it
  names who), and a person's own claim that the person ended too, so those are left out.
- ``ACTIVITY_EVENTS`` walks each team's ``todo_events_team_recent`` in turn (a LATERAL per
  team id: one walk of an IN over several teams cannot be in order, and PostgreSQL joined
  and sorted all of the teams' events: docs/benchmarks.md, "Issue 15: triage, search and the
  endpoint page"), each stopping at the limit.
"""

from __future__ import annotations

from switchboard.queues.db.plans import Statement
from switchboard.queues.models import LAPSED_OUTCOMES

__all__ = ["ACTIVITY", "ACTIVITY_ENDINGS", "ACTIVITY_EVENTS"]

# Fixed strings of this package, formatted in once: the outcomes of todo_attempts_owner_lapsed.
_LAPSED = ", ".join(f"'{outcome.value}'" for outcome in LAPSED_OUTCOMES)

ACTIVITY_ENDINGS = Statement(
    "activity_endings",
    """
WITH ended AS (
    -- Each endpoint of the teams walks its own endings (todo_attempts_endpoint_ended), newest
    -- first, stopping at the limit: another team's volume is never read.
    SELECT w.* FROM endpoints ep
     CROSS JOIN LATERAL (
           SELECT a.id FROM todo_attempts a
            WHERE a.ended_at IS NOT NULL
              -- "this endpoint, ended before the page" as one range of
              -- todo_attempts_endpoint_ended walked backwards from (endpoint, before) to the
              -- endpoint's first entry, in the order only that index gives: with an equality
              -- on endpoint_id the planner may walk the global todo_attempts_ended_recent
              -- instead, filtering by endpoint (as queues/sql/health.py found).
              AND (a.endpoint_id, a.ended_at)
                  < (ep.id, COALESCE(%(before)s::timestamptz, 'infinity'::timestamptz))
              AND a.endpoint_id >= ep.id
              AND a.ended_by_id IS NULL AND a.ended_by_endpoint_id IS NULL
              AND (%(todo_id)s::bigint IS NULL OR a.todo_id = %(todo_id)s::bigint)
              AND (%(outcomes)s::text[] IS NULL OR a.outcome = ANY(%(outcomes)s::text[]))
            ORDER BY a.endpoint_id DESC, a.ended_at DESC
            LIMIT %(limit)s) w
     WHERE ep.team_id = ANY(%(team_ids)s::bigint[])
       AND (%(endpoint_id)s::bigint IS NULL OR ep.id = %(endpoint_id)s::bigint)
       AND %(person_id)s::bigint IS NULL
       AND %(endings)s::bool
    UNION ALL
    -- People's own claims (no endpoint) that lapsed: few, walked on their own partial index
    -- (the same predicate as todo_attempts_owner_lapsed's, so the planner may use it).
    SELECT o.id FROM (
           SELECT a.id FROM todo_attempts a
             JOIN todos t ON t.id = a.todo_id
             JOIN endpoints te ON te.id = t.endpoint_id
            WHERE a.claimer_kind = 'owner' AND a.ended_at IS NOT NULL
              AND a.ended_by_id IS NULL AND a.ended_by_endpoint_id IS NULL
              AND a.outcome IN ({lapsed})
              AND te.team_id = ANY(%(team_ids)s::bigint[])
              AND (%(before)s::timestamptz IS NULL OR a.ended_at < %(before)s::timestamptz)
              AND (%(todo_id)s::bigint IS NULL OR a.todo_id = %(todo_id)s::bigint)
              AND (%(endpoint_id)s::bigint IS NULL OR t.endpoint_id = %(endpoint_id)s::bigint)
              AND (%(person_id)s::bigint IS NULL OR a.user_id = %(person_id)s::bigint)
              AND (%(outcomes)s::text[] IS NULL OR a.outcome = ANY(%(outcomes)s::text[]))
              AND %(endings)s::bool
            ORDER BY a.ended_at DESC
            LIMIT %(limit)s) o
)
SELECT a.todo_id, a.attempt, a.round, a.claimant, a.outcome, a.disposition, a.claimed_at,
       a.last_heartbeat_at, a.ended_at, ae.agent_id, au.username, t.title, te.agent_id,
       te.team_id
  FROM ended
  JOIN todo_attempts a ON a.id = ended.id
  JOIN todos t ON t.id = a.todo_id
  JOIN endpoints te ON te.id = t.endpoint_id
  LEFT JOIN endpoints ae ON ae.id = a.endpoint_id
  LEFT JOIN auth_user au ON au.id = a.user_id
 WHERE te.team_id = ANY(%(team_ids)s::bigint[])
   AND (%(endpoint_id)s::bigint IS NULL OR t.endpoint_id = %(endpoint_id)s::bigint)
 ORDER BY a.ended_at DESC
 LIMIT %(limit)s
""".replace("{lapsed}", _LAPSED),
    why="each endpoint's newest endings in turn (a LATERAL per endpoint), people's own beside",
)

# An endpoint's events are those of its todos and its own team-level ones (vend, rotate,
# revoke, notify URL: no todo, the agent id in the detail).
ACTIVITY_EVENTS = Statement(
    "activity_events",
    """
SELECT e.*
  FROM unnest(%(team_ids)s::bigint[]) AS tm(id)
 CROSS JOIN LATERAL (
       SELECT ev.todo_id, ev.kind, ev.detail, ev.created_at, t.title, te.agent_id,
              au.username, ae.agent_id AS actor_agent, ev.team_id
         FROM todo_events ev
         LEFT JOIN todos t ON t.id = ev.todo_id
         LEFT JOIN endpoints te ON te.id = t.endpoint_id
         LEFT JOIN auth_user au ON au.id = ev.actor_user_id
         LEFT JOIN endpoints ae ON ae.id = ev.actor_endpoint_id
        WHERE ev.team_id = tm.id
          AND (%(before)s::timestamptz IS NULL OR ev.created_at < %(before)s::timestamptz)
          AND (%(todo_id)s::bigint IS NULL OR ev.todo_id = %(todo_id)s::bigint)
          AND (%(endpoint_id)s::bigint IS NULL
               OR t.endpoint_id = %(endpoint_id)s::bigint
               OR (ev.todo_id IS NULL AND ev.team_id = %(endpoint_team)s::bigint
                   AND ev.detail ->> 'agent_id' = %(endpoint_agent)s::text))
          AND (%(person_id)s::bigint IS NULL OR ev.actor_user_id = %(person_id)s::bigint)
          AND %(events)s::bool
          AND (NOT %(people_only)s::bool OR ev.actor_user_id IS NOT NULL)
        ORDER BY ev.created_at DESC
        LIMIT %(limit)s) e
""",
    why="each team's newest events in turn (a LATERAL per team), with the actors' names",
)

# The feed as one statement: the two reads above side by side, newest first. A row is
# ``part`` (1 an ending, 2 an event), its time, then the ending's columns or the event's, the
# other's NULL. What a reader of the feed runs (queues.selectors.board_activity); the two
# above are its parts, each with its plan checked (tests/board/test_activity.py).
ENDING_WIDTH = 14  # the endings' columns (the events' are the rest)
ACTIVITY_WIDTH = 2 + ENDING_WIDTH + 9  # part, at, an ending's columns, an event's
_NO_ENDING = (
    "NULL::bigint, NULL::int, NULL::int, NULL::text, NULL::text, NULL::text, "
    "NULL::timestamptz, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, "
    "NULL::text, NULL::text, NULL::bigint"
)
_NO_EVENT = (
    "NULL::bigint, NULL::text, NULL::jsonb, NULL::timestamptz, NULL::text, NULL::text, "
    "NULL::text, NULL::text, NULL::bigint"
)
ACTIVITY = Statement(
    "activity",
    f"""
SELECT 1 AS part, n.ended_at AS at, n.*, {_NO_EVENT}
  FROM ({ACTIVITY_ENDINGS.text}) AS n
UNION ALL
SELECT 2, v.created_at, {_NO_ENDING}, v.*
  FROM ({ACTIVITY_EVENTS.text}) AS v
 ORDER BY 2 DESC
 LIMIT %(limit)s
""",
    why="the endings' and the events' reads side by side in one round trip, newest first",
)
