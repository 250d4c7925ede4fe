"""claim_next's long-poll, on the event loop: claim at once, or wait up to ``wait_seconds``
for the doorbell and claim then. A waiting request is a coroutine holding nothing but its
socket: no thread, no transaction and no database connection (the claim itself runs on the
async pool when it wakes). Each time a waiter wakes it re-checks the credential that opened
the request (a token rotated or revoked meanwhile claims nothing) before it claims. Waiters
are capped per endpoint and per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, cast

from django.conf import settings

from switchboard.agents import verbs
from switchboard.agents.doorbell import async_doorbell, doorbells
from switchboard.agents.verbs import Verb
from switchboard.queues import bounds, counters, db, endpoints, tracing, transitions
from switchboard.queues.db import Plan
from switchboard.queues.db.availability import breaker, is_connection_failure
from switchboard.queues.errors import (
    DATABASE_ERRORS,
    DomainError,
    RateLimited,
    Unavailable,
    from_database_error,
)
from switchboard.queues.models import Endpoint
from switchboard.queues.notify import LoopLocal
from switchboard.queues.transitions import Actor, Next, Then


class Departure(Protocol):
    """Whether a call's client has gone: a future done when it went (a long-poll's, watched
    all along), or a look taken when asked (agents/front.py ``_Peek``: a claim that does not
    wait asks once, after its statement)."""

    def done(self) -> bool: ...


class ClientGone(Exception):
    """The client of a long-poll went away: it claims nothing more, and what it claimed but
    could not be told of was released."""


class Waiters:
    """The caps on concurrent long-polls: per endpoint and per process. Past either, a
    long-poll is refused at once (never a stall): ``rate_limited`` for one endpoint's crowd
    (its own agents, asked to come back later), ``unavailable`` for the whole process (try
    another server, or later)."""

    def __init__(self) -> None:
        self.total = 0
        self.by_endpoint: dict[int, int] = {}

    def enter(self, endpoint_id: int) -> None:
        per_endpoint = settings.SWITCHBOARD_WAITERS_PER_ENDPOINT
        per_process = settings.SWITCHBOARD_WAITERS_PER_PROCESS
        if self.by_endpoint.get(endpoint_id, 0) >= per_endpoint:
            raise RateLimited(
                f"This endpoint already has {per_endpoint} long-polls waiting on this server; "
                "retry shortly, or wait with fewer workers.",
                retry_after=WAITER_RETRY_AFTER_SECONDS,
            )
        if self.total >= per_process:
            raise Unavailable(
                f"This server already holds {per_process} waiting long-polls; retry shortly.",
                retry_after=WAITER_RETRY_AFTER_SECONDS,
            )
        self.total += 1
        self.by_endpoint[endpoint_id] = self.by_endpoint.get(endpoint_id, 0) + 1

    def leave(self, endpoint_id: int) -> None:
        self.total -= 1
        left = self.by_endpoint[endpoint_id] - 1
        if left:
            self.by_endpoint[endpoint_id] = left
        else:
            del self.by_endpoint[endpoint_id]


class Marks:
    """This process's marks of its endpoints' long-polls as waiting (``waited_at``: a freed
    key, or a freed claim under max_claimed, rings only while one may wait, sql.MARK_WAITING
    and sql.RING_IF_WAITING). A long-poll of an endpoint with max_claimed_per_key or
    max_claimed whose look found nothing makes sure a mark of its endpoint younger
    than WAITED_REFRESH_SECONDS has committed (it makes one, or waits for the one in flight,
    and makes its own if that one failed) and then looks once more before it waits: whatever
    ended before that mark, the look sees; whatever ends after it, rings."""

    def __init__(self) -> None:
        self.made: dict[int, tuple[float, asyncio.Future[bool]]] = {}

    async def marked(self, endpoint: Endpoint) -> bool:
        """True when this made or waited for a mark (the caller looks again); False when a
        young mark had committed already, or the endpoint has neither limit."""
        if endpoint.max_claimed_per_key is None and endpoint.max_claimed is None:
            return False  # nothing of it rings on a freed claim
        while True:
            at, done = self.made.get(endpoint.pk, (-math.inf, None))
            if done is None or done.done():
                break
            if await asyncio.shield(done):
                return True
        if time.monotonic() - at < bounds.WAITED_REFRESH_SECONDS:
            return False
        done = asyncio.get_running_loop().create_future()
        # Its time taken before it: the mark is never thought younger than it is.
        self.made[endpoint.pk] = (time.monotonic(), done)
        try:
            await db.arun(endpoints.mark_waiting_plan(endpoint.pk))
        except BaseException:
            self.made.pop(endpoint.pk, None)  # not a mark: the next long-poll marks again
            done.set_result(False)
            raise
        done.set_result(True)
        return True


WAITER_RETRY_AFTER_SECONDS = 2.0
_waiters: LoopLocal[Waiters] = LoopLocal(lambda loop: Waiters())
_marks: LoopLocal[Marks] = LoopLocal(lambda loop: Marks())


def waiters() -> Waiters:
    """This event loop's waiters (one loop per worker process)."""
    return _waiters.get()


