"""The ledger's words, as enums the database holds the tables to (the row rules, migration
0021): a todo's states, an attempt's outcomes and dispositions, who holds an attempt, and
what an audit row records."""

from __future__ import annotations

from django.db import models

# What ``queues.models`` re-exports of this module (``from … import *``): the words are
# listed here, beside what they name, and nowhere else.
__all__ = [
    "TodoState",
    "WaitingFor",
    "AfterPolicy",
    "Outcome",
    "Disposition",
    "DeadLetterReason",
    "QuestionEnding",
    "OnNoAnswer",
    "ClaimerKind",
    "EventKind",
    "LIVE_STATES",
    "TERMINAL_STATES",
    "OPEN_STATES",
    "UNCLAIMED_STATES",
    "DIED_OUTCOMES",
    "LAPSED_OUTCOMES",
]


class TodoState(models.TextChoices):
    PENDING = "pending"
    CLAIMED = "claimed"
    RETRY_WAIT = "retry_wait"
    DONE = "done"
    DEAD = "dead"
    CANCELED = "canceled"
    # Not claimable and not reaped until what it waits for comes (``waiting_for``: a person's
    # answer to its agent's question; queues/transitions/ask.py).
    WAITING = "waiting"


# The states a claim may pick from (the claimable index's predicate): a waiting todo is in
# none of them until its wait ends.
LIVE_STATES = (TodoState.PENDING, TodoState.CLAIMED, TodoState.RETRY_WAIT)
TERMINAL_STATES = (TodoState.DONE, TodoState.DEAD, TodoState.CANCELED)
# Not ended: the live states and the waiting one (what a revocation kills, what retention
# never deletes).
OPEN_STATES = (*LIVE_STATES, TodoState.WAITING)
# Not ended and nobody holds it: what a cancel ends at once, and a revocation kills.
UNCLAIMED_STATES = (TodoState.PENDING, TodoState.RETRY_WAIT, TodoState.WAITING)


class WaitingFor(models.TextChoices):
    """What a waiting todo waits for."""

    PEOPLE = "people"  # an answer to its agent's question
    TODOS = "todos"  # the todos it was made ``after`` (queues/transitions/waits.py)
    CHILDREN = "children"  # its children, to end (a release with ``wait_for_children``)


class AfterPolicy(models.TextChoices):
    """When a todo made ``after`` others may start."""

    ALL_DONE = "all_done"  # each of them done; one dead or canceled kills it
    ANY_END = "any_end"  # each of them ended, however


class Outcome(models.TextChoices):
    COMPLETED = "completed"
    FAILED = "failed"
    RELEASED = "released"
    LEASE_EXPIRED = "lease_expired"
    REAPED = "reaped"
    CANCELED = "canceled"
    REVOKED = "revoked"
    # A person took the lease over from the Board: the agent's try ended, the todo stayed
    # claimed, now by that person (queues/transitions/by_hand.py, take_over).
    TAKEN_OVER = "taken_over"
    # The holder asked a question and gave the todo to people to answer (no try spent).
    ASKED = "asked"


DIED_OUTCOMES = (Outcome.LEASE_EXPIRED, Outcome.REAPED)
# How a person's own claim ends without that person's doing (their actions end it completed,
# failed, released or canceled, each told by their event): the Activity feed tells these.
LAPSED_OUTCOMES = (Outcome.LEASE_EXPIRED, Outcome.REAPED, Outcome.REVOKED)


class Disposition(models.TextChoices):
    DONE = "done"
    RETRY_SCHEDULED = "retry_scheduled"
    REQUEUED = "requeued"
    DEAD_LETTERED = "dead_lettered"
    CANCELED = "canceled"
    TAKEN_OVER = "taken_over"  # the todo stayed claimed, by the person who took it over
    WAITING = "waiting"  # the todo waits (for an answer to its question)


class DeadLetterReason(models.TextChoices):
    """Why a todo is a dead letter: the outcome of the attempt that killed it, or what a
    wait came to when no attempt was open."""

    FAILED = "failed"
    REAPED = "reaped"
    LEASE_EXPIRED = "lease_expired"
    REVOKED = "revoked"
    UNANSWERED = "unanswered"  # its question had no answer in time (on_no_answer: dead_letter)
    AFTER_ENDED = "after_ended"  # a todo it waited for (``after``) ended dead or canceled


