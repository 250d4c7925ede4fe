"""Every bound of the ledger, in one place (the agents' schemas, the OpenAPI document, the
capability document and the Board's forms read them from here; tests/agents/test_lists.py
checks they agree), and how stored text is bounded: attempt text truncated on a UTF-8
boundary and marked, never rejected; artifacts limited to mcp:// handles and https:// URLs;
results capped at 64 KiB."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from switchboard.queues.arguments import instant
from switchboard.queues.errors import Invalid

# A todo: its title is refused beyond this (it is not attempt text, and is not cut); its body
# too (a cut body would be other work).
TITLE_MAX_CHARS = 500
BODY_MAX_BYTES = 64 * 1024
PRIORITY_MIN, PRIORITY_MAX = -100, 100
MAX_ATTEMPTS_MAX = 1000
IDEMPOTENCY_KEY_MAX_CHARS = 200
# A lease a claim or heartbeat may ask for, in seconds; and the long-poll's longest wait.
LEASE_SECONDS_MAX = 86_400
WAIT_SECONDS_MAX = 30
# A process marks its endpoint's long-polls as waiting (endpoints.waited_at) at most this
# often; a freed claim rings while the mark is younger than WAITED_WINDOW_SECONDS (the
# trigger todos_waits_follow says it in SQL; sql.RING_IF_WAITING reads it from here), which
# must outlast a mark's age plus a whole wait.
WAITED_REFRESH_SECONDS = 10
WAITED_WINDOW_SECONDS = 60
# A todo is held back at most this far ahead, 30 days: a snoozed release (delay_seconds or
# not_before) and a todo created with not_before. A year-9999 wake time would hide a todo
# from every claim for good while it still looks pending.
SNOOZE_SECONDS_MAX = 30 * 86_400
ATTEMPT_SEQ_MAX = 2**31 - 1
LEASE_TOKEN_MAX_CHARS = 200
# A request to the agents' API: its whole body, over HTTP and MCP.
REQUEST_MAX_BYTES = 1024 * 1024
# Reads: list_todos' page (rows, and about this much todo text), get_todo's attempts.
LIST_DEFAULT, LIST_MAX = 50, 200
LIST_MAX_BYTES = 1024 * 1024
ATTEMPTS_DEFAULT, ATTEMPTS_MAX = 20, 50

SUMMARY_MAX_BYTES = 2048
ARTIFACT_MAX_BYTES = 512
CLAIMANT_MAX_BYTES = 128
# The client's Mcp-Session-Id header, kept as sent up to this much (the column holds 200).
MCP_SESSION_ID_MAX_BYTES = 128
# Deep enough for any real result; shallow enough for every JSON tool (and the Board's
# pretty-printer) to walk it without recursion trouble.
RESULT_MAX_DEPTH = 64
RESULT_MAX_BYTES = 64 * 1024
ARTIFACT_SCHEMES = ("mcp://", "https://")
# The same rule as a JSON Schema pattern (ECMA-262 has no inline flags: each letter in both
# cases), for the schemas; bound_artifact is the one that enforces it.
ARTIFACT_PATTERN = "^(?:[Mm][Cc][Pp]|[Hh][Tt][Tt][Pp][Ss])://"
# A list_todos cursor (queues/selectors/details.py gives them out): at most this long.
CURSOR_MAX_CHARS = 64
# A question an agent asks (queues/questions.py): its text is attempt text (truncated and
# marked, never refused); the answers a person picks from; a free-text answer; how long it
# may wait for an answer (as a snooze may: 30 days); the fields of an answer's form.
QUESTION_MAX_BYTES = 2048
CHOICES_MIN, CHOICES_MAX = 1, 10
CHOICE_MAX_CHARS = 100
ANSWER_TEXT_MAX_BYTES = 2048
ANSWER_WITHIN_SECONDS_MIN, ANSWER_WITHIN_SECONDS_MAX = 1, SNOOZE_SECONDS_MAX
ANSWER_SCHEMA_FIELDS_MAX = 20
# A todo's key (issue 44: max_claimed_per_key, unique_while_active).
KEY_MAX_CHARS = 200
# get_todo's questions: the newest this many of a todo.
QUESTIONS_MAX = 50


@dataclass(frozen=True, slots=True)
class Bounded:
    text: str | None
    truncated: bool = False
    bytes: int = 0


NOTHING = Bounded(None)

# U+D800..U+DFFF standing alone: a Python str can hold one (json.loads reads "\ud800"), but
# UTF-8 cannot, so psycopg could not send it and the request would end in a 500.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def refuse_lone_surrogates(text: str, *, field: str) -> None:
    """A lone surrogate is refused (Invalid), never replaced: it is not Unicode text at all,
    and the agent API and MCP already refuse one when they decode the JSON body, so the
    ledger refusing it too keeps every surface in agreement (the Board's JSON result is the
    path that reaches here)."""
    if _LONE_SURROGATE.search(text):
        raise Invalid(
            f"{field} contains a lone surrogate (a code point in U+D800..U+DFFF), which is "
            "not Unicode text."
        )


def storable(text: str, *, field: str) -> str:
    """``text`` as PostgreSQL text can hold it. A NUL is replaced by U+FFFD, not refused: it
    is valid JSON (``"\\u0000"``) and real output carries one, so it is stored, marked."""
    refuse_lone_surrogates(text, field=field)
    return text.replace("\x00", "\ufffd")


def truncate_utf8(text: str, max_bytes: int) -> tuple[str, bool, int]:
    """Cut ``text`` to at most ``max_bytes`` of UTF-8 without splitting a character."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text, False, len(raw)
    # errors="ignore" drops the partial character left at the cut.
    return raw[:max_bytes].decode("utf-8", errors="ignore"), True, len(raw)


