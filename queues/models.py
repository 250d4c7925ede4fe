"""The ledger: teams, endpoints, todos, their attempts and the audit trail.

Every change of a todo's ``state`` goes through ``queues.transitions``; these classes define
the schema, the database-enforced invariants and the scoped read entry points.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from django.db.models.functions import Coalesce, Now


class Team(models.Model):
    """An owner scope. Every user gets a personal team; members are managed by owners."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    personal = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )

    class Meta:
        db_table = "teams"

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "team_members"
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="team_members_unique"),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "member"]), name="team_members_role_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user_id}@{self.team_id} ({self.role})"


VERBS = (
    "create_todo",
    "list_todos",
    "get_todo",
    "claim",
    "claim_next",
    "heartbeat",
    "complete",
    "fail",
    "release",
    "cancel",
)


class EndpointQuerySet(models.QuerySet):
    def active(self) -> EndpointQuerySet:
        return self.filter(revoked_at__isnull=True)

    def visible_to(self, user) -> EndpointQuerySet:
        return self.filter(team__memberships__user=user)


class Endpoint(models.Model):
    """An agent's credential and its queue. The token is stored only as its SHA-256."""

    # Teams and endpoints are never deleted (revoke instead); the FK alone forbids it.
    team = models.ForeignKey(Team, on_delete=models.DO_NOTHING, related_name="endpoints")
    agent_id = models.SlugField(max_length=64)
    name = models.CharField(max_length=200, blank=True)
    token_hash = models.CharField(max_length=64, unique=True)
    verbs = ArrayField(models.CharField(max_length=32))
    notify_url = models.URLField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The secret that signs this endpoint's doorbell webhooks (HMAC-SHA256); made when a notify
    # URL is set. Needed in clear to sign, so never shown in admin or logs.
    notify_secret = models.CharField(max_length=128, blank=True)
    # Admission (SWITCHBOARD_CLAIMS_PER_MINUTE): the current minute's window and the claims
    # committed in it. Written only when a limit is set.
    admission_window_at = models.DateTimeField(null=True, blank=True)
    admission_claims = models.IntegerField(default=0)
    # Paused by an owner (the Board) or an operator (admin): claim and claim_next hand out
    # nothing while set; every other verb works (queues/endpoints.py ``pause``). Read with the
    # token on every request, so a pause costs the claim path no query of its own.
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
        db_index=False,  # a small table: deleting a user scans it
    )

    objects = EndpointQuerySet.as_manager()

    class Meta:
        db_table = "endpoints"
        constraints = [
            models.UniqueConstraint(fields=["team", "agent_id"], name="endpoints_agent_id_unique"),
            models.CheckConstraint(
                condition=Q(verbs__contained_by=list(VERBS)), name="endpoints_verbs_known"
            ),
        ]

    def __str__(self) -> str:
        return self.agent_id

    @property
    def owner_label(self) -> str:
        return f"agent:{self.agent_id}"

    @property
    def paused(self) -> bool:
        return self.paused_at is not None


class TodoState(models.TextChoices):
    PENDING = "pending"
    CLAIMED = "claimed"
    RETRY_WAIT = "retry_wait"
    DONE = "done"
    DEAD = "dead"
    CANCELED = "canceled"


LIVE_STATES = (TodoState.PENDING, TodoState.CLAIMED, TodoState.RETRY_WAIT)
TERMINAL_STATES = (TodoState.DONE, TodoState.DEAD, TodoState.CANCELED)