class QuestionEnding(models.TextChoices):
    """How a question stopped waiting."""

    ANSWERED = "answered"
    UNANSWERED = "unanswered"  # its time ran out
    WITHDRAWN = "withdrawn"  # the todo left the wait otherwise (claimed by a person, canceled,
    # its endpoint revoked)


class OnNoAnswer(models.TextChoices):
    REQUEUE = "requeue"  # back to the queue, the question marked unanswered
    DEAD_LETTER = "dead_letter"


class ClaimerKind(models.TextChoices):
    """Who holds an attempt: an agent, or a person from the Board. A person's claim is stored
    as ``owner`` (the records' word, and the API's) but named PERSON here, apart from a team's
    owner (Membership.Role.OWNER) and the lease label on the todo (``Todo.owner``)."""

    ENDPOINT = "endpoint"
    PERSON = "owner"


class EventKind(models.TextChoices):
    """What an audit row (``todo_events``) records. Written by queues/audit.py only; the
    Board's Activity turns each into words by this enum (board/sentences.py)."""

    # A person's actions on a todo (and a requester's cancel).
    CREATE = "create"
    CLAIM = "claim"
    EXTEND = "extend"
    RELEASE = "release"
    COMPLETE = "complete"
    FAIL = "fail"
    CANCEL = "cancel"
    RETRY_NOW = "retry_now"
    RERUN = "rerun"
    # A person took a todo from the agent holding it (queues/transitions/by_hand.py).
    TAKE_OVER = "take_over"
    # A question answered (by a person, or the requester's endpoint), or left unanswered in
    # its time (the sweeper: no actor).
    ANSWER = "answer"
    UNANSWERED = "unanswered"
    # A todo dead-lettered with no open attempt because its endpoint was revoked.
    REVOKE_DEAD_LETTER = "revoke_dead_letter"
    # A person ended a todo's wait for other todos or its children (started it now), and a
    # parent's cancel that canceled its unfinished children (one row per child).
    START_NOW = "start_now"
    CANCEL_CHILD = "cancel_child"
    # Schedules (of an endpoint; team-level rows, no todo).
    SCHEDULE_ADD = "schedule_add"
    SCHEDULE_EDIT = "schedule_edit"
    SCHEDULE_PAUSE = "schedule_pause"
    SCHEDULE_RESUME = "schedule_resume"
    SCHEDULE_REMOVE = "schedule_remove"
    # Endpoints (team-level rows, no todo).
    ENDPOINT_VEND = "vend"
    ENDPOINT_ROTATE = "rotate"
    ENDPOINT_REVOKE = "endpoint_revoke"
    NOTIFY_URL = "notify_url"
    NOTIFY_SECRET_ROTATE = "notify_secret_rotate"
    ENDPOINT_PAUSE = "pause"
    ENDPOINT_RESUME = "resume"
    ENDPOINT_LIMITS = "limits"  # max_claimed, max_claimed_per_key set or cleared
    # Teams: members, invitations, dead-letter sinks.
    MEMBER_ADD = "member_add"
    MEMBER_REMOVE = "member_remove"
    MEMBER_INVITE = "member_invite"
    INVITE_ACCEPT = "invite_accept"
    INVITE_DECLINE = "invite_decline"
    INVITE_REVOKE = "invite_revoke"
    SINK_ADD = "sink_add"
    SINK_ACTIVATE = "sink_activate"
    SINK_DEACTIVATE = "sink_deactivate"
    SINK_REMOVE = "sink_remove"


# The Board's search (issue 15): PostgreSQL's built-in full-text search with the 'simple'
# configuration (words lowercased, no stemming and no stop words, so it reads any language the
# same way). A todo's title and body are in TodoSearchDocument (made by a trigger,
# todo_search_document_on_insert, with SearchVector("title", "body", config="simple")'s
# expression); an attempt's summary words are stored on its row
# (TodoAttempt.summary_document: to_tsvector('simple', summary), written with the summary and
# held to it by the row's CHECK, todo_attempts_valid), which the summaries' GIN index is built
# on and the Board's search (queues.selectors) matches against, so the two cannot drift apart.
# Both functions are in queues/schema/functions.sql.
# Only attempts that wrote a summary have words, and only they are in the summary index: a
# claim (an insert, no summary) and a close that reports none never touch it.
