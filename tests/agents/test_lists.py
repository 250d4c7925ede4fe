"""One source for each list: the verbs, states, outcomes, dispositions, audit kinds and bounds
live in the ledger (queues.models, queues.bounds); the API's schemas, the OpenAPI document,
the MCP tools, the clients and the Board's forms agree with them."""

from __future__ import annotations

import typing

import pytest

from switchboard import client
from switchboard.agents import mcp, openapi, schemas, verbs
from switchboard.board.forms import TodoForm
from switchboard.queues import bounds
from switchboard.queues.models import VERBS, Disposition, Outcome, TodoState


def _literal(annotation) -> set[str]:
    args = typing.get_args(annotation)
    values = set()
    for arg in args:
        values |= _literal(arg) if typing.get_origin(arg) is not None else set()
    return values | {arg for arg in args if isinstance(arg, str)}


def test_every_surface_has_the_same_verbs_in_the_same_order():
    assert tuple(verbs.REGISTRY) == VERBS
    assert tuple(client.VERBS) == VERBS
    assert set(mcp.server._tools) == set(VERBS)  # django-mcpz keeps its tools by name
    paths = openapi.document()["paths"]
    assert [p.removeprefix("/api/v1/") for p in paths] == list(VERBS)
    assert openapi.capabilities()["verbs"] == list(VERBS)


def test_a_system_check_says_when_the_declared_verbs_and_the_ledgers_disagree(monkeypatch):
    from django.core import checks

    from switchboard.queues import verbs as names

    assert [m for m in checks.run_checks() if m.id == "agents.E001"] == []
    monkeypatch.setattr(names, "VERBS", (*VERBS, "snooze_forever"))
    [error] = [m for m in checks.run_checks() if m.id == "agents.E001"]
    assert "snooze_forever" in error.hint


def test_states_outcomes_and_dispositions_come_from_the_models():
    assert _literal(schemas.State) == set(TodoState.values)
    assert _literal(schemas.OutcomeName) == set(Outcome.values)
    assert _literal(schemas.DispositionName) == set(Disposition.values)


def _property(verb: str, name: str) -> dict:
    params = verbs.REGISTRY[verb].params
    doc = openapi.document()["components"]["schemas"][params.__name__]["properties"][name]
    return next((option for option in doc.get("anyOf", [doc]) if option.get("type")), doc)


@pytest.mark.parametrize(
    ("verb", "field", "key", "value"),
    [
        ("create_todo", "title", "maxLength", bounds.TITLE_MAX_CHARS),
        ("create_todo", "body", "maxLength", bounds.BODY_MAX_BYTES),
        ("create_todo", "priority", "minimum", bounds.PRIORITY_MIN),
        ("create_todo", "priority", "maximum", bounds.PRIORITY_MAX),
        ("create_todo", "max_attempts", "maximum", bounds.MAX_ATTEMPTS_MAX),
        ("create_todo", "idempotency_key", "maxLength", bounds.IDEMPOTENCY_KEY_MAX_CHARS),
        ("claim_next", "lease_seconds", "maximum", bounds.LEASE_SECONDS_MAX),
        ("claim_next", "wait_seconds", "maximum", bounds.WAIT_SECONDS_MAX),
        ("heartbeat", "attempt_seq", "maximum", bounds.ATTEMPT_SEQ_MAX),
        ("heartbeat", "lease_token", "maxLength", bounds.LEASE_TOKEN_MAX_CHARS),
        ("list_todos", "limit", "maximum", bounds.LIST_MAX),
        ("get_todo", "attempts_limit", "maximum", bounds.ATTEMPTS_MAX),
        ("release", "choices", "minItems", bounds.CHOICES_MIN),
        ("release", "choices", "maxItems", bounds.CHOICES_MAX),
        ("release", "answer_within_seconds", "minimum", bounds.ANSWER_WITHIN_SECONDS_MIN),
        ("release", "answer_within_seconds", "maximum", bounds.ANSWER_WITHIN_SECONDS_MAX),
    ],
)
def test_the_openapi_bounds_are_the_ledgers(verb, field, key, value):
    assert _property(verb, field)[key] == value


def test_the_capability_document_and_the_board_form_use_the_same_bounds():
    limits = openapi.capabilities()["limits"]
    assert limits["title_chars"] == bounds.TITLE_MAX_CHARS
    assert limits["body_bytes"] == bounds.BODY_MAX_BYTES
    assert limits["summary_bytes"] == bounds.SUMMARY_MAX_BYTES
    assert limits["lease_seconds"] == bounds.LEASE_SECONDS_MAX
    assert limits["question_bytes"] == bounds.QUESTION_MAX_BYTES
    assert (limits["choices"], limits["choice_chars"]) == (
        bounds.CHOICES_MAX,
        bounds.CHOICE_MAX_CHARS,
    )
    assert limits["answer_schema_fields"] == bounds.ANSWER_SCHEMA_FIELDS_MAX
    assert limits["answer_text_bytes"] == bounds.ANSWER_TEXT_MAX_BYTES
    assert limits["answer_within_seconds"] == bounds.ANSWER_WITHIN_SECONDS_MAX
    from switchboard.queues.transitions.waits import AFTER_MAX

    assert (limits["after_ids"], limits["key_chars"]) == (AFTER_MAX, bounds.KEY_MAX_CHARS)
    waits = openapi.capabilities()["features"]["waits"]
    assert waits["waiting_for"] == ["people", "todos", "children"]
    assert openapi.capabilities()["features"]["long_poll"]["max_wait_seconds"] == (
        bounds.WAIT_SECONDS_MAX
    )
    form = TodoForm(team_ids=[])
    assert form.fields["title"].max_length == bounds.TITLE_MAX_CHARS
    assert form.fields["priority"].min_value == bounds.PRIORITY_MIN
    assert form.fields["priority"].max_value == bounds.PRIORITY_MAX
    assert form.fields["max_attempts"].max_value == bounds.MAX_ATTEMPTS_MAX


def test_each_verbs_arguments_are_its_transitions_parameters_by_name(monkeypatch):
    """A verb's wire struct and its transition are declared to match (agents.E002), not
    assumed to: a field the transition does not take, or one it takes that the struct
    lacks, is said by the system check."""
    from dataclasses import replace

    from django.core import checks

    from switchboard.agents.checks import wire_mismatches

    assert wire_mismatches() == []
    assert [m for m in checks.run_checks() if m.id == "agents.E002"] == []

    class Misspelt(schemas.Ending):
        result: object = None
        retry_able: bool = True  # not Close.fail's ``retryable``

    monkeypatch.setitem(verbs.REGISTRY, "fail", replace(verbs.REGISTRY["fail"], params=Misspelt))
    [line] = wire_mismatches()
    assert "fail" in line and "retry_able" in line and "retryable" in line