class Outcome(models.TextChoices):
    COMPLETED = "completed"
    FAILED = "failed"
    RELEASED = "released"
    LEASE_EXPIRED = "lease_expired"
    REAPED = "reaped"
    CANCELED = "canceled"
    REVOKED = "revoked"


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
    # A todo dead-lettered with no open attempt because its endpoint was revoked.
    REVOKE_DEAD_LETTER = "revoke_dead_letter"
    # Endpoints (team-level rows, no todo).
    ENDPOINT_VEND = "vend"
    ENDPOINT_ROTATE = "rotate"
    ENDPOINT_REVOKE = "endpoint_revoke"
    NOTIFY_URL = "notify_url"
    NOTIFY_SECRET_ROTATE = "notify_secret_rotate"
    ENDPOINT_PAUSE = "pause"
    ENDPOINT_RESUME = "resume"
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
# same way). A todo's title and body are in TodoSearchDocument (made by a trigger, migration
# 0018, with SearchVector("title", "body", config="simple")'s expression); an attempt's
# summary words are stored on its row (TodoAttempt.summary_document: to_tsvector('simple',
# summary), written with the summary and held to it by the row's CHECK, migration 0022), which
# the summaries' GIN index is built on and the Board's search (queues.selectors) matches
# against, so the two cannot drift apart.
# Only attempts that wrote a summary have words, and only they are in the summary index: a
# claim (an insert, no summary) and a close that reports none never touch it.
SUMMARY_SEARCHABLE = Q(summary__gt="")


def row_rules(function: str, *columns: str) -> models.Func:
    """A table's row rules as one boolean call of its PL/pgSQL function (migration 0021 has
    the functions and says why; tests/queues/test_row_rules.py holds them to the enums)."""
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
    def for_endpoint(self, endpoint: Endpoint) -> TodoQuerySet:
        return self.filter(endpoint_id=endpoint.pk)

    def with_claimable_at(self) -> TodoQuerySet:
        """``claimable_at`` to filter and order by (CLAIMABLE_AT), without selecting it."""
        return self.alias(claimable_at=CLAIMABLE_AT)

    def visible_to(self, user) -> TodoQuerySet:
        return self.filter(endpoint__team__memberships__user=user)


class Todo(models.Model):
    """One unit of work on one endpoint's queue, with its lease and counters."""

    # No index of its own: the composite indexes below all lead with endpoint.
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, related_name="todos", db_index=False
    )
    # An agent-to-agent send records the sending endpoint; a Board create records the user.
    requester = models.ForeignKey(
        Endpoint,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="sent_todos",
        db_index=False,  # partial index below: most todos have none
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        db_index=False,  # partial index below
    )
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
    dead_letter_reason = models.CharField(max_length=16, choices=Outcome, blank=True)
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
            # table's CHECKs again on every statement that writes it, and nine of them were a
            # sixth of the backend's instructions per todo (migration 0021 holds the function).
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
        ]

    def __str__(self) -> str:
        return f"todo #{self.pk}"

    @property
    def dead_letter(self) -> bool:
        return self.state == TodoState.DEAD

    @property
    def attempts_total(self) -> int:
        return self.last_attempt_seq - self.attempts_pruned


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
    """One claim of a todo, from the committed claim to the transition that ended it."""

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
    # partial index todo_attempts_endpoint_ended below (closed rows only).
    endpoint = models.ForeignKey(
        Endpoint,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
        db_index=False,
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
        db_index=False,  # partial index below
    )
    mcp_session_id = models.CharField(max_length=200, blank=True)
    mcp_session_id_truncated = models.BooleanField(default=False)
    mcp_session_id_bytes = models.IntegerField(default=0)
    owner = models.CharField(max_length=200)
    claimant = models.CharField(max_length=200, blank=True)
    claimant_truncated = models.BooleanField(default=False)
    claimant_bytes = models.IntegerField(default=0)

    claimed_at = models.DateTimeField()
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome, blank=True)
    disposition = models.CharField(max_length=16, choices=Disposition, blank=True)
    # A release with a wake time (a snooze): the todo was not to be claimed again before it.
    not_before = models.DateTimeField(null=True, blank=True)
    # A human who ended someone else's attempt from the Board (release, cancel).
    ended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
        db_index=False,  # partial index below
    )
    # A requester (the endpoint that sent the todo) that canceled the attempt it did not hold:
    # the closer a replayed cancel must match. Endpoints are revoked, never deleted.
    ended_by_endpoint = models.ForeignKey(
        Endpoint,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
        db_index=False,
    )

    summary = models.TextField(null=True, blank=True)
    summary_truncated = models.BooleanField(default=False)
    summary_bytes = models.IntegerField(default=0)
    artifact = models.CharField(max_length=600, null=True, blank=True)
    artifact_truncated = models.BooleanField(default=False)
    artifact_bytes = models.IntegerField(default=0)
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