def bound(value: object, *, field: str, max_bytes: int) -> Bounded:
    if value is None:
        return NOTHING
    if not isinstance(value, str):
        raise Invalid(f"{field} must be a string.")
    text, truncated, size = truncate_utf8(storable(value, field=field), max_bytes)
    return Bounded(text, truncated, size)


def bound_summary(value: object) -> Bounded:
    return bound(value, field="summary", max_bytes=SUMMARY_MAX_BYTES)


def bound_claimant(value: object) -> Bounded:
    return bound(value, field="claimant", max_bytes=CLAIMANT_MAX_BYTES)


def bound_mcp_session_id(value: object) -> Bounded:
    return bound(value, field="mcp_session_id", max_bytes=MCP_SESSION_ID_MAX_BYTES)


def bound_artifact(value: object) -> Bounded:
    """An artifact is a handle, never fetched: only ``mcp://`` or ``https://``."""
    if value is None:
        return NOTHING
    if not isinstance(value, str):
        raise Invalid("artifact must be a string.")
    if not value.lower().startswith(ARTIFACT_SCHEMES):
        raise Invalid("artifact must be an mcp:// handle or an https:// URL.")
    return bound(value, field="artifact", max_bytes=ARTIFACT_MAX_BYTES)


def bound_not_before(value: object) -> datetime | None:
    """``not_before`` as the instant in UTC, refused (Invalid) beyond SNOOZE_SECONDS_MAX from
    now, the bound ``delay_seconds`` has. An instant already past is allowed: claimable now."""
    if value is None:
        return None
    when = instant(value, "not_before")
    if when > timezone.now() + timedelta(seconds=SNOOZE_SECONDS_MAX):
        raise Invalid(
            f"not_before must be at most 30 days ({SNOOZE_SECONDS_MAX} seconds) from now, "
            "as delay_seconds."
        )
    return when


def bound_result(value: object) -> object:
    """A result over 64 KiB (as compact JSON) is stored as a marked prefix."""
    if value is None:
        return None
    if _depth_over(value, RESULT_MAX_DEPTH):
        raise Invalid(f"result must nest at most {RESULT_MAX_DEPTH} levels deep.")
    try:
        encoded = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise Invalid("result must be JSON.") from exc
    refuse_lone_surrogates(encoded, field="result")  # in keys and strings alike
    encoded = encoded.replace("\\u0000", "\\ufffd")  # jsonb rejects NUL in strings
    size = len(encoded.encode("utf-8"))
    if size <= RESULT_MAX_BYTES:
        return json.loads(encoded) if "\\ufffd" in encoded else value
    prefix, _, _ = truncate_utf8(encoded, RESULT_MAX_BYTES - 256)
    return {"truncated": True, "bytes": size, "prefix": prefix}


def _depth_over(value: object, limit: int) -> bool:
    """Does ``value`` nest lists/objects more than ``limit`` deep? Iterative: a result
    deeper than the Python stack must be refused, not crash json.dumps here or on the Board."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False


def summary_from_result(result: object) -> Bounded:
    """SWITCHBOARD_ATTEMPT_SUMMARY_FROM_RESULT: compact JSON of the result, truncated."""
    if result is None:
        return NOTHING
    encoded = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    return bound(encoded, field="summary", max_bytes=SUMMARY_MAX_BYTES)
