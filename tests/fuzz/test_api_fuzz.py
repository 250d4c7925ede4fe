"""Fuzzing the agent API from its own OpenAPI document (schemathesis), over a real HTTP server.

Every verb, with a valid token and without one. With a valid token every response must be
documented (status code, content type, body schema), never a 5xx (a 503 too: the database is
up, so a 503 here would be a database error the API hid), a malformed body must be `invalid`
(400), and an error's code must match its status. The same request from an intruder (no
token, a wrong one, a revoked endpoint's, the token under another scheme, an empty one) is
`unauthorized` whatever the body, and from an endpoint without the verb `forbidden`. /mcp
gets JSON-RPC envelopes and tools/call with arbitrary arguments: never a 5xx.

The fuzzer reaches real states: the world below has todos in every state, fenced, unfenced
and lapsed leases, a todo sent to a peer and a foreign team's todo, and the fuzzing phase
swaps generated ids, attempt seqs, lease tokens, artifacts, cursors and agent_ids for real
ones (including ones the run harvested from its own claims and lists), each most of the time.

`make test` runs a bounded pass with fixed draws (SWITCHBOARD_FUZZ_EXAMPLES unset: the same
examples every run, so an unrelated commit never fails on a new random draw); `make fuzz`
sets SWITCHBOARD_FUZZ_EXAMPLES=500 and draws fresh examples every run. Failures found so far
are pinned in test_api_regressions.py.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import hypothesis.strategies as st
import msgspec
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from switchboard.agents import openapi, schemas, wire
from switchboard.agents.verbs import REGISTRY
from switchboard.queues import bounds, transitions
from switchboard.queues.transitions import Actor
from tests import loopback

pytestmark = pytest.mark.django_db(transaction=True)

OPENAPI_PATH = "/api/v1/openapi.json"
LONG_RUN = bool(os.environ.get("SWITCHBOARD_FUZZ_EXAMPLES"))
# Per operation, on top of the coverage phase's fixed cases (about 50 per verb).
EXAMPLES = int(os.environ.get("SWITCHBOARD_FUZZ_EXAMPLES") or 20)
MCP_EXAMPLES = EXAMPLES * 3
# claim_next long-polls up to wait_seconds (<= 30): capped so that a pass stays bounded (the
# long-poll itself is tested in tests/queues/test_doorbell.py).
WAIT_CAP_SECONDS = 0.2
# Anything slower is a hang: the slowest legitimate call is the capped long-poll.
REQUEST_TIMEOUT_SECONDS = 15
STATUS_OF_CODE = {
    "invalid": {400, 405},
    "unauthorized": {401},
    "forbidden": {403},
    "not_found": {404},
    "conflict": {409},
    "rate_limited": {429},
    "unavailable": {503},
}
ATTEMPT_VERBS = {"heartbeat", "complete", "fail", "release", "cancel"}
# (verb, caller, status) -> responses; tests/fuzz/conftest.py prints it after a long run.
TALLY: Counter[tuple[str, str, int]] = Counter()


def _served_document() -> dict:
    """The document as the server serves it (its JSON), made at collection (it reads no
    table); test_the_fuzzed_document_is_the_one_the_live_server_serves closes the loop."""
    return json.loads(wire.encode(openapi.document()))


CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {
            "mode": "all",
            "max-examples": EXAMPLES,
            "deterministic": not LONG_RUN,
            "database": "none",
            # Credentials are ours to choose (a valid token, then an intruder's), not the
            # generator's: it would send made-up bearer tokens.
            "with-security-parameters": False,
        },
        "phases": {"stateful": {"enabled": False}},  # the document has no links
        "checks": {"negative_data_rejection": {"expected-statuses": ["400"]}},
        "request-timeout": REQUEST_TIMEOUT_SECONDS,
    }
)
# schemathesis.pytest.from_fixture (a schema loaded from the live server at run time) fails
# under pytest 9.2 (it sets Function._nodeid, which pytest 9.2 nodes no longer have), so the
# schema is loaded at collection and only the base URL comes from the live server.
schema = schemathesis.openapi.from_dict(_served_document(), config=CONFIG)

VALID_TOKEN_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    unsupported_method,
    allow_header_conformance,
]
SHAPE_CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


# --- The world the fuzzer works in ------------------------------------------------------


@dataclass
class World:
    base_url: str
    token: str
    intruders: list[tuple[str, dict[str, str]]]
    agent_ids: list[str]
    todo_ids: list[int]
    leases: list[dict[str, Any]] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)  # the todos waiting on a question
    cursors: list[str] = field(default_factory=list)

    def next_intruder(self) -> tuple[str, dict[str, str]]:
        """The intruders take turns, one per example."""
        self.intruders.append(self.intruders.pop(0))
        return self.intruders[-1]

    def harvest(self, verb: str, response) -> None:
        """Remember what the server handed out, so later examples can use it."""
        if response.status_code != 200:
            return
        body = response.json()
        for todo in body.get("todos") or [body.get("todo")]:
            if todo and todo["id"] not in self.todo_ids:
                self.todo_ids.append(todo["id"])
        if body.get("next_cursor"):
            self.cursors.append(body["next_cursor"])
        if verb in ("claim", "claim_next") and body.get("todo"):
            self.leases.append(
                {
                    "todo_id": body["todo"]["id"],
                    "attempt_seq": body["attempt_seq"],
                    "lease_token": body.get("lease_token"),
                }
            )


WORLD: World | None = None
ANSWER_FORM = {
    "type": "object",
    "properties": {"approve": {"type": "boolean"}, "amount": {"type": "integer"}},
    "required": ["approve"],
}
# Answers that fit the world's questions, and some that fit none of them.
ANSWERS = ["yes", {"approve": True, "amount": 840}, "the second one", "no", {"approve": "y"}]


@pytest.fixture
def world(live_server, vend, make_user):
    """Todos in every state on the fuzzer's queue, and the others' endpoints and todos."""
    global WORLD
    endpoint, token = vend("fuzzer")
    peer, _ = vend("peer")
    _, narrow_token = vend("narrow", verbs="get_todo")
    gone, gone_token = vend("gone")
    stranger, _ = vend("stranger", team=make_user("bob").teams.get())
    agent = Actor.agent(endpoint)

    def todo(title: str, *, on=endpoint, requester=None, **kwargs) -> int:
        sender = Actor.agent(requester or on)
        return transitions.create_todo(sender, endpoint=on, title=title, **kwargs)[0].id

    ids = [todo(f"pending {n}", priority=n) for n in range(4)]
    leases = []
    for title, max_attempts, claim_kwargs in [
        ("held, unfenced", 5, {}),
        ("held, fenced", 5, {"require_fence": True, "claimant": "seed/fenced"}),
        # lapsed by the time the fuzzer gets there: a claim takes it over (lease_expired),
        # or dead-letters it at the cap
        ("lapsed", 5, {"lease_seconds": 1}),
        ("lapsed on its last attempt", 1, {"lease_seconds": 1}),
    ]:
        ids.append(todo(title, max_attempts=max_attempts))
        claimed = transitions.claim(agent, ids[-1], **claim_kwargs)
        leases.append(
            {
                "todo_id": ids[-1],
                "attempt_seq": claimed.attempt_seq,
                "lease_token": claimed.lease_token,
            }
        )
    for title, max_attempts, end in [
        ("retry_wait", 5, transitions.fail),
        ("dead", 1, transitions.fail),
        ("done", 5, transitions.complete),
        ("released", 5, transitions.release),
    ]:
        ids.append(todo(title, max_attempts=max_attempts))
        seq = transitions.claim(agent, ids[-1]).attempt_seq
        end(agent, ids[-1], attempt_seq=seq, summary=f"seeded {title}")
        leases.append({"todo_id": ids[-1], "attempt_seq": seq, "lease_token": None})
    ids.append(todo("canceled"))
    transitions.cancel(agent, ids[-1])
    waiting: list[int] = []
    # Waiting on people, one question of each kind: answer's swaps below reach each check
    # (a choice, a form's fields, free text) and, once one is answered, its conflict.
    for title, asked in [
        ("waiting on people", {"choices": ["yes", "no"]}),
        ("waiting on a form", {"answer_schema": ANSWER_FORM}),
        ("waiting on free text", {"answer_within_seconds": 3600}),
    ]:
        ids.append(todo(title))
        waiting.append(ids[-1])
        seq = transitions.claim(agent, ids[-1]).attempt_seq
        transitions.release(agent, ids[-1], attempt_seq=seq, question="Go ahead?", **asked)
    ids.append(todo("sent to the peer", on=peer, requester=endpoint))
    ids.append(todo("a foreign team's", on=stranger))
    ids.append(todo("left on a revoked endpoint", on=gone))
    transitions.revoke_endpoint(None, gone)
    ids.append(2**62)  # unknown

    WORLD = World(
        base_url=live_server.url,
        token=token,
        intruders=[
            ("none", {}),
            ("wrong", {"Authorization": "Bearer sbe_not-a-token"}),
            ("narrow", {"Authorization": f"Bearer {narrow_token}"}),
            ("revoked", {"Authorization": f"Bearer {gone_token}"}),
            ("basic", {"Authorization": f"Basic {token}"}),
            ("empty", {"Authorization": "Bearer "}),
        ],
        agent_ids=[endpoint.agent_id, peer.agent_id, stranger.agent_id, gone.agent_id, "nobody"],
        todo_ids=ids,
        leases=leases,
        waiting=waiting,
    )
    yield WORLD
    WORLD = None


# --- Steering generated bodies towards real ids (the fuzzing phase) ----------------------


def _is_id(value: object) -> bool:
    """A valid id: a positive integer, or a whole-number float (JSON has no integers; the
    schemas take 347.0 for 347)."""
    if type(value) is float:
        return value.is_integer() and 1 <= value <= 2**63 - 1
    return type(value) is int and value >= 1


def _is_optional_text(value: object, *, most: int = 10**6) -> bool:
    return value is None or (type(value) is str and 1 <= len(value) <= most)


# The schemas' own rules for these two (a value breaking them makes a negative example,
# which a swap must not turn into a valid one).
ARTIFACT = re.compile(bounds.ARTIFACT_PATTERN)
CURSOR = re.compile(f"[A-Za-z0-9_-]{{1,{bounds.CURSOR_MAX_CHARS}}}\\Z")


def _fits(value: object, rule: re.Pattern) -> bool:
    return value is None or (type(value) is str and rule.match(value) is not None)


def _maybe(values: list, key: str | None = None) -> st.SearchStrategy[dict]:
    """One of ``values`` (as {key: value}, or a dict as is), or sometimes nothing: the swap
    comes first, which Hypothesis draws more often and shrinks towards (the coverage phase
    already sends unknown ids).

    The harvested lists grow during a run, and Hypothesis refuses a strategy whose draws
    change shape on replay (FlakyStrategyDefinition): so the draw is an index of a fixed
    range, read modulo the list (as it is then) when mapped."""

    def pick(index: int) -> dict:
        value = values[index % len(values)] if values else None
        return value if key is None else {key: value}

    return st.one_of(st.integers(0, 255).map(pick), st.just({}))


@schema.hook
def flatmap_body(context, body):
    """Swap generated values for real ones, each independently most of the time, so that valid
    requests reach claims, completions and failures rather than 404 and conflict. A value is
    swapped only when it is valid itself, so a negative example (invalid elsewhere) stays
    negative."""
    if WORLD is None or not isinstance(body, dict):
        return st.just(body)
    verb = context.operation.path.rsplit("/", 1)[-1]
    swaps = []
    if _is_id(body.get("todo_id")):
        # An answer mostly to a todo that waits on one (the coverage phase sends the rest).
        swaps.append(_maybe(WORLD.waiting if verb == "answer" else WORLD.todo_ids, "todo_id"))
        if (
            verb in ATTEMPT_VERBS
            and (body.get("attempt_seq") is None or _is_id(body["attempt_seq"]))
            and _is_optional_text(body.get("lease_token"), most=200)
        ):
            swaps.append(_maybe(WORLD.leases))
    if "artifact" in body and _fits(body["artifact"], ARTIFACT):
        swaps.append(_maybe(["https://ci.example/run/42", "mcp://cairn/r-42", None], "artifact"))
    if verb == "answer" and "value" in body:  # any JSON is a value the schema takes
        swaps.append(_maybe(ANSWERS, "value"))
    if verb == "create_todo" and _is_optional_text(body.get("to")):
        swaps.append(_maybe([*WORLD.agent_ids, None], "to"))
    if verb == "create_todo" and _is_optional_text(body.get("idempotency_key"), most=200):
        swaps.append(_maybe(["nightly-1", "nightly-2"], "idempotency_key"))
    if verb == "list_todos" and _fits(body.get("cursor"), CURSOR):
        swaps.append(_maybe(WORLD.cursors, "cursor"))  # None until a page had a next one
    if not swaps:
        return st.just(body)
    return st.tuples(*swaps).map(lambda parts: {k: v for d in (body, *parts) for k, v in d.items()})


def bounded(body: object, verb: str) -> None:
    """Cap claim_next's long-poll, in every phase (the coverage phase sends the documented
    maximum, 30 s, and bypasses the generation hooks)."""
    if verb == "claim_next" and isinstance(body, dict):
        wait = body.get("wait_seconds")
        if type(wait) in (int, float) and 0 <= wait <= 30:
            body["wait_seconds"] = min(wait, WAIT_CAP_SECONDS)


# --- Checks of our own, beyond the document ----------------------------------------------


def error_code_matches_status(ctx, response, case) -> None:
    """An error's code names its status; a 401 says how to authenticate; nothing is cached."""
    assert response.headers.get("cache-control") == ["no-store"], response.headers
    if response.status_code == 200:
        return
    error = json.loads(response.content)["error"]
    assert response.status_code in STATUS_OF_CODE[error["code"]], (response.status_code, error)
    assert error["message"], error
    if response.status_code == 401:
        assert response.headers.get("www-authenticate"), response.headers


