"""What todos wait for, beside a person's answer (queues/models/todos.py, TodoQuestion): the
todos a todo was made ``after``. Kept by a trigger in the database
(queues/schema/functions.sql), in the transaction of the change that moves them, so no path
that ends a todo can forget them. (A key's limit counts its claimed todos themselves.)"""

from __future__ import annotations

from django.db import models

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
