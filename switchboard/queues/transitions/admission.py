"""Admission (SWITCHBOARD_CLAIMS_PER_MINUTE): each committed claim of an endpoint is one
unit; over the limit a claim is refused (RateLimited, with retry_after) and nothing is written.

The window is a fixed minute per endpoint, opened by the first claim after the last one ended.
The endpoint's row is locked for the claim's transaction, so concurrent claims of one endpoint
queue here, only while a limit is set. A person's claim is never charged.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings

from switchboard.queues import sql
from switchboard.queues.db import Atomic, Fetch, Plan
from switchboard.queues.errors import RateLimited
from switchboard.queues.transitions._common import Actor


def admitted[T](actor: Actor, claiming: Callable[[], Plan[tuple[T, bool]]]) -> Plan[T]:
    """Run the plan ``claiming()`` makes, which returns (result, whether a claim was made),
    under the endpoint's admission limit: the claim and its unit in one transaction."""
    limit = settings.SWITCHBOARD_CLAIMS_PER_MINUTE
    capped = actor.endpoint is not None and actor.endpoint.max_claimed is not None
    if not actor.is_agent or not (limit or capped):
        result, _ = yield from claiming()
        return result
    # One transaction: the admission's unit, or the endpoint's max_claimed read under its
    # row lock (queues/transitions/claim.py, under_capacity), stands with the claim.
    return (yield Atomic(_charged(actor, limit, claiming)))


def _charged[T](actor: Actor, limit: int, claiming) -> Plan[T]:
    if not limit:
        result, _ = yield from claiming()
        return result
    params = {"endpoint_id": actor.endpoint_id}
    [(claims, retry_after)] = yield Fetch(sql.ADMISSION_OPEN, params)
    if claims >= limit:
        raise RateLimited(
            f"This endpoint may claim {limit} times a minute; try again in "
            f"{max(1, round(retry_after))} s.",
            retry_after=round(max(retry_after, 0.0), 3),
        )
    result, charged = yield from claiming()
    if charged:
        yield Fetch(sql.ADMISSION_CHARGE, params)
    return result
