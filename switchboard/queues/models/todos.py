"""Todos, their attempts, their search documents and the audit trail. Every change of a
todo's ``state`` goes through ``queues.transitions``; these classes define the schema and
the database-enforced invariants."""

from __future__ import annotations

from typing import Protocol

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce, Now

from switchboard.queues.models.endpoints import Endpoint
from switchboard.queues.models.fields import reference
from switchboard.queues.models.states import (
    DIED_OUTCOMES,
    LAPSED_OUTCOMES,
    AfterPolicy,
    ClaimerKind,
    DeadLetterReason,
    Disposition,
    EventKind,
    OnNoAnswer,
    Outcome,
    QuestionEnding,
    TodoState,
    WaitingFor,
)
from switchboard.queues.models.teams import Team

SUMMARY_SEARCHABLE = Q(summary__gt="")
# Where a todo stands, as a row of it shows first (the Board's queue, the admin's list and
# page): its state, its priority and its counters.
STANDING = ("state", "priority", "attempt", "failures", "max_attempts", "round")


def row_rules(function: str, *columns: str) -> models.Func:
    """A table's row rules as one boolean call of its PL/pgSQL function (the functions are in
    queues/schema/functions.sql, migration 0021 says why; tests/queues/test_row_rules.py holds
    them to the enums)."""
    return models.Func(*columns, function=function, output_field=models.BooleanField())


# When a live todo is (or becomes) claimable: the ordering key of the claimable index and of
# the sweeper's. An expression of those two indexes (and of the statements that read through
# them, queues.sql.claimable_at), not a stored generated column: PostgreSQL reads a generated
# column's expression back from its text and plans it again on every statement that writes
# the row (every claim, heartbeat and close), where an index keeps its expressions planned in
# its cache and computes them only for rows in its predicate (a done todo's close: none).
CLAIMABLE_AT = models.Case(
    models.When(state=TodoState.CLAIMED, then="lease_expires_at"),
    models.When(state=TodoState.RETRY_WAIT, then="next_retry_at"),
    models.When(state=TodoState.PENDING, then=Coalesce("not_before", "created_at")),
    default=None,
    output_field=models.DateTimeField(null=True),
)


class TodoQuerySet(models.QuerySet):
    def with_claimable_at(self) -> TodoQuerySet:
        """``claimable_at`` to filter and order by (CLAIMABLE_AT), without selecting it."""
        return self.alias(claimable_at=CLAIMABLE_AT)

    def visible_to(self, user) -> TodoQuerySet:
        return self.filter(endpoint__team__memberships__user=user)


class _Counted(Protocol):
    @property
    def state(self) -> str: ...
    @property
    def last_attempt_seq(self) -> int: ...
    @property
    def attempts_pruned(self) -> int: ...


class TodoTotals:
    """What a todo's state and counters say that no column does, the same for the model and
    for the ledger's record (queues.records.TodoRecord): a mixin of both, with no fields."""

    __slots__ = ()

    @property
    def dead_letter(self: _Counted) -> bool:
        return self.state == TodoState.DEAD

    @property
    def attempts_total(self: _Counted) -> int:
        return self.last_attempt_seq - self.attempts_pruned