def only(status: int):
    def answers_with(ctx, response, case) -> None:
        assert response.status_code == status, (response.status_code, response.content)

    answers_with.__name__ = f"answers_{status}"
    return answers_with


# --- The tests ---------------------------------------------------------------------------


def verb_of(case) -> str:
    return case.operation.path.rsplit("/", 1)[-1]


def call(case, world: World, caller: str, headers: dict[str, str]):
    response = case.call(base_url=world.base_url, headers=headers, timeout=REQUEST_TIMEOUT_SECONDS)
    TALLY[(verb_of(case), caller, response.status_code)] += 1
    return response


def validate(case, response, world: World, headers: dict[str, str], checks: list) -> None:
    case.validate_response(
        response,
        checks=checks,
        headers=headers,
        transport_kwargs={"base_url": world.base_url},
    )


def test_the_fuzzed_document_is_the_one_the_live_server_serves(live_server):
    served = loopback.get(f"{live_server.url}{OPENAPI_PATH}", timeout=10)
    assert served.status_code == 200
    assert served.headers["Content-Type"] == "application/json"
    assert served.json() == schema.raw_schema
    assert {path.rsplit("/", 1)[-1] for path in schema.raw_schema["paths"]} == set(REGISTRY)


def test_the_world_has_a_todo_in_every_state(world):
    """A fuzz run that never leaves `pending` would prove little."""
    auth = {"Authorization": f"Bearer {world.token}"}
    listed = loopback.post(f"{world.base_url}/api/v1/list_todos", json={}, headers=auth)
    todos = msgspec.convert(listed.json(), schemas.ListTodosOut).todos
    assert {todo.state for todo in todos} == set(schemas.State.__args__)


