"""The MCP tools' input schemas keep the rules of OpenAI's strict mode (Structured Outputs,
"Supported schemas"), which openai-agents converts MCP tools to with
``convert_schemas_to_strict``: a tool whose schema breaks one is sent non-strict.

The rules, as OpenAI documents them: the root is an object, not ``anyOf``; every node says
its ``type`` (or is an ``anyOf``); every object sets ``additionalProperties: false`` and
declares its properties; no ``allOf``, ``not``, ``if``/``then``/``else``,
``dependentRequired``/``dependentSchemas``; at most 10 levels of nested objects; a
``format`` only from the supported list. openai-agents adds one of its own for MCP tools: no
``$ref`` left (it refuses a reference it has not checked), which ``then`` was, in complete,
fail and release, until it was written out in place.

Checked against openai-agents 0.24.0's own ``agents.strict_schema.ensure_strict_json_schema``
(with ``_reject_open_objects=True``, as its MCP tools use it), in a virtualenv of its own
(its package ``agents`` collides with ours): every tool passes but complete and fail, which
it refuses for ``result`` alone, "an object that permits undeclared properties". That is one
exception here, and it stays: ``result`` is any JSON value the work produced, and strict
mode cannot say "an object with any keys" (docs/api.md, "Strict tool schemas"). For the same
reason release (its ``answer_schema``, a JSON Schema object) and answer (its ``value``) are
sent non-strict: a release without a question loses nothing by it."""

from __future__ import annotations

import pytest

from switchboard.queues.models import VERBS
from tests.agents.test_mcp_frames import _post

pytestmark = pytest.mark.django_db(transaction=True)

FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
UNSUPPORTED = {"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas"}
MOST_OBJECT_LEVELS = 10
# The exceptions (see the module's docstring): result, any JSON value; a question's
# answer_schema, a JSON Schema object whose property names are the asker's; an answer's
# value, any JSON value its question takes.
ANY_JSON = ["result: an object of any keys", "result: an array of anything"]
EXCEPTIONS = {
    "complete": ANY_JSON,
    "fail": ANY_JSON,
    "release": ["answer_schema: an object of any keys"],
    "answer": ["value: an object of any keys", "value: an array of anything"],
}


def strict_problems(schema: dict) -> list[str]:
    """Where ``schema`` breaks a strict-mode rule: one line each, by its path."""
    problems = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("(root): not a plain object")
    _walk(schema, "", 0, problems, is_property_map=False)
    return problems


def _walk(node: object, path: str, objects: int, problems: list[str], *, is_property_map: bool):
    if not isinstance(node, dict):
        return
    if is_property_map:  # the names under "properties": each a schema
        for name, child in node.items():
            _walk(child, f"{path}.{name}".lstrip("."), objects, problems, is_property_map=False)
        return
    where = path or "(root)"
    if "$ref" in node or "$defs" in node:
        problems.append(f"{where}: a reference")
    if "oneOf" in node:
        problems.append(f"{where}: oneOf")
    for keyword in UNSUPPORTED & set(node):
        problems.append(f"{where}: {keyword}")
    kind = node.get("type")
    if kind is None and "anyOf" not in node:
        problems.append(f"{where}: no type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "object" in kinds:
        objects += 1
        if objects > MOST_OBJECT_LEVELS:
            problems.append(f"{where}: objects nested over {MOST_OBJECT_LEVELS} deep")
        if node.get("additionalProperties") is not False or "properties" not in node:
            problems.append(f"{where}: an object of any keys")
    if "array" in kinds and "items" not in node:
        problems.append(f"{where}: an array of anything")
    if "format" in node and node["format"] not in FORMATS:
        problems.append(f"{where}: format {node['format']}")
    _walk(node.get("properties"), path, objects, problems, is_property_map=True)
    _walk(node.get("items"), f"{path}[]", objects, problems, is_property_map=False)
    for option in node.get("anyOf") or []:
        _walk(option, path, objects, problems, is_property_map=False)


def test_every_tool_schema_keeps_the_strict_rules_but_result_of_any_shape(live_server, vend):
    _, token = vend("strict")

    response = _post(
        live_server.url,
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        token=token,
    )

    tools = {tool["name"]: tool["inputSchema"] for tool in response.json()["result"]["tools"]}
    assert set(tools) == set(VERBS)
    found = {name: strict_problems(schema) for name, schema in tools.items()}
    assert found == {name: EXCEPTIONS.get(name, []) for name in tools}


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}, "a: a reference"),
        ({"type": "object", "properties": {}}, "(root): an object of any keys"),
        ({"anyOf": [{"type": "object"}]}, "(root): not a plain object"),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": False},
            "a: no type",
        ),
    ],
)
def test_the_strict_rules_catch_what_they_name(schema, problem):
    """The checker can fail: each rule, broken once."""
    assert problem in strict_problems(schema)