async def call(
    endpoint: Endpoint,
    verb: Verb,
    params,
    *,
    mcp_session_id: str | None = None,
    gone: Departure | None = None,
) -> dict:
    """``_call``, in a span of its own when tracing is on (queues/tracing.py; off, the span
    is None and noting on it returns at once)."""
    with tracing.verb(verb.name, endpoint, params) as span:
        try:
            result = await _call(endpoint, verb, params, mcp_session_id, gone)
        except DomainError as error:
            tracing.refused(span, error.code)
            raise
        tracing.answered(span, result)
        return result


async def _call(
    endpoint: Endpoint, verb: Verb, params, mcp_session_id: str | None, gone: Departure | None
) -> dict:
    """Run ``verb``'s plan on the async pool, claim_next's long-poll on the doorbell. ``gone``
    says when the client went away: a wait then ends with ClientGone, and a claim that
    committed after it went is released at once (``release_unheard``) and nobody is answered
    (ClientGone). A claim is one claim latency observation: its last claim, never its
    waiting. A close with ``then`` is one ledger operation (its plan answers a ``Then``); it
    is waited for here only when the ledger says ``WAIT``."""
    then = getattr(params, "then", None)
    if then is not None:
        verbs.claim_next.check_allowed(endpoint)  # before the close, not after it
        return await _close_then(endpoint, verb, params, then, mcp_session_id, gone)
    if verb.name == "claim_next" and params.wait_seconds:
        handler = verb.handler
        result = await awaiting(
            endpoint,
            lambda: db.arun(handler(endpoint, params, mcp_session_id=mcp_session_id)),
            wait_seconds=params.wait_seconds,
            found=lambda result: result["todo"] is not None,
            nothing=lambda: dict(verbs.NO_TODO),
            gone=gone,
        )
    elif verb.claims:
        started = time.perf_counter()
        try:
            result = await db.arun(verb.handler(endpoint, params, mcp_session_id=mcp_session_id))
        finally:
            counters.claim_latency.observe(time.perf_counter() - started)
    else:
        return await db.arun(verb.handler(endpoint, params, mcp_session_id=mcp_session_id))
    await _unless_gone(endpoint, result, gone)
    return result


async def _close_then(
    endpoint: Endpoint,
    verb: Verb,
    params,
    then,
    mcp_session_id: str | None,
    gone: Departure | None,
) -> dict:
    started = time.perf_counter()
    answer: Then = await db.arun(
        cast(Plan[Then], verb.handler(endpoint, params, mcp_session_id=mcp_session_id))
    )
    if answer.next is Next.WAIT:
        actor = Actor.agent(endpoint)
        arguments = verbs.claim_args(then, mcp_session_id)
        try:
            found = await awaiting(
                endpoint,
                lambda: db.arun(
                    transitions.claim_next.plan(
                        actor,
                        lease_seconds=arguments.lease_seconds,
                        require_fence=arguments.require_fence,
                        claimant=arguments.claimant,
                        mcp_session_id=arguments.mcp_session_id,
                    )
                ),
                wait_seconds=then.wait_seconds,
                found=lambda claimed: claimed is not None,
                nothing=lambda: None,
                gone=gone,
            )
        except DomainError as refused:  # the close stands; the claim says why it was not
            answer = answer.refused_by(refused)
        except DATABASE_ERRORS as exc:
            answer = answer.refused_by(from_database_error(exc, verb="claim_next"))
        else:
            answer = answer.waited(found)
    elif answer.next is Next.CLAIMED:
        counters.claim_latency.observe(time.perf_counter() - started)
    result = verbs.then_answer(endpoint, answer)
    if result["next"] is not None:
        await _unless_gone(endpoint, result["next"], gone)
    return result


async def _unless_gone(endpoint: Endpoint, claim: dict, gone: Departure | None) -> None:
    """A claim committed after its client went away is released at once (ClientGone)."""
    if gone is not None and gone.done() and claim.get("todo") is not None:
        await release_unheard(endpoint, claim)
        raise ClientGone


def waits(verb: Verb, params) -> bool:
    """Does this call long-poll (claim_next with a wait, or a close whose ``then`` waits)?
    The front watches such a call's client for leaving."""
    if verb.name == "claim_next":
        return bool(params.wait_seconds)
    then = getattr(params, "then", None)
    return bool(then is not None and then.wait_seconds)


def departure(verb: Verb, params, watch: Callable[..., Departure]) -> Departure | None:
    """How a call learns that its client left: watched all along when it long-polls; looked
    at once, after its statement, when it claims without waiting (claim, claim_next, a
    close with ``then``: a client gone by then would leave the todo claimed for nobody until
    its lease lapsed); not at all otherwise. ``watch(peek=…)`` is the front's."""
    if waits(verb, params):
        return watch()
    if verb.claims or getattr(params, "then", None) is not None:
        return watch(peek=True)
    return None


