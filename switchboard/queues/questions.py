"""What a question may be, and what answers it (issue 43: ``release`` with ``question``, then
an answer from a person on the Board or the requester's ``answer`` verb). Plain rules, no
database: the transitions (queues/transitions/ask.py) check with these before they write.

A question's text is attempt text: at most QUESTION_MAX_BYTES of UTF-8, truncated on a
character boundary and marked, never refused. What answers it is one of:

- ``choices``: 1 to 10 distinct, non-empty strings of at most 100 characters; the answer is
  one of them;
- ``answer_schema``: a flat JSON Schema object, the subset MCP elicitation's
  ``requestedSchema`` allows (``properties`` of type string, with ``minLength``,
  ``maxLength``, ``format`` or ``enum``; number and integer, with ``minimum`` and
  ``maximum``; boolean; each with ``title``, ``description`` and ``default``; and
  ``required``); the answer is an object of those properties; anything else is ``invalid``;
- neither: free text, at most ANSWER_TEXT_MAX_BYTES.

``choices`` and ``answer_schema`` are exclusive. An answer that does not fit is ``invalid``,
its message saying what would.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from switchboard.queues.bounds import (
    ANSWER_SCHEMA_FIELDS_MAX,
    ANSWER_TEXT_MAX_BYTES,
    ANSWER_WITHIN_SECONDS_MAX,
    ANSWER_WITHIN_SECONDS_MIN,
    CHOICE_MAX_CHARS,
    CHOICES_MAX,
    CHOICES_MIN,
    QUESTION_MAX_BYTES,
    Bounded,
    bound,
    storable,
)
from switchboard.queues.errors import Invalid
from switchboard.queues.models import OnNoAnswer

# What each property type of an answer's form may say (MCP elicitation's primitive schemas).
_COMMON = {"type", "title", "description", "default"}
_ALLOWED = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
}
_FORMATS = {"email", "uri", "date", "date-time"}
_OBJECT_KEYS = {"type", "properties", "required", "title", "description"}
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass(frozen=True, slots=True)
class Question:
    """A question as it is stored: its text bounded, and what answers it."""

    text: Bounded
    choices: list[str] | None = None
    answer_schema: dict | None = None
    answer_within_seconds: int | None = None
    on_no_answer: str = OnNoAnswer.REQUEUE


def question(
    text: object,
    *,
    choices: object = None,
    answer_schema: object = None,
    answer_within_seconds: object = None,
    on_no_answer: object = None,
) -> Question:
    """A question from what an agent sent, or Invalid saying what is wrong with it."""
    if not isinstance(text, str) or not text.strip():
        raise Invalid("question must be a non-empty string.")
    bounded = bound(text, field="question", max_bytes=QUESTION_MAX_BYTES)
    if choices is not None and answer_schema is not None:
        raise Invalid("Give choices or answer_schema, not both.")
    within = _within(answer_within_seconds)
    if on_no_answer is None:
        on_no_answer = OnNoAnswer.REQUEUE
    if on_no_answer not in OnNoAnswer.values:
        raise Invalid(f"on_no_answer must be one of {', '.join(OnNoAnswer.values)}.")
    if on_no_answer != OnNoAnswer.REQUEUE and within is None:
        raise Invalid("on_no_answer needs answer_within_seconds: when the wait ends.")
    return Question(
        text=bounded,
        choices=_choices(choices) if choices is not None else None,
        answer_schema=_schema(answer_schema) if answer_schema is not None else None,
        answer_within_seconds=within,
        on_no_answer=str(on_no_answer),
    )


def _within(value: object) -> int | None:
    if value is None:
        return None
    low, high = ANSWER_WITHIN_SECONDS_MIN, ANSWER_WITHIN_SECONDS_MAX
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Invalid(f"answer_within_seconds must be a whole number from {low} to {high}.")
    return value


def _choices(value: object) -> list[str]:
    if not isinstance(value, list) or not CHOICES_MIN <= len(value) <= CHOICES_MAX:
        raise Invalid(f"choices must be a list of {CHOICES_MIN} to {CHOICES_MAX} strings.")
    found: list[str] = []
    for choice in value:
        if not isinstance(choice, str) or not choice.strip() or len(choice) > CHOICE_MAX_CHARS:
            raise Invalid(
                f"Each choice must be a non-empty string of at most {CHOICE_MAX_CHARS} characters."
            )
        if choice in found:
            raise Invalid(f"The choices must be distinct: {choice!r} is there twice.")
        found.append(storable(choice, field="choices"))
    return found


def _schema(value: object) -> dict:
    """A flat JSON Schema object of primitive properties (MCP elicitation's subset)."""
    if not isinstance(value, dict) or value.get("type") != "object":
        raise Invalid('answer_schema must be a JSON Schema object ({"type": "object", …}).')
    extra = set(value) - _OBJECT_KEYS
    if extra:
        raise Invalid(f"answer_schema may not say {sorted(extra)}: only a flat form is taken.")
    properties = value.get("properties")
    if not isinstance(properties, dict) or not 1 <= len(properties) <= ANSWER_SCHEMA_FIELDS_MAX:
        raise Invalid(f"answer_schema.properties must name 1 to {ANSWER_SCHEMA_FIELDS_MAX} fields.")
    for name, field in properties.items():
        _property(name, field)
    required = value.get("required", [])
    if not isinstance(required, list) or any(name not in properties for name in required):
        raise Invalid("answer_schema.required must list some of its properties.")
    return value


def _property(name: object, field: object) -> None:
    where = f"answer_schema.properties.{name}"
    if not isinstance(name, str) or not name or len(name) > CHOICE_MAX_CHARS:
        raise Invalid("answer_schema's property names must be short non-empty strings.")
    if not isinstance(field, dict) or field.get("type") not in _ALLOWED:
        raise Invalid(f"{where} must have a type of {', '.join(_ALLOWED)} (nothing nested).")
    kind = field["type"]
    extra = set(field) - _ALLOWED[kind]
    if extra:
        raise Invalid(f"{where} may not say {sorted(extra)} for a {kind}.")
    if "format" in field and field["format"] not in _FORMATS:
        raise Invalid(f"{where}.format must be one of {', '.join(sorted(_FORMATS))}.")
    if "enum" in field:
        choices = field["enum"]
        if (
            not isinstance(choices, list)
            or not choices
            or len(set(map(str, choices))) != len(choices)
        ):
            raise Invalid(f"{where}.enum must be a list of distinct strings.")
        if any(not isinstance(choice, str) for choice in choices):
            raise Invalid(f"{where}.enum must be a list of distinct strings.")
        names = field.get("enumNames")
        if names is not None and (
            not isinstance(names, list)
            or len(names) != len(choices)
            or not all(isinstance(n, str) for n in names)
        ):
            raise Invalid(f"{where}.enumNames must name each of its enum's values.")
    for key in ("minLength", "maxLength"):
        if key in field and (isinstance(field[key], bool) or not isinstance(field[key], int)):
            raise Invalid(f"{where}.{key} must be a whole number.")
    for key in ("minimum", "maximum"):
        if key in field and not _number(field[key]):
            raise Invalid(f"{where}.{key} must be a number.")
    for key in ("title", "description"):
        if key in field and not isinstance(field[key], str):
            raise Invalid(f"{where}.{key} must be a string.")


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# ---------------------------------------------------------------------------------------
# Answers


def check_answer(value: Any, *, choices: list[str] | None, answer_schema: dict | None) -> Any:
    """The answer to store for ``value``, or Invalid saying what the question takes."""
    if choices is not None:
        if value not in choices or not isinstance(value, str):
            listed = ", ".join(repr(choice) for choice in choices)
            raise Invalid(f"The answer must be one of the question's choices: {listed}.")
        return value
    if answer_schema is not None:
        return _form(value, answer_schema)
    if not isinstance(value, str) or not value.strip():
        raise Invalid("The answer must be text (this question has no choices or form).")
    if len(value.encode("utf-8", "surrogatepass")) > ANSWER_TEXT_MAX_BYTES:
        raise Invalid(f"The answer must be at most {ANSWER_TEXT_MAX_BYTES} bytes of UTF-8.")
    return storable(value, field="answer")


def _form(value: Any, schema: dict) -> dict:
    if not isinstance(value, dict):
        raise Invalid("The answer must be an object of the question's form fields.")
    properties: dict = schema["properties"]
    unknown = set(value) - set(properties)
    if unknown:
        raise Invalid(f"The answer has fields the form does not: {sorted(unknown)}.")
    missing = [name for name in schema.get("required", []) if name not in value]
    if missing:
        raise Invalid(f"The answer lacks the form's required fields: {missing}.")
    for name, given in value.items():
        _field(name, given, properties[name])
    return {name: value[name] for name in properties if name in value}


def _field(name: str, given: Any, field: dict) -> None:
    kind = field["type"]
    said = f"The answer's {name!r}"
    if kind == "boolean":
        if not isinstance(given, bool):
            raise Invalid(f"{said} must be true or false.")
        return
    if kind in ("number", "integer"):
        whole = isinstance(given, int) or (isinstance(given, float) and given.is_integer())
        if not _number(given) or (kind == "integer" and not whole):
            raise Invalid(
                f"{said} must be {'a whole number' if kind == 'integer' else 'a number'}."
            )
        if "minimum" in field and given < field["minimum"]:
            raise Invalid(f"{said} must be at least {field['minimum']}.")
        if "maximum" in field and given > field["maximum"]:
            raise Invalid(f"{said} must be at most {field['maximum']}.")
        return
    if not isinstance(given, str):
        raise Invalid(f"{said} must be text.")
    if "enum" in field and given not in field["enum"]:
        raise Invalid(f"{said} must be one of {field['enum']}.")
    if len(given) < field.get("minLength", 0) or len(given) > field.get("maxLength", 10_000):
        raise Invalid(f"{said} has a length the form does not take.")
    form = field.get("format")
    if form is not None and not _formatted(given, form):
        raise Invalid(f"{said} must be {'an' if form in ('email', 'uri') else 'a'} {form}.")
    storable(given, field="answer")


def _formatted(text: str, form: str) -> bool:
    try:
        if form == "email":
            return bool(_EMAIL.match(text))
        if form == "uri":
            return bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$", text))
        if form == "date":
            date.fromisoformat(text)
        else:
            datetime.fromisoformat(text)
    except ValueError:
        return False
    return True