@schema.parametrize()
@settings(suppress_health_check=list(HealthCheck), deadline=None)
def test_every_verb_answers_as_documented_whoever_calls(case, world):
    """With a valid token: documented answers only, no 5xx, malformed bodies invalid. Then
    the same request from the next intruder: unauthorized, or forbidden for an endpoint
    without the verb (get_todo is in its set: then only the shape is checked).

    One test item per verb with every caller in it: each item pays for a live-server world
    (seed, then flush the database), which costs more than the fuzzing itself."""
    verb = verb_of(case)
    bounded(case.body, verb)
    auth = {"Authorization": f"Bearer {world.token}"}
    response = call(case, world, "token", auth)
    world.harvest(verb, response)
    checks = [*VALID_TOKEN_CHECKS, error_code_matches_status]
    validate(case, response, world, auth, checks)
    if case.method != "POST":
        return  # the coverage phase's other methods: 405 before authentication

    intruder, headers = world.next_intruder()
    response = call(case, world, intruder, headers)
    checks = [*SHAPE_CHECKS, error_code_matches_status]
    if intruder != "narrow":
        checks.append(only(401))
    elif verb != "get_todo":
        checks.append(only(403))
    validate(case, response, world, headers, checks)


# --- /mcp: JSON-RPC with arbitrary arguments ---------------------------------------------