class Todo(TodoTotals, models.Model):
    """One unit of work on one endpoint's queue, with its lease and counters."""

    # No index of its own: the composite indexes below all lead with endpoint.
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, related_name="todos", db_index=False
    )
    # An agent-to-agent send records the sending endpoint; a Board create records the user.
    # Partial indexes below (most todos have neither).
    requester = reference(Endpoint, index=False, related_name="sent_todos")
    created_by = reference(settings.AUTH_USER_MODEL, index=False, related_name=None)
    title = models.CharField(max_length=500)
    body = models.TextField(blank=True)
    priority = models.SmallIntegerField(default=0)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)

    state = models.CharField(max_length=16, choices=TodoState, default=TodoState.PENDING)
    max_attempts = models.SmallIntegerField()  # >= 1 (todos_valid, below)
    # Claims in the current round (reset by a rerun; the record's `attempt` counter).
    attempt = models.IntegerField(default=0)
    # Attempts of this round that ended failed, reaped or lease_expired; the cap compares this.
    failures = models.IntegerField(default=0)
    round = models.IntegerField(default=1)
    # seq of the newest attempt (the open one while claimed); seqs are never reused.
    last_attempt_seq = models.IntegerField(default=0)
    # Rows deleted by the per-todo history cap. Kept rows are exactly seq in
    # (attempts_pruned, last_attempt_seq], so attempts_total needs no count query.
    attempts_pruned = models.IntegerField(default=0)

    not_before = models.DateTimeField(null=True, blank=True)
    next_retry_at = models.DateTimeField(null=True, blank=True)
    # The live lease. While an attempt is open, these are its live values; the attempt row
    # receives their last values when it closes, so a heartbeat writes one row, not two.
    owner = models.CharField(max_length=200, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)

    result = models.JSONField(null=True, blank=True)
    dead_letter_reason = models.CharField(max_length=16, choices=DeadLetterReason, blank=True)
    # What a waiting todo waits for ('' unless waiting): set by the close that starts the
    # wait, cleared with it (the trigger todos_wait_ended, queues/schema/functions.sql).
    waiting_for = models.CharField(max_length=16, choices=WaitingFor, blank=True, db_default="")
    # Made ``after`` other todos (queues/models/waits.py, TodoAfter): when it may start, and
    # how many of them it still waits for (counted down by the trigger todos_waits_follow).
    after_policy = models.CharField(
        max_length=16, choices=AfterPolicy, db_default=AfterPolicy.ALL_DONE
    )
    after_total = models.IntegerField(db_default=0)
    after_left = models.IntegerField(db_default=0)
    # Some todo was made after this one: its end is counted (the trigger todos_waits_follow
    # fires only for such a todo, so an ordinary close pays nothing for it).
    has_dependents = models.BooleanField(db_default=False)
    # How many A2A push-notification configs it has (TaskPushConfig): its state changes are
    # pushed through the outbox (the trigger todos_outbox_task_push fires only for such a todo).
    push_configs = models.IntegerField(db_default=0)
    # A child of the todo its holder split (``parent``); a parent counts its children, and
    # those not ended yet (kept by the trigger todos_waits_follow).
    parent = reference("self", index=False, related_name="children")
    children_total = models.IntegerField(db_default=0)
    children_open = models.IntegerField(db_default=0)
    # A key the endpoint's limits count claimed todos by (max_claimed_per_key), and that
    # unique_while_active keeps to one open todo; '' for none.
    key = models.CharField(max_length=200, blank=True, db_default="")
    # Made by a schedule, for this slot (one todo per slot, however many sweepers).
    schedule = reference("Schedule", index=False, related_name="todos")
    scheduled_for = models.DateTimeField(null=True, blank=True)
    # The database's clock, like every lease time: claimability compares against now().
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    ended_at = models.DateTimeField(null=True, blank=True)

    objects = TodoQuerySet.as_manager()

    class Meta:
        db_table = "todos"
        constraints = [
            # Every rule of a todo row (its state's values, the counters' ranges, a claimed
            # todo has a lease, a retry a time, only an ended todo an end, a dead one a
            # reason) in one CHECK calling one PL/pgSQL function: PostgreSQL reads and plans a
            # table's CHECKs again on every statement that writes it (docs/benchmarks.md,
            # "Instructions per todo"; the function is in queues/schema/functions.sql).
            models.CheckConstraint(
                condition=row_rules(
                    "todos_valid",
                    "state",
                    "priority",
                    "max_attempts",
                    "attempt",
                    "failures",
                    "round",
                    "attempts_pruned",
                    "lease_expires_at",
                    "next_retry_at",
                    "ended_at",
                    "dead_letter_reason",
                ),
                name="todos_valid",
            ),
            # Keyed by sender too (a requester endpoint, or none): a sender only ever gets
            # back a todo it made. NULLS NOT DISTINCT: the endpoint's own todos share one
            # key space.
            # One todo per schedule slot: a second sweeper's insert loses.
            models.UniqueConstraint(
                fields=["schedule", "scheduled_for"],
                condition=Q(schedule__isnull=False),
                name="todos_schedule_slot",
            ),
            models.UniqueConstraint(
                fields=["endpoint", "requester", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                nulls_distinct=False,
                name="todos_idempotency_key_unique",
            ),
        ]
        indexes = [
            # The claimable set: claim_next walks this in priority order; rows that are
            # not yet claimable are skipped on the index tuple, without a heap visit.
            models.Index(
                models.F("endpoint"),
                models.F("priority").desc(),
                CLAIMABLE_AT,
                models.F("id"),
                name="todos_claimable",
                condition=Q(state__in=["pending", "retry_wait", "claimed"]),
            ),
            # The sweeper: lapsed leases and due retries across all endpoints.
            models.Index(
                models.F("state"),
                CLAIMABLE_AT,
                name="todos_sweep_due",
                condition=Q(state__in=["claimed", "retry_wait"]),
            ),
            # Retention by age and by per-endpoint cap.
            models.Index(
                "endpoint",
                "ended_at",
                name="todos_terminal",
                condition=Q(state__in=["done", "dead", "canceled"]),
            ),
            models.Index(
                "ended_at",
                name="todos_terminal_age",
                condition=Q(state__in=["done", "dead", "canceled"]),
            ),
            # list_todos: newest first, optionally by state.
            models.Index("endpoint", models.F("id").desc(), name="todos_endpoint_list"),
            models.Index("endpoint", "state", models.F("id").desc(), name="todos_endpoint_state"),
            # For ON DELETE SET NULL and "what did I send"; most todos have neither.
            models.Index("requester", name="todos_requester", condition=Q(requester__isnull=False)),
            models.Index(
                "created_by", name="todos_created_by", condition=Q(created_by__isnull=False)
            ),
            # A parent's children; a key's open todos (unique_while_active, the queue's
            # filter by key).
            models.Index("parent", name="todos_parent", condition=Q(parent__isnull=False)),
            models.Index("endpoint", "key", name="todos_key", condition=~Q(key="")),
            # A key's claimed todos, counted by a keyed claim under max_claimed_per_key (the
            # trigger todos_waits_follow, the pick's probe): one entry a claim.
            models.Index(
                "endpoint",
                "key",
                name="todos_key_claimed",
                condition=Q(state="claimed") & ~Q(key=""),
            ),
        ]

    def __str__(self) -> str:
        return f"todo #{self.pk}"


class TodoSearchDocument(models.Model):
    """The words of a todo's title and body, for the Board's search. Written once, by the
    trigger ``todo_search_document_on_insert`` when the todo is made (title and body never
    change), in a table of its own: an index on the todo row itself was recomputed on every
    claim, heartbeat and close (none of them HOT), tokenizing up to 64 KiB of body each time.
    Goes with its todo (ON DELETE CASCADE in the database: retention deletes in SQL)."""

    todo = models.OneToOneField(
        Todo,
        primary_key=True,
        on_delete=models.DB_CASCADE,
        related_name="search_document",
        db_column="todo_id",
    )
    document = SearchVectorField()

    class Meta:
        db_table = "todo_search_documents"
        indexes = [GinIndex(fields=["document"], name="todo_search_documents_words")]

    def __str__(self) -> str:
        return f"search document of todo #{self.pk}"


class TodoAttempt(models.Model):
    """One claim of a todo, from the committed claim to the transition that ended it.

    It starts with nothing said: what the claim may leave empty (its MCP session, claimant)
    and what only its ending writes (outcome, summary, artifact, and their sizes) start empty
    by the table's own defaults, so the two statements that open an attempt (sql/claim.py,
    sql/by_hand.py) name only what they set."""

    # Every index here is written on each claim and close: the (todo, seq) unique index
    # serves the foreign key too, and the rare references get partial indexes.
    todo = models.ForeignKey(
        Todo, on_delete=models.DB_CASCADE, related_name="attempts", db_index=False
    )
    seq = models.IntegerField()
    round = models.IntegerField()
    attempt = models.IntegerField()
    claimer_kind = models.CharField(max_length=16, choices=ClaimerKind)
    # Endpoints are never deleted; the endpoint page reads its recent endings through the
    # partial index todo_attempts_endpoint_ended below (closed rows only). No foreign key in
    # the database: its check at every claim locked the endpoint's row FOR KEY SHARE, and an
    # endpoint's agents claiming at once turned each lock into a MultiXact (docs/benchmarks.md,
    # "An endpoint's row, locked at every claim"). Every agent claim writes the endpoint it is
    # scoped to, which is the todo's own (SCOPE_ENDPOINT), and that one is a foreign key.
    endpoint = models.ForeignKey(
        Endpoint,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_index=False,
        db_constraint=False,
    )
    user = reference(settings.AUTH_USER_MODEL, index=False)  # partial index below
    mcp_session_id = models.CharField(max_length=200, blank=True, default="", db_default="")
    mcp_session_id_truncated = models.BooleanField(default=False, db_default=False)
    mcp_session_id_bytes = models.IntegerField(default=0, db_default=0)
    owner = models.CharField(max_length=200)
    claimant = models.CharField(max_length=200, blank=True, default="", db_default="")
    claimant_truncated = models.BooleanField(default=False, db_default=False)
    claimant_bytes = models.IntegerField(default=0, db_default=0)
    # The W3C trace id of the request that opened it, when tracing is on (SWITCHBOARD_OTEL:
    # queues/tracing.py); the drawer links it where SWITCHBOARD_TRACE_URL says how.
    trace_id = models.CharField(max_length=32, blank=True, db_default="")

    claimed_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=16, choices=Outcome, blank=True, default="", db_default=""
    )
    disposition = models.CharField(
        max_length=16, choices=Disposition, blank=True, default="", db_default=""
    )
    # A release with a wake time (a snooze): the todo was not to be claimed again before it.
    not_before = models.DateTimeField(null=True, blank=True)
    # A human who ended someone else's attempt from the Board (release, cancel).
    ended_by = reference(settings.AUTH_USER_MODEL, index=False)  # partial index below
    # A requester (the endpoint that sent the todo) that canceled the attempt it did not hold:
    # the closer a replayed cancel must match. Endpoints are revoked, never deleted.
    ended_by_endpoint = reference(Endpoint, index=False)

    summary = models.TextField(null=True, blank=True)
    summary_truncated = models.BooleanField(default=False, db_default=False)
    summary_bytes = models.IntegerField(default=0, db_default=0)
    artifact = models.CharField(max_length=600, null=True, blank=True)
    artifact_truncated = models.BooleanField(default=False, db_default=False)
    artifact_bytes = models.IntegerField(default=0, db_default=0)
    result = models.JSONField(null=True, blank=True)
    lease_token_hash = models.CharField(max_length=64, null=True, blank=True)
    # The summary's words (NULL without a summary): the Board's search checks a recent todo's
    # attempts row by row against them, and its GIN index serves the rest
    # (queues.selectors.board_queue). Written by the close that writes the summary
    # (queues/sql/close.py); the row's CHECK refuses words that are not the summary's
    # (migration 0022: why not a generated column).
    summary_document = SearchVectorField(null=True)

    class Meta:
        db_table = "todo_attempts"
        constraints = [
            models.UniqueConstraint(fields=["todo", "seq"], name="todo_attempts_todo_seq"),
            # An endpoint attempt names its endpoint and no user, an owner attempt its user while the user
            # exists (deleting the user sets it NULL; the attempt and its `owner` label,
            # user:<id>, stay in the history); an open attempt has no outcome or disposition,
            # a closed one one of each; the summary's words are the summary's. One CHECK
            # calling one function, as for todos (migrations 0021, 0022).
            models.CheckConstraint(
                condition=row_rules(
                    "todo_attempts_valid",
                    "claimer_kind",
                    "endpoint",
                    "user",
                    "ended_at",
                    "outcome",
                    "disposition",
                    "summary",
                    "summary_document",
                ),
                name="todo_attempts_valid",
            ),
            # At most one open attempt per todo (a partial unique index, checked row by row:
            # a claim closes a lapsed attempt before it opens the next, queues/sql/claim.py).
            models.UniqueConstraint(
                fields=["todo"],
                condition=Q(ended_at__isnull=True),
                name="todo_attempts_one_open",
            ),
        ]
        indexes = [
            # For ON DELETE SET NULL when a user goes; owner attempts are the rare ones.
            models.Index("user", name="todo_attempts_user", condition=Q(user__isnull=False)),
            models.Index(
                "ended_by", name="todo_attempts_ended_by", condition=Q(ended_by__isnull=False)
            ),
            # The Board's Activity feed and ticker: the newest endings, walked backwards. Only
            # closed rows are in it, so a claim (an insert) never touches it.
            models.Index(
                models.F("ended_at").desc(),
                name="todo_attempts_ended_recent",
                condition=Q(ended_at__isnull=False),
            ),
            # The Board's search over what attempts reported (partial: see SUMMARY_SEARCHABLE).
            GinIndex(
                fields=["summary_document"],
                name="todo_attempts_search",
                condition=SUMMARY_SEARCHABLE,
            ),
            # The endpoint page (queues/endpoint_health.py): one endpoint's endings of the last
            # day, read from the index alone (it carries what the page counts). Closed rows
            # only, like todo_attempts_ended_recent: a claim's insert never touches it; a close
            # adds one entry.
            models.Index(
                fields=["endpoint", "ended_at"],
                include=["outcome", "claimed_at", "last_heartbeat_at"],
                name="todo_attempts_endpoint_ended",
                condition=Q(ended_at__isnull=False),
            ),
            # The Activity feed's people's own claims that lapsed (queues/sql/activity.py):
            # the only ones it tells by their ending, and rare (a person who took a todo and
            # left it), so the walk of every team's is short; an endpoint's endings use the
            # index above.
            models.Index(
                models.F("ended_at").desc(),
                name="todo_attempts_owner_lapsed",
                condition=Q(
                    ended_at__isnull=False,
                    claimer_kind="owner",
                    outcome__in=LAPSED_OUTCOMES,
                    ended_by__isnull=True,
                    ended_by_endpoint__isnull=True,
                ),
            ),
        ]

    def __str__(self) -> str:
        return f"todo #{self.todo_id} attempt seq {self.seq}"

    @property
    def died(self) -> bool:
        return self.outcome in DIED_OUTCOMES

    @property
    def fenced(self) -> bool:
        return bool(self.lease_token_hash)


