"""The Activity feed's two reads (queues.selectors.board_activity, the Activity page and every
queue page's ticker): the attempts that ended and the audited actions of the teams' queues,
newest first, each row with the few names its sentence uses (board/sentences.py).

Why raw SQL: the ticker runs on every queue page, and the ORM spent 5 ms of each building and
compiling the two reads and their model rows, more than PostgreSQL took to plan and run them
(10 ms against 5 for the same rows; docs/benchmarks.md). Each filter is a ``%(x)s IS NULL OR``
arm: these are not prepared, so each runs on a custom plan, where PostgreSQL folds an absent
filter's arm away before it picks an index (the same plans as one query per filter set).

- ``ACTIVITY_ENDINGS`` walks ``todo_attempts_ended_recent`` newest first, the todo and its
  endpoint joined for the team and the title. An attempt a person or a requester ended is
  told by their event (it names who), and a person's own claim that the person ended too,
  so those are left out.
- ``ACTIVITY_EVENTS`` walks each team's ``todo_events_team_recent`` in turn (a LATERAL per
  team id: one walk of an IN over several teams cannot be in order, and PostgreSQL joined
  and sorted all of the teams' events, 54 ms over 3,000 of them), each stopping at the limit.
"""

from __future__ import annotations

from queues.db import Statement

__all__ = ["ACTIVITY_ENDINGS", "ACTIVITY_EVENTS"]

ACTIVITY_ENDINGS = Statement(
    "activity_endings",
    """
SELECT a.todo_id, a.attempt, a.round, a.claimant, a.outcome, a.disposition, a.claimed_at,
       a.last_heartbeat_at, a.ended_at, ae.agent_id, au.username, t.title, te.agent_id
  FROM todo_attempts a
  JOIN todos t ON t.id = a.todo_id
  JOIN endpoints te ON te.id = t.endpoint_id
  LEFT JOIN endpoints ae ON ae.id = a.endpoint_id
  LEFT JOIN auth_user au ON au.id = a.user_id
 WHERE a.ended_at IS NOT NULL AND a.ended_by_id IS NULL AND a.ended_by_endpoint_id IS NULL
   AND NOT (a.claimer_kind = 'owner' AND a.outcome = ANY(%(told_by_person)s::text[]))
   AND te.team_id = ANY(%(team_ids)s::bigint[])
   AND (%(before)s::timestamptz IS NULL OR a.ended_at < %(before)s::timestamptz)
   AND (%(todo_id)s::bigint IS NULL OR a.todo_id = %(todo_id)s::bigint)
   AND (%(endpoint_id)s::bigint IS NULL OR t.endpoint_id = %(endpoint_id)s::bigint)
   AND (%(person_id)s::bigint IS NULL
        OR (a.claimer_kind = 'owner' AND a.user_id = %(person_id)s::bigint))
 ORDER BY a.ended_at DESC
 LIMIT %(limit)s
""",
    why="the feed's endings with their names, each filter an arm a custom plan folds away",
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
              au.username, ae.agent_id AS actor_agent
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
        ORDER BY ev.created_at DESC
        LIMIT %(limit)s) e
""",
    why="each team's newest events in turn (a LATERAL per team), with the actors' names",
)