def _json_values() -> st.SearchStrategy:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=12,
    )


def _schema_arguments(verb: str) -> st.SearchStrategy:
    """Arguments shaped by the verb's schema, valid and not (the same generator as HTTP)."""
    operation = schema[f"/api/v1/{verb}"]["POST"]
    return st.one_of(
        # A negative case may have no body at all (NOT_SET): as arguments, none ({}).
        operation.as_strategy(generation_mode=mode).map(
            lambda case: {} if case.body is NOT_SET else case.body
        )
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    )


def _tools_call() -> st.SearchStrategy:
    names = st.sampled_from([*REGISTRY, "claim_everything"])
    return names.flatmap(
        lambda name: st.fixed_dictionaries(
            {
                "name": st.just(name),
                "arguments": (_schema_arguments(name) if name in REGISTRY else _json_values())
                | _json_values(),
            }
        )
    )


def _envelopes() -> st.SearchStrategy:
    """Mostly tools/call requests; then any method, notifications, and plain JSON junk."""
    request_ids = st.integers(-(2**53), 2**53) | st.text(max_size=8)
    tools_call = st.fixed_dictionaries(
        {
            "jsonrpc": st.just("2.0"),
            "id": request_ids,
            "method": st.just("tools/call"),
            "params": _tools_call(),
        }
    )
    anything = st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "method": st.text(max_size=20) | st.just("tools/call")},
        optional={"id": _json_values(), "params": _json_values()},
    )
    return st.one_of(tools_call, tools_call, tools_call, anything, _json_values())


