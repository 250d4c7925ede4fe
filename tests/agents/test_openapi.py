"""The OpenAPI document describes asking a person (issue 43): release's asking arguments,
the answer verb, the waiting state and the question object with its answer."""

from __future__ import annotations

from switchboard.agents import openapi
from switchboard.queues import bounds


def _schemas() -> dict:
    return openapi.document()["components"]["schemas"]


def _option(schema: dict) -> dict:
    """An optional field's own schema (the option of its anyOf that is not null)."""
    return next((o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"), schema)


def test_release_takes_the_asking_arguments_each_described():
    release = _schemas()["Release"]["properties"]
    for name in ("question", "choices", "answer_schema", "answer_within_seconds", "on_no_answer"):
        assert _option(release[name])["description"], name
    assert str(bounds.QUESTION_MAX_BYTES) in _option(release["question"])["description"]
    assert set(_option(release["on_no_answer"])["enum"]) == {"requeue", "dead_letter"}
    operation = openapi.document()["paths"]["/api/v1/release"]["post"]
    assert "With `question`, ask" in operation["description"]


def test_answer_is_a_verb_with_its_errors():
    operation = openapi.document()["paths"]["/api/v1/answer"]["post"]
    assert operation["requestBody"]["required"] is True
    assert {"400", "403", "404", "409"} <= set(operation["responses"])
    assert "already answered" in operation["responses"]["409"]["description"]
    params = _schemas()["Answer"]
    assert set(params["required"]) == {"todo_id", "value"}
    assert params["additionalProperties"] is False
    assert "choices" in params["properties"]["value"]["description"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/AnswerOut"
    }


def test_a_todo_may_be_waiting_with_its_question_and_an_attempt_holds_its_answer():
    schemas = _schemas()
    todo = schemas["TodoOut"]["properties"]
    assert "waiting" in todo["state"]["enum"]
    assert _option(todo["waiting_for"])["enum"] == ["children", "people", "todos"]
    assert _option(todo["question"]) == {"$ref": "#/components/schemas/QuestionOut"}
    assert schemas["TodoDetailOut"]["properties"]["questions"]["items"] == {
        "$ref": "#/components/schemas/QuestionOut"
    }
    assert _option(schemas["AttemptOut"]["properties"]["question"]) == {
        "$ref": "#/components/schemas/QuestionOut"
    }
    question = schemas["QuestionOut"]
    assert {"text", "choices", "answer_schema", "asked_at", "ending", "answer"} <= set(
        question["required"]
    )
    assert "untrusted" in question["description"]
    assert set(_option(question["properties"]["ending"])["enum"]) == {
        "answered",
        "unanswered",
        "withdrawn",
    }
    assert set(schemas["AnswerGiven"]["required"]) == {"value", "answered_at", "answered_by"}
    assert set(schemas["AnsweredBy"]["properties"]["kind"]["enum"]) == {"person", "endpoint"}
    assert "asked" in schemas["AttemptOut"]["properties"]["outcome"]["anyOf"][0]["enum"]


def test_the_capability_document_names_questions_and_their_bounds():
    capabilities = openapi.capabilities()
    assert capabilities["features"]["questions"] == {
        "ask": "release",
        "answer": "answer",
        "state": "waiting",
    }
    assert "answer" in capabilities["verbs"]


def test_an_argument_that_is_a_choice_of_words_says_it_is_a_string():
    """Strict tool schemas want every node typed: a choice's enum comes with "type"."""
    schemas = _schemas()
    for struct, field in (
        ("CreateTodo", "after_policy"),
        ("ListTodos", "state"),
        ("Release", "on_no_answer"),
    ):
        choice = _option(schemas[struct]["properties"][field])
        assert choice["type"] == "string" and choice["enum"], (struct, field, choice)
