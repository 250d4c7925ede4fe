"""Waiting on people (``/waiting/``): the questions agents asked, the oldest first, each
answered in place; and the answer itself (``POST /todos/<id>/answer/``), from the page or
from a waiting todo's drawer.

The page is one read (board.waiting.open_questions) and lives like the queue: board.js reads
it again when the stream (board/live.py, ``want=people``) says its teams' questions changed,
keeps every row where it is, and marks a question that no longer waits (answered here or
elsewhere, withdrawn, out of time) in place until the reader clears them. New questions come
in at the bottom, below what the reader is looking at.

An answer is one call of ``transitions.answer`` as the signed-in person. A value the
question does not take is a 400 that says what it takes, with what was typed kept; a question
already answered or withdrawn (or asked again since the form was drawn) a 409 that says so;
an unknown todo and another team's alike the one 404, byte for byte. Nothing is written on
any of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from switchboard.board import drawer
from switchboard.board.scope import board_scope
from switchboard.board.templatetags.board import STATE_LABELS
from switchboard.board.views import todos
from switchboard.board.views.queue import refresh_seconds
from switchboard.board.waiting import (
    PAGE,
    AnswerForm,
    Asked,
    answer_value,
    asked_of,
    open_questions,
    typed_values,
)
from switchboard.queues import transitions
from switchboard.queues.arguments import id_from_text
from switchboard.queues.errors import Conflict, Invalid, NotFound
from switchboard.queues.selectors import board_todo
from switchboard.queues.transitions import Actor

# The one answer to an unknown todo and to another team's: no id, nothing variable.
NOT_FOUND = "No such question here: nothing was sent."
ANSWERED = "Answered: #{id} is pending again, and its next try reads your answer."


@dataclass(frozen=True, slots=True)
class Row:
    """A question as the page draws it, with what the reader's last act on it said."""

    q: Asked
    notice: str = ""
    tone: str = ""
    typed: dict = field(default_factory=dict)
    closed: bool = False  # answered here, or no longer waiting: kept in place, marked

    @property
    def form(self) -> AnswerForm:
        return AnswerForm(self.q, "inbox", self.typed)


@require_GET
@login_required
def waiting_list(request):
    scope = board_scope(request)
    endpoint_id = id_from_text(request.GET.get("endpoint", ""))
    asked, total = open_questions(scope.team_ids, endpoint_id=endpoint_id)
    return _page(request, [Row(q) for q in asked], total=total, endpoint_id=endpoint_id)


def _page(request, rows: list[Row], *, total: int, endpoint_id: int | None, status=200, notice=""):
    url = reverse("waiting")
    context = {
        "rows": rows,
        "total": total,
        "more": max(0, total - len(rows)),
        "page_size": PAGE,
        "endpoint_id": endpoint_id,
        # A filter to one endpoint names it from its questions (none: it has none, or it is
        # not one of the reader's: the same empty page).
        "endpoint_agent": rows[0].q.endpoint if endpoint_id and rows else "",
        "refresh_url": f"{url}?endpoint={endpoint_id}" if endpoint_id else url,
        "refresh_seconds": refresh_seconds(),
        "confirmations": drawer.CONFIRMATIONS,
        "notice": notice,
        # The nav's count, drawn with the page (board.js keeps it live from the stream).
        "nav_people": total if endpoint_id is None else None,
    }
    if request.htmx and request.htmx.target == "inbox":
        return render(request, "board/waiting_list.html#inbox", context, status=status)
    return render(request, "board/waiting_list.html", context, status=status)


@require_POST
@login_required
def todo_answer(request, todo_id: int):
    in_drawer = request.POST.get("from") == "drawer"
    try:
        detail = board_todo(request.user, todo_id)
    except (NotFound, Invalid):
        return _not_found(request)
    asked = asked_of(detail.todo)
    seq = id_from_text(request.POST.get("seq", ""))
    try:
        if asked is None or asked.attempt_seq != seq:
            raise Conflict(_no_longer_waiting(detail.todo.state, asked_again=asked is not None))
        value = answer_value(asked, request.POST)
        transitions.answer(Actor.human(request.user), todo_id, value=value)
    except NotFound:
        return _not_found(request)
    except Conflict as exc:
        return _refused(request, detail, asked, seq, str(exc), "stale", 409, in_drawer)
    except Invalid as exc:
        said = f"Not sent. {str(exc).rstrip('.')}. Nothing was changed."
        return _refused(request, detail, asked, seq, said, "bad", 400, in_drawer)
    answered = ANSWERED.format(id=todo_id)
    if in_drawer:
        if not request.htmx:
            messages.success(request, answered)
            return redirect("todo-detail", todo_id=todo_id)
        response = todos.render_drawer(request, board_todo(request.user, todo_id), notice=answered)
    elif not request.htmx:
        messages.success(request, answered)
        return redirect("waiting")
    else:
        html = render_to_string(
            "board/waiting_list.html#question-row",
            {"row": Row(asked, notice=answered, tone="good", closed=True)},
            request=request,
        )
        response = HttpResponse(html)
    response["HX-Trigger"] = "queue-changed"
    return response


def _no_longer_waiting(state: str, *, asked_again: bool) -> str:
    if asked_again:
        return (
            "That question was answered or withdrawn, and its agent has asked another since:"
            " read the new one before you answer. Nothing was changed."
        )
    label = STATE_LABELS.get(state, state)
    return (
        "Already answered or withdrawn: this question no longer waits for an answer (the todo"
        f" is {label} now). Nothing was changed."
    )


def _refused(request, detail, asked, seq, said: str, tone: str, status: int, in_drawer: bool):
    """The form again with why it was not sent: in the drawer, in its row, or on the page."""
    typed = typed_values(asked, request.POST) if status == 400 else {}
    if in_drawer:
        return todos.render_drawer(
            request, detail, notice=said, tone=tone, status=status, typed={"answer": typed}
        )
    if request.htmx:
        # The row the form was in: drawn again with the message (a refused value, the form
        # as typed), or closed in place (no longer waiting), under the id it had.
        shown = asked if status == 400 else _closed(detail, seq)
        row = Row(shown, notice=said, tone=tone, typed=typed, closed=status != 400)
        html = render_to_string(
            "board/waiting_list.html#question-row", {"row": row}, request=request
        )
        return HttpResponse(html, status=status)
    scope = board_scope(request)
    found, total = open_questions(scope.team_ids)
    rows = [
        Row(q, notice=said, tone=tone, typed=typed)
        if asked and q.dom_id == asked.dom_id
        else Row(q)
        for q in found
    ]
    return _page(request, rows, total=total, endpoint_id=None, status=status, notice=said)


def _closed(detail, seq: int | None) -> Asked:
    """A question no longer open, as its row stands: the todo, the try that asked."""
    todo = detail.todo
    return Asked(
        todo_id=todo.id,
        title=todo.title,
        endpoint_id=todo.endpoint_id,
        endpoint=todo.endpoint,
        claimant=None,
        attempt_seq=seq or 0,
        text="",
        text_truncated=False,
        text_bytes=0,
        choices=None,
        fields=None,
        asked_at=todo.updated_at,
        expires_at=None,
        answer_within_seconds=None,
        on_no_answer="",
        seen=drawer.seen_stamp(todo),
        round=todo.round,
    )


def _not_found(request):
    """An unknown todo and another team's alike: the 404 page, or (htmx) the row's one
    sentence; never anything of the todo."""
    if not request.htmx:
        raise Http404()
    html = render_to_string(
        "board/waiting_list.html#question-missing", {"said": NOT_FOUND}, request=request
    )
    return HttpResponse(html, status=404)