@settings(
    max_examples=MCP_EXAMPLES,
    deadline=None,
    derandomize=not LONG_RUN,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(message=_envelopes())
def test_mcp_never_answers_with_a_server_error(world, message):
    """JSON-RPC requests, tools/call with arguments of any shape, and plain junk (an array of
    it is a 2025-03-26 batch): a JSON answer below 500 (a tool's result matches the verb's
    schema)."""
    if isinstance(message, dict) and isinstance(message.get("params"), dict):
        params = message["params"]
        arguments = params.get("arguments")
        if isinstance(arguments, bytes):  # a negative body that is not JSON at all
            params["arguments"] = arguments.decode("latin-1")
        bounded(params.get("arguments"), params.get("name"))
    response = loopback.post(
        f"{world.base_url}/mcp",
        # json.dumps, not httpx's: infinities go out as Infinity, which is junk JSON to parse
        content=json.dumps(message),
        headers={
            "Authorization": f"Bearer {world.token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
        timeout=REQUEST_TIMEOUT_SECONDS,
    )
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code == 202:
        TALLY[("mcp", "notification", 202)] += 1
        return  # a notification (no id), or a batch of them: nothing to answer
    assert response.headers["Content-Type"].startswith("application/json"), response.headers
    answer = response.json()
    if isinstance(message, list) and isinstance(answer, list):
        # A batch (2025-03-26: no version header): one answer a request in it, in order.
        requests = [m for m in message if isinstance(m, dict) and "id" in m and "method" in m]
        assert len(answer) >= len(requests), (message, answer)
        for each in answer:
            _check_answer(each, None, response.status_code)
        return
    _check_answer(answer, message, response.status_code)


def _check_answer(answer: dict, message: object, status: int) -> None:
    outcome = "rpc-error" if "error" in answer else "tool-error"
    if answer.get("result", {}).get("isError") is False:
        outcome = "tool-result"
    TALLY[("mcp", outcome, status)] += 1
    assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer), answer
    result = answer.get("result")
    if (
        isinstance(message, dict)
        and isinstance(result, dict)
        and result.get("isError") is False
        and "structuredContent" in result
    ):
        name = message["params"]["name"]
        msgspec.convert(result["structuredContent"], REGISTRY[name].output)
