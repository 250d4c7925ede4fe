"""The OpenAPI document and the capability document of the agent API, generated from the
verbs' declarations (agents/verbs.py: the same structs that decode requests), never kept by
hand."""

from __future__ import annotations

from functools import cache

import msgspec

from switchboard.agents import schemas
from switchboard.agents.verbs import REGISTRY
from switchboard.queues.records import UNTRUSTED_NOTICE

ERRORS = {
    "400": "invalid: malformed JSON, wrong types, unknown fields, a body over 1 MiB",
    "401": "unauthorized: no token, a wrong token, or a revoked endpoint",
    "403": "forbidden: the verb is not in this endpoint's frozen verb set",
    "404": "not_found: an unknown or foreign id (the two answer byte-identically)",
    "409": "conflict: the todo is not in a state for this (not held, stale attempt_seq, "
    "wrong lease token, not claimable, a question already answered or withdrawn)",
    "429": "rate_limited: over SWITCHBOARD_CLAIMS_PER_MINUTE (with retry_after)",
    "503": "unavailable: the database is unavailable; retry",
}


@cache
def capabilities() -> dict:
    """``GET /api/v1/``: what this server is and can do, for a client to check before it
    relies on a feature (the relay refuses a server without attempt history). Safe without a
    token: nothing in it is about a tenant."""
    from importlib.metadata import PackageNotFoundError, version

    from switchboard.agents import mcp_tasks
    from switchboard.agents.task_view import ATTEMPTS_META, ATTEMPTS_URI
    from switchboard.queues import bounds
    from switchboard.queues.bounds import (
        ATTEMPTS_MAX,
        BODY_MAX_BYTES,
        LEASE_SECONDS_MAX,
        LIST_MAX,
        LIST_MAX_BYTES,
        TITLE_MAX_CHARS,
    )
    from switchboard.queues.transitions.waits import AFTER_MAX

    try:
        release = version("switchboard")
    except PackageNotFoundError:  # a checkout run without installing
        release = "unknown"
    return {
        "name": "switchboard",
        "version": release,
        "api": "v1",
        "verbs": list(REGISTRY),
        "features": {
            # Every claim opens an attempt and every ending closes it; claims return
            # prior_attempts, get_todo returns attempts, and each says whether it died.
            "attempt_history": True,
            "fences": True,  # require_fence and lease_token
            "rounds": True,  # a person's rerun opens a new round
            "died": True,  # lease_expired and reaped attempts are marked died
            "long_poll": {"verb": "claim_next", "max_wait_seconds": bounds.WAIT_SECONDS_MAX},
            # complete, fail and release take ``then`` (claim_next's arguments) and answer
            # ``next``: the close and the next claim in one request.
            "then": {"verbs": ["complete", "fail", "release"]},
            # release takes ``question`` (the todo waits, state ``waiting``, for a person or
            # its requester's ``answer``); claims read it back in prior_attempts.
            "questions": {"ask": "release", "answer": "answer", "state": "waiting"},
            # create_todo's after, parent and key (issue 44): a todo waits (state waiting,
            # waiting_for todos or children) until they end; release's wait_for_children;
            # an endpoint's max_claimed_per_key and max_claimed; unique_while_active.
            "waits": {
                "after": "create_todo",
                "children": {"parent": "create_todo", "wait": "release"},
                "keys": {"key": "create_todo", "unique_while_active": "create_todo"},
                "waiting_for": ["people", "todos", "children"],
            },
            "prior_attempts": 5,
            "mcp": "/mcp",
            # Every todo as an A2A task and an MCP task, with its attempts as an extension
            # (docs/protocols.md).
            "tasks": {
                "a2a": "/a2a",
                "agent_card": "/.well-known/agent-card.json",
                "mcp_extension": mcp_tasks.EXTENSION,
                "attempts_extension": {"a2a": ATTEMPTS_URI, "mcp": ATTEMPTS_META},
            },
        },
        "limits": {
            "request_bytes": bounds.REQUEST_MAX_BYTES,
            "title_chars": TITLE_MAX_CHARS,
            "body_bytes": BODY_MAX_BYTES,
            "summary_bytes": bounds.SUMMARY_MAX_BYTES,
            "artifact_bytes": bounds.ARTIFACT_MAX_BYTES,
            "claimant_bytes": bounds.CLAIMANT_MAX_BYTES,
            "result_bytes": bounds.RESULT_MAX_BYTES,
            "result_depth": bounds.RESULT_MAX_DEPTH,
            "lease_seconds": LEASE_SECONDS_MAX,
            "list_limit": LIST_MAX,
            "list_page_bytes": LIST_MAX_BYTES,
            "attempts_limit": ATTEMPTS_MAX,
            "question_bytes": bounds.QUESTION_MAX_BYTES,
            "choices": bounds.CHOICES_MAX,
            "choice_chars": bounds.CHOICE_MAX_CHARS,
            "answer_schema_fields": bounds.ANSWER_SCHEMA_FIELDS_MAX,
            "answer_text_bytes": bounds.ANSWER_TEXT_MAX_BYTES,
            "answer_within_seconds": bounds.ANSWER_WITHIN_SECONDS_MAX,
            "after_ids": AFTER_MAX,
            "key_chars": bounds.KEY_MAX_CHARS,
        },
        "openapi": "/api/v1/openapi.json",
        "untrusted_notice": UNTRUSTED_NOTICE,
    }


@cache
def document() -> dict:
    types = [t for verb in REGISTRY.values() for t in (verb.params, verb.output)]
    types.append(schemas.ErrorOut)
    (refs, components) = msgspec.json.schema_components(
        types, ref_template="#/components/schemas/{name}"
    )
    ref_of = dict(zip(types, refs, strict=True))
    paths = {}
    for verb in REGISTRY.values():
        responses = {"200": {"description": "OK", "content": _json(ref_of[verb.output])}}
        for status, text in ERRORS.items():
            responses[status] = {"description": text, "content": _json(ref_of[schemas.ErrorOut])}
        paths[f"/api/v1/{verb.name}"] = {
            "post": {
                "operationId": verb.name,
                "summary": verb.description,
                "description": verb.description
                + (f"\n\n{UNTRUSTED_NOTICE}" if verb.reads_attempts else ""),
                "security": [{"endpointToken": []}],
                # A verb without required arguments takes a missing body as {}.
                "requestBody": {
                    "required": any(f.required for f in msgspec.structs.fields(verb.params)),
                    "content": _json(ref_of[verb.params]),
                },
                "responses": responses,
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Switchboard agent API",
            "version": "1",
            # The same as GET /api/v1/ (no token needed): version, features, limits.
            "x-switchboard": {k: v for k, v in capabilities().items() if k != "untrusted_notice"},
            "description": "Agents claim todos as leases, heartbeat them, and complete, fail or "
            "release them. Every claim opens an attempt; every ending closes it. "
            + UNTRUSTED_NOTICE,
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "endpointToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The endpoint's token, shown once at vend.",
                }
            },
        },
    }


def _json(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}