async def awaiting[T](
    endpoint: Endpoint,
    attempt: Callable[[], Awaitable[T]],
    *,
    wait_seconds: float,
    found: Callable[[T], bool],
    nothing: Callable[[], T],
    gone: Departure | None,
) -> T:
    """Try ``attempt`` (an awaitable: a plan run on the async pool, say) at once; until it
    finds work or ``wait_seconds`` pass, wait for this endpoint's doorbell and try again.
    One claim latency observation: the last try.

    A waiter rides through an outage: when a look fails because the database cannot be
    reached (a restart, a failover), it holds nothing and waits, without looking, until the
    doorbell's LISTEN connection is back (which means the database is) and looks again; a
    wait that ends first answers its last look, or ``nothing()``. So an idle fleet is not
    turned into a storm of refused polls by a primary's loss (the failover probe: 1,750 to
    5,300 refused requests per failover from 200 idle agents)."""
    bell = async_doorbell()
    crowd = waiters()
    marks = _marks.get()
    crowd.enter(endpoint.pk)
    deadline = time.monotonic() + wait_seconds
    elapsed = 0.0
    result: T | None = None
    try:
        if not bell.listening.is_set():  # the first long-poll of this process
            bell.ensure_listening()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(bell.listening.wait(), LISTEN_START_SECONDS)
        woken = False
        while True:
            ticket = bell.ticket(endpoint.pk)
            started = time.perf_counter()
            try:
                if woken:
                    # The credential that opened the request must still be the endpoint's.
                    await db.arun(endpoints.still_valid_plan(endpoint))
                result = await attempt()
                if (
                    not found(result)
                    and deadline > time.monotonic()
                    and not drain.started
                    and await marks.marked(endpoint)
                ):
                    result = await attempt()  # what ended before the mark is seen now
            except DATABASE_ERRORS as exc:
                if not is_connection_failure(exc):
                    raise
                breaker.note(exc)
                if not await _database_back(bell, deadline, gone):
                    return result if result is not None else nothing()
                woken = True
                continue
            finally:
                elapsed = time.perf_counter() - started
            remaining = deadline - time.monotonic()
            if found(result):
                bell.pass_on(endpoint.pk)  # more work may have come with the same ring
                return result
            if remaining <= 0 or drain.started:
                return result
            watched = gone if isinstance(gone, asyncio.Future) else None
            woken = await bell.wait(endpoint.pk, ticket, remaining, gone=watched)
            if gone is not None and gone.done():
                raise ClientGone
            if drain.started:
                return result  # answered at once: the client polls another server
            if not woken:
                # The wait ran out and nothing rang (a ring, or the recheck's look): the last
                # look stands. Looking again, and checking the token first, was two
                # statements per waiter per wait for nothing, and a large idle fleet queued
                # on the pool past its timeout (docs/benchmarks.md, "A wait that runs out").
                return result
    finally:
        crowd.leave(endpoint.pk)
        counters.claim_latency.observe(elapsed)


async def _database_back(bell, deadline: float, gone: Departure | None) -> bool:
    """Wait, holding nothing, until the database is back after an outage (True) or until
    ``deadline`` or a drain (False; ClientGone if the client left). Back means: the doorbell
    made a new LISTEN connection, or, looked at every BACK_CHECK_SECONDS, the breaker's probe
    connects (the LISTEN connection may take a ping round to notice a loss)."""
    while (left := deadline - time.monotonic()) > 0 and not drain.started:
        back = bell.next_connection()
        waits: set[asyncio.Future] = {back}
        if isinstance(gone, asyncio.Future):
            waits.add(gone)
        await asyncio.wait(waits, timeout=min(left, BACK_CHECK_SECONDS))
        if gone is not None and gone.done():
            raise ClientGone
        if back.done() or await breaker.aadmit():
            return not drain.started
    return False


# A waiter whose look met an outage looks again at least this often (jittered by when each
# met it), whatever the doorbell says.
BACK_CHECK_SECONDS = 2.0


# The first long-poll of a process waits this long at most for the LISTEN connection.
LISTEN_START_SECONDS = 2.0


class Drain:
    """A server told to stop (SIGTERM: a deploy, a scale-down) drains: every waiting
    long-poll is answered at once with what its last look found (``todo: null``), a new one
    looks once and is answered without waiting, every answer closes its connection, and
    ``/healthz`` says 503, so the proxy sends the clients' next polls to another server;
    verbs in flight finish. Set from the worker's signal handler (switchboard/workers.py)."""

    def __init__(self) -> None:
        self.started = False

    def begin(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start draining: callable from a signal handler (the waiters wake on ``loop``)."""
        self.started = True
        loop.call_soon_threadsafe(doorbells.of(loop).wake_everyone)


drain = Drain()


async def release_unheard(endpoint: Endpoint, claim: dict) -> None:
    """A claim committed but its client left before the answer reached it: release the
    attempt at once (outcome released, said why) rather than leave it to lapse."""
    await db.arun(
        transitions.release.plan(
            Actor.agent(endpoint),
            claim["todo"]["id"],
            attempt_seq=claim["attempt_seq"],
            lease_token=claim.get("lease_token"),
            summary="Released by Switchboard: the client that claimed this went away before "
            "the claim's answer reached it.",
        )
    )
