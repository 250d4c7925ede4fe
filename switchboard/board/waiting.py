"""Waiting on people (issue 43): the questions agents asked of the user's teams, what a page
draws for each (its text, its choices or the form its ``answer_schema`` describes) and how a
posted form becomes the value ``transitions.answer`` is given.

A question is untrusted text written by an agent, like a summary: its text, its choices and
its form's titles, descriptions, enum values and property names all reach the page through
Django's autoescape only. The ledger checks every answer (queues/questions.py); the form
here only draws what the question takes and reads back what the browser sent, so a person
is told in words when an answer does not fit, before anything is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, FilteredRelation, OuterRef, Q, Subquery, Window

from switchboard.board.drawer import seen_stamp, span
from switchboard.queues.bounds import ANSWER_TEXT_MAX_BYTES
from switchboard.queues.errors import Invalid
from switchboard.queues.models import (
    OnNoAnswer,
    QuestionEnding,
    Todo,
    TodoAttempt,
    TodoState,
    WaitingFor,
)
from switchboard.queues.records import TodoRecord
from switchboard.queues.transitions import by_hand

PAGE = 50  # questions a page shows, the oldest first


@dataclass(frozen=True, slots=True)
class Field:
    """One input of a question's form (a property of its ``answer_schema``)."""

    name: str  # the form field's name ("f0", "f1"…): never the agent's property name
    key: str  # the property the answer carries it as
    kind: str  # text, textarea, email, url, date, datetime-local, number, select, checkbox
    label: str
    help: str
    required: bool
    attrs: dict  # minlength, maxlength, min, max, step (as the input takes them)
    options: list[tuple[str, str]]  # a select's (value, label)
    initial: str | bool  # its default, as the input shows it

    @property
    def dom_id(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Asked:
    """An open question, as the Waiting page and the drawer draw it."""

    todo_id: int
    title: str
    endpoint_id: int
    endpoint: str  # the asking endpoint's agent id
    claimant: str | None  # the asking try's claimant label (None: none given, or pruned)
    attempt_seq: int
    text: str
    text_truncated: bool
    text_bytes: int
    choices: list[str] | None
    fields: list[Field] | None
    asked_at: datetime
    expires_at: datetime | None
    answer_within_seconds: int | None
    on_no_answer: str
    seen: str  # the todo's stamp (board.drawer.seen_stamp): its claim and cancel forms carry it
    round: int

    @property
    def dom_id(self) -> str:
        return f"question-{self.todo_id}-{self.attempt_seq}"

    @property
    def kind(self) -> str:
        return "choices" if self.choices else "form" if self.fields else "text"

    @property
    def asker(self) -> str:
        """Whose words the question is: its worker's claimant, else its endpoint."""
        return self.claimant or f"endpoint {self.endpoint}"

    @property
    def within(self) -> str:
        return span(self.answer_within_seconds) if self.answer_within_seconds else ""

    @property
    def then(self) -> str:
        """What happens without an answer in time, in words."""
        if self.on_no_answer == OnNoAnswer.DEAD_LETTER:
            return "it is dead-lettered"
        return "it goes back to the queue, unanswered"


def open_questions(
    team_ids: list[int], *, endpoint_id: int | None = None, limit: int = PAGE
) -> tuple[list[Asked], int]:
    """The open questions of these teams' todos, the oldest first (at most ``limit``), and
    how many there are. One query: the teams' waiting todos through ``todos_endpoint_state``,
    each with its one open question (``todo_questions_open``) and the asking try's claimant."""
    claimant = TodoAttempt.objects.filter(
        todo_id=OuterRef("pk"), seq=OuterRef("open__attempt_seq")
    ).values("claimant")[:1]
    todos = Todo.objects.filter(
        endpoint__team_id__in=team_ids, state=TodoState.WAITING, waiting_for=WaitingFor.PEOPLE
    )
    if endpoint_id is not None:
        todos = todos.filter(endpoint_id=endpoint_id)
    rows = (
        todos.annotate(open=FilteredRelation("questions", condition=Q(questions__ended_at=None)))
        .filter(open__isnull=False)
        .annotate(total=Window(Count("pk")), asker=Subquery(claimant))
        .order_by("open__asked_at", "pk")
        .values(
            "pk",
            "title",
            "endpoint_id",
            "state",
            "last_attempt_seq",
            "round",
            "total",
            "asker",
            agent_id=F("endpoint__agent_id"),
            seq=F("open__attempt_seq"),
            text=F("open__text"),
            text_truncated=F("open__text_truncated"),
            text_bytes=F("open__text_bytes"),
            choices=F("open__choices"),
            answer_schema=F("open__answer_schema"),
            asked_at=F("open__asked_at"),
            expires_at=F("open__expires_at"),
            within=F("open__answer_within_seconds"),
            on_no_answer=F("open__on_no_answer"),
        )[:limit]
    )
    found = [
        Asked(
            todo_id=row["pk"],
            title=row["title"],
            endpoint_id=row["endpoint_id"],
            endpoint=row["agent_id"],
            claimant=row["asker"] or None,
            attempt_seq=row["seq"],
            text=row["text"],
            text_truncated=row["text_truncated"],
            text_bytes=row["text_bytes"],
            choices=row["choices"],
            fields=form_fields(row["answer_schema"]),
            asked_at=row["asked_at"],
            expires_at=row["expires_at"],
            answer_within_seconds=row["within"],
            on_no_answer=row["on_no_answer"],
            seen=seen_stamp_of(row["state"], row["last_attempt_seq"], row["round"]),
            round=row["round"],
        )
        for row in rows
    ]
    return found, (found and rows[0]["total"]) or 0


def seen_stamp_of(state: str, last_attempt_seq: int, round_: int) -> str:
    return by_hand.seen_stamp(state, last_attempt_seq, round_)


def people_counts(team_ids: list[int]) -> dict[int, dict[str, int]]:
    """Team id → endpoint id (as text) → how many of its todos wait on people: the nav's
    count and the overview's column. One query, by ``todos_endpoint_state``."""
    rows = (
        Todo.objects.filter(
            endpoint__team_id__in=team_ids, state=TodoState.WAITING, waiting_for=WaitingFor.PEOPLE
        )
        .values_list("endpoint__team_id", "endpoint_id")
        .annotate(n=Count("pk"))
        .order_by()
    )
    counts: dict[int, dict[str, int]] = {team_id: {} for team_id in team_ids}
    for team_id, endpoint_id, n in rows:
        counts[team_id][str(endpoint_id)] = n
    return counts


def asked_of(todo: TodoRecord) -> Asked | None:
    """A waiting todo's open question (TodoRecord.question, the ledger's read), or None."""
    q = todo.question
    if todo.state != TodoState.WAITING or not q:
        return None
    return Asked(
        todo_id=todo.id,
        title=todo.title,
        endpoint_id=todo.endpoint_id,
        endpoint=q.get("endpoint") or todo.endpoint,
        claimant=q.get("claimant"),
        attempt_seq=q["attempt_seq"],
        text=q["text"],
        text_truncated=q.get("text_truncated", False),
        text_bytes=q.get("text_bytes", 0),
        choices=q.get("choices"),
        fields=form_fields(q.get("answer_schema")),
        asked_at=instant(q["asked_at"]),
        expires_at=instant(q.get("expires_at")),
        answer_within_seconds=q.get("answer_within_seconds"),
        on_no_answer=q.get("on_no_answer") or OnNoAnswer.REQUEUE,
        seen=seen_stamp(todo),
        round=todo.round,
    )


def instant(value) -> datetime | None:
    """A time as the ledger's JSON reads give it (ISO 8601), or as it is."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


@dataclass(frozen=True, slots=True)
class AnswerForm:
    """A question's answer form where it is drawn (``where``: the Waiting page's row, or the
    drawer), with what a refused post carried (``typed``)."""

    q: Asked
    where: str  # "inbox" or "drawer"
    typed: dict

    @property
    def prefix(self) -> str:
        """Its inputs' ids: unique on a page that shows the row and the drawer at once."""
        return f"{self.q.dom_id}-{self.where}"

    @property
    def inputs(self) -> list[tuple[Field, object]]:
        """Each input of a form with its value: as typed, else the form's default."""
        return [(f, self.typed.get(f.name, f.initial)) for f in self.q.fields or ()]

    @property
    def text(self) -> str:
        return self.typed.get("value", "")


