"""What todos wait for, beside a person's answer (queues/models/todos.py, TodoQuestion): the
todos a todo was made ``after``, and the counts a key's limit is kept by. Both are kept by
triggers in the database (queues/schema/functions.sql), in the transaction of the change
that moves them, so no path that ends or claims a todo can forget them."""

from __future__ import annotations

from django.db import models

from switchboard.queues.models.endpoints import Endpoint
from switchboard.queues.models.todos import Todo


class TodoAfter(models.Model):
    """One edge: ``todo`` was made after ``after`` and waits for it (create_todo's ``after``).
    ``ended`` is the state ``after`` ended in ('' until then), written by the trigger
    todos_waits_follow once per edge, which counts the waiting todo's ``after_left`` down: so
    an edge is counted once, whatever happens to its todo later (a rerun)."""

    pk = models.CompositePrimaryKey("todo", "after")
    todo = models.ForeignKey(
        Todo, on_delete=models.DB_CASCADE, related_name="+", db_index=False
    )  # the primary key leads with it
    after = models.ForeignKey(Todo, on_delete=models.DB_CASCADE, related_name="+")
    ended = models.CharField(max_length=16, blank=True, db_default="")

    class Meta:
        db_table = "todo_after"
        indexes = [
            # The sweeper's leftovers: edges whose prerequisite ended beyond the trigger's
            # batch (queues/transitions/waits.py, release_leftovers).
            models.Index("after", name="todo_after_unmarked", condition=models.Q(ended="")),
        ]

    def __str__(self) -> str:
        return f"todo #{self.todo_id} after #{self.after_id}"


class KeyClaims(models.Model):
    """How many todos of one key of one endpoint are claimed now (kept for every key by the
    trigger todos_waits_follow; the endpoint's ``max_claimed_per_key`` caps it)."""

    pk = models.CompositePrimaryKey("endpoint", "key")
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.DO_NOTHING, related_name="+", db_index=False
    )
    key = models.CharField(max_length=200)
    claimed = models.IntegerField(db_default=0)

    class Meta:
        db_table = "todo_key_claims"
        constraints = [
            models.CheckConstraint(condition=models.Q(claimed__gte=0), name="key_claims_count")
        ]

    def __str__(self) -> str:
        return f"{self.claimed} claimed of key {self.key!r}"