class TodoEvent(models.Model):
    """The audit trail: human actions, and changes that close no attempt (cancel of a pending
    todo, revocation). Team-level actions (vend, rotate, membership) have no todo."""

    team = models.ForeignKey(
        Team, on_delete=models.DO_NOTHING, related_name="events", db_index=False
    )  # todo_events_team_recent leads with team
    todo = models.ForeignKey(
        Todo, null=True, blank=True, on_delete=models.DB_CASCADE, related_name="events"
    )
    actor_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
    )
    actor_endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
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


# ---------------------------------------------------------------------------------------
# Operators and integrations: the outbox, dead-letter sinks, the sweeper's status, metrics.


class DeadLetterSink(models.Model):
    """A team's webhook for dead letters: every todo of the team that dead-letters is POSTed
    there (from the outbox), HMAC-SHA256 signed with ``secret``."""

    team = models.ForeignKey(Team, on_delete=models.DB_CASCADE, related_name="dead_letter_sinks")
    url = models.URLField(max_length=500)
    # Needed in clear to sign; shown once to the team's owners, never in admin or logs.
    secret = models.CharField(max_length=128)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(db_default=Now())
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
    )

    class Meta:
        db_table = "dead_letter_sinks"

    def __str__(self) -> str:
        return f"dead-letter sink #{self.pk}"