@dataclass(frozen=True, slots=True)
class Story:
    """What an asking try's question came to, as the drawer tells it: the question, how it
    ended (answered, with what and by whom; out of time; withdrawn; still waiting), and how
    long it waited."""

    text: str
    text_truncated: bool
    text_bytes: int
    choices: list[str] | None
    asked_at: datetime
    ended_at: datetime | None
    ending: str  # answered, unanswered, withdrawn, or "" while it waits
    answer: object  # the value given (a choice, the text, the form's object)
    answered_by: str  # "a person, alice" / "endpoint sender"
    waited: str  # "4m 12s": from the question to its end (or to now, while it waits)

    @property
    def answer_is_text(self) -> bool:
        return isinstance(self.answer, str)

    @property
    def said(self) -> str:
        return ENDINGS.get(self.ending, "waiting for an answer")


def story(question: dict | None, *, now: datetime) -> Story | None:
    """An asking try's question (AttemptRecord.question, the ledger's read), told."""
    if not question:
        return None
    asked_at = instant(question["asked_at"])
    ended_at = instant(question.get("ended_at"))
    answer = question.get("answer") or {}
    by = answer.get("answered_by") or {}
    label = by.get("label") or "someone no longer here"
    return Story(
        text=question["text"],
        text_truncated=question.get("text_truncated", False),
        text_bytes=question.get("text_bytes", 0),
        choices=question.get("choices"),
        asked_at=asked_at,
        ended_at=ended_at,
        ending=question.get("ending") or "",
        answer=answer.get("value"),
        answered_by=f"{label} (a person)" if by.get("kind") == "person" else f"endpoint {label}",
        waited=span(max(0.0, ((ended_at or now) - asked_at).total_seconds())),
    )