class TodoQuestion(models.Model):
    """A question an agent asked in closing its attempt (``release`` with ``question``): the
    todo waits for a person's answer, or its requester's (queues/transitions/ask.py). One per
    asking attempt, kept with its todo (its attempt may be pruned: the question stays), with
    what ended it: the answer and who gave it, its time running out, or the todo leaving the
    wait otherwise. Written by an agent: untrusted text, like a summary."""

    todo = models.ForeignKey(
        Todo, on_delete=models.DB_CASCADE, related_name="questions", db_index=False
    )  # the (todo, attempt_seq) unique index serves it
    attempt_seq = models.IntegerField()
    asked_at = models.DateTimeField(db_default=Now())
    text = models.TextField()
    text_truncated = models.BooleanField(default=False)
    text_bytes = models.IntegerField(default=0)
    # The answers a person picks from, or the form an answer fills (a flat JSON Schema
    # object); neither: free text.
    choices = models.JSONField(null=True, blank=True)
    answer_schema = models.JSONField(null=True, blank=True)
    # Unanswered this long after it was asked, it ends as on_no_answer says (the sweeper).
    answer_within_seconds = models.IntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    on_no_answer = models.CharField(max_length=16, choices=OnNoAnswer, default=OnNoAnswer.REQUEUE)

    ended_at = models.DateTimeField(null=True, blank=True)
    ending = models.CharField(max_length=16, choices=QuestionEnding, blank=True)
    answer = models.JSONField(null=True, blank=True)
    answered_by_user = reference(settings.AUTH_USER_MODEL, index=False)
    answered_by_endpoint = reference(Endpoint, index=False)

    class Meta:
        db_table = "todo_questions"
        constraints = [
            models.UniqueConstraint(fields=["todo", "attempt_seq"], name="todo_questions_seq"),
            # At most one question waits per todo (the one its waiting is for).
            models.UniqueConstraint(
                fields=["todo"], condition=Q(ended_at__isnull=True), name="todo_questions_open"
            ),
            models.CheckConstraint(
                condition=(Q(ended_at__isnull=True) & Q(ending=""))
                | (Q(ended_at__isnull=False) & Q(ending__in=QuestionEnding.values)),
                name="todo_questions_ending_valid",
            ),
            models.CheckConstraint(
                condition=Q(choices__isnull=True) | Q(answer_schema__isnull=True),
                name="todo_questions_choices_or_schema",
            ),
        ]
        indexes = [
            # The sweeper's expiry: open questions with a time, by when it runs out.
            models.Index(
                "expires_at",
                name="todo_questions_expiring",
                condition=Q(ended_at__isnull=True, expires_at__isnull=False),
            ),
            # Questions that ended, by when: the metrics fold's window and queue health's
            # last day (answered, unanswered, withdrawn; the time to answer).
            models.Index(
                "ended_at", name="todo_questions_ended", condition=Q(ended_at__isnull=False)
            ),
        ]

    def __str__(self) -> str:
        return f"question of todo #{self.todo_id} attempt seq {self.attempt_seq}"


class TodoEvent(models.Model):
    """The audit trail: human actions, and changes that close no attempt (cancel of a pending
    todo, revocation). Team-level actions (vend, rotate, membership) have no todo."""

    team = models.ForeignKey(
        Team, on_delete=models.DO_NOTHING, related_name="events", db_index=False
    )  # todo_events_team_recent leads with team
    todo = models.ForeignKey(
        Todo, null=True, blank=True, on_delete=models.DB_CASCADE, related_name="events"
    )
    actor_user = reference(settings.AUTH_USER_MODEL)
    actor_endpoint = reference(Endpoint)
    kind = models.CharField(max_length=32, choices=EventKind)
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "todo_events"
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=EventKind.values), name="todo_events_kind_known"
            ),
        ]
        indexes = [
            models.Index("team", models.F("created_at").desc(), name="todo_events_team_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} at {self.created_at:%Y-%m-%d %H:%M:%S}"