class Delivery(models.Model):
    """The outbox: one webhook to send, written in the transaction that made it necessary
    (a todo dead-lettered, a todo became claimable) and sent after commit by the sweeper.
    It keeps its own copy of the payload, so retention deleting the todo cannot race it."""

    class Kind(models.TextChoices):
        DEAD_LETTER = "dead_letter"
        DOORBELL = "doorbell"

    kind = models.CharField(max_length=16, choices=Kind)
    team = models.ForeignKey(Team, on_delete=models.DO_NOTHING, related_name="+", db_index=False)
    sink = models.ForeignKey(
        DeadLetterSink, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    endpoint = models.ForeignKey(
        Endpoint, null=True, blank=True, on_delete=models.DB_SET_NULL, related_name="+"
    )
    todo_id = models.BigIntegerField(null=True, blank=True)  # no FK: the todo may be gone
    url = models.CharField(max_length=500)
    payload = models.JSONField()
    created_at = models.DateTimeField(db_default=Now())
    next_attempt_at = models.DateTimeField(db_default=Now())
    attempts = models.IntegerField(default=0)
    last_status = models.IntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "outbox"
        indexes = [
            # The sweeper: due, undelivered rows.
            models.Index(
                "next_attempt_at",
                name="outbox_due",
                condition=Q(delivered_at__isnull=True, gave_up_at__isnull=True),
            ),
            models.Index("team", models.F("created_at").desc(), name="outbox_team_recent"),
        ]
        constraints = [
            # One pending doorbell per endpoint: rings coalesce until it is sent.
            models.UniqueConstraint(
                fields=["endpoint"],
                condition=Q(kind="doorbell", delivered_at__isnull=True, gave_up_at__isnull=True),
                name="outbox_one_pending_doorbell",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} delivery #{self.pk}"


class SweeperStatus(models.Model):
    """One row: when a sweeper pass last started and finished, and what it did. Shared by
    every sweeper process (queue health and /metrics read it)."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    passes = models.BigIntegerField(default=0)
    last_report = models.JSONField(default=dict, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    # Attempt endings up to here are folded into metric_counters.
    metrics_folded_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sweeper_status"
        constraints = [models.CheckConstraint(condition=Q(id=1), name="sweeper_status_one_row")]

    def __str__(self) -> str:
        return "sweeper status"


class MetricCounter(models.Model):
    """Monotonic counters for /metrics, kept in the database so they survive restarts and
    agree across processes: (name, label) → value. Histogram buckets are counters too."""

    name = models.CharField(max_length=100)
    label = models.CharField(max_length=100, blank=True)
    value = models.FloatField(default=0)

    class Meta:
        db_table = "metric_counters"
        constraints = [
            models.UniqueConstraint(fields=["name", "label"], name="metric_counters_name_label")
        ]

    def __str__(self) -> str:
        return f"{self.name}{{{self.label}}}"


class MetricDelta(models.Model):
    """Counts waiting to be added to ``metric_counters`` by the sweeper's fold: attempts the
    per-todo history cap deleted before the fold had counted them (queues/sql/claim.py, the
    ``carried`` arm), with the time they ended. The fold counts a delta whose ``ended_at`` is
    in its window, drops one before it (that attempt's row was counted while it was still
    there) and keeps one after it for a later fold. Insert-only for writers, emptied by the
    fold: no row is ever updated, so writers never queue on one."""

    name = models.CharField(max_length=100)
    label = models.CharField(max_length=100, blank=True)
    # When the pruned attempts ended (one delta per outcome and ended_at).
    ended_at = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        db_table = "metric_deltas"

    def __str__(self) -> str:
        return f"{self.name}{{{self.label}}} +{self.value}"


# ---------------------------------------------------------------------------------------
# Signing in: the throttle (queues/signin_throttle.py, used by board/auth.py).


class SignInThrottle(models.Model):
    """Sign-ins charged to one key in its current fixed window: ``user:<lowercased name>`` or
    ``addr:<client address>``. Kept in PostgreSQL so that every web process counts the same
    guesses. A sign-in is charged before its password is checked and refunded when it
    succeeds, so ``failures`` counts the ones that did not."""

    key = models.CharField(max_length=200, primary_key=True)
    window_started_at = models.DateTimeField()
    failures = models.IntegerField(default=0)

    class Meta:
        db_table = "sign_in_throttles"
        indexes = [
            # Pruning: the oldest windows first (queues/signin_throttle.py, PRUNE).
            models.Index("window_started_at", name="sign_in_throttles_window"),
        ]

    def __str__(self) -> str:
        return f"{self.key}: {self.failures}"


# ---------------------------------------------------------------------------------------
# Team invitations (queues/teams.py): an owner invites a user name; its user accepts.


class TeamInvitationQuerySet(models.QuerySet):
    def pending(self) -> TeamInvitationQuerySet:
        return self.filter(accepted_at__isnull=True, declined_at__isnull=True)


class TeamInvitation(models.Model):
    """An owner's invitation of a user name to a team, as typed; the user whose name matches
    it (in any letter case) accepts or declines it. Made for any name, existing or not, so
    that inviting says nothing about which names exist. A revoked invitation is deleted (its
    audit rows stay)."""

    team = models.ForeignKey(Team, on_delete=models.DB_CASCADE, related_name="invitations")
    username = models.CharField(max_length=150)
    role = models.CharField(max_length=16, choices=Membership.Role, default=Membership.Role.MEMBER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
    )
    created_at = models.DateTimeField(db_default=Now())
    accepted_at = models.DateTimeField(null=True, blank=True)
    declined_at = models.DateTimeField(null=True, blank=True)
    # Who answered: several accounts may differ from the typed name by letter case only.
    answered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DB_SET_NULL,
        related_name="+",
    )

    objects = TeamInvitationQuerySet.as_manager()

    class Meta:
        db_table = "team_invitations"
        constraints = [
            # One pending invitation per name and team; also the index behind "the
            # invitations waiting for me" (Upper: Django's iexact compares UPPER(...)).
            models.UniqueConstraint(
                models.functions.Upper("username"),
                models.F("team"),
                condition=Q(accepted_at__isnull=True, declined_at__isnull=True),
                name="team_invitations_one_pending",
            ),
            models.CheckConstraint(
                condition=Q(role__in=["owner", "member"]), name="team_invitations_role_valid"
            ),
            models.CheckConstraint(
                condition=Q(accepted_at__isnull=True) | Q(declined_at__isnull=True),
                name="team_invitations_one_answer",
            ),
        ]

    def __str__(self) -> str:
        return f"invitation #{self.pk} of {self.username!r} to {self.team_id} ({self.role})"

    @property
    def pending(self) -> bool:
        return self.accepted_at is None and self.declined_at is None