ENDINGS = {
    QuestionEnding.ANSWERED: "answered",
    QuestionEnding.UNANSWERED: "no answer in time",
    QuestionEnding.WITHDRAWN: "withdrawn: the todo left the wait otherwise (claimed by a person,"
    " canceled or revoked)",
}


# ---------------------------------------------------------------------------------------
# The form an answer_schema describes


_FORMATS = {"email": "email", "uri": "url", "date": "date", "date-time": "datetime-local"}
_LONG_TEXT = 200  # a string field that may be longer than this is a text area


def form_fields(schema: dict | None) -> list[Field] | None:
    """The inputs of a question's form, in its properties' order; None without a form."""
    if not schema:
        return None
    required = set(schema.get("required") or ())
    return [
        _field(n, key, spec, key in required)
        for n, (key, spec) in enumerate(schema["properties"].items())
    ]


def _field(n: int, key: str, spec: dict, required: bool) -> Field:
    kind, attrs, options = spec.get("type"), {}, []
    default = spec.get("default")
    if kind == "boolean":
        widget, initial = "checkbox", default is True
    elif kind in ("number", "integer"):
        widget = "number"
        attrs["step"] = "1" if kind == "integer" else "any"
        for bound, attr in (("minimum", "min"), ("maximum", "max")):
            if bound in spec:
                attrs[attr] = _number_text(spec[bound])
        initial = _number_text(default) if _is_number(default) else ""
    elif "enum" in spec:
        widget = "select"
        names = spec.get("enumNames") or spec["enum"]
        options = list(zip(spec["enum"], names, strict=True))
        initial = default if default in spec["enum"] else ""
    else:
        widget = _FORMATS.get(spec.get("format"), "text")
        for bound, attr in (("minLength", "minlength"), ("maxLength", "maxlength")):
            if bound in spec:
                attrs[attr] = spec[bound]
        if widget == "text" and spec.get("maxLength", _LONG_TEXT + 1) > _LONG_TEXT:
            widget = "textarea"
        initial = default if isinstance(default, str) else ""
    return Field(
        name=f"f{n}",
        key=key,
        kind=widget,
        label=spec.get("title") or key,
        help=spec.get("description") or "",
        required=required,
        attrs=attrs,
        options=options,
        initial=initial,
    )


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _number_text(value) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


# ---------------------------------------------------------------------------------------
# What a posted form answers


def answer_value(asked: Asked, post) -> object:
    """The value a posted answer form gives the question: a choice, the text, or the form's
    object; Invalid, in words a person reads, when the form itself says it is not one."""
    if asked.kind == "choices":
        value = post.get("value")
        if value is None:
            raise Invalid("Pick one of the answers.")
        return value
    if asked.kind == "text":
        value = post.get("value", "").strip()
        if not value:
            raise Invalid("Write an answer first: this question takes text.")
        if len(value.encode("utf-8", "surrogatepass")) > ANSWER_TEXT_MAX_BYTES:
            raise Invalid(f"An answer holds at most {ANSWER_TEXT_MAX_BYTES} bytes of text.")
        return value
    answer: dict = {}
    for field in asked.fields or ():
        if field.kind == "checkbox":
            answer[field.key] = field.name in post
            continue
        raw = post.get(field.name, "").strip()
        if not raw:
            if field.required:
                raise Invalid(f"“{field.label}” is required.")
            continue
        if field.kind == "number":
            answer[field.key] = _number(field, raw)
        else:
            answer[field.key] = raw
    return answer


def _number(field: Field, raw: str) -> int | float:
    whole = field.attrs.get("step") == "1"
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or (whole and not value.is_integer()):
        raise Invalid(f"“{field.label}” takes {'a whole number' if whole else 'a number'}.")
    if whole or (value.is_integer() and raw.lstrip("+-").isdigit()):
        return int(value)
    return value


def typed_values(asked: Asked | None, post) -> dict:
    """What a refused form carried, to draw it again as the person left it."""
    if asked is None or not post:
        return {}
    if asked.kind == "form":
        return {
            f.name: (f.name in post) if f.kind == "checkbox" else post.get(f.name, "")
            for f in asked.fields or ()
        }
    return {"value": post.get("value", "")}
