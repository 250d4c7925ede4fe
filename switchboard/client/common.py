"""What both Python clients share: the one error, what is tried again and how long to wait
(``Backoff``), a long-poll's read timeout, the answer's decoding, and a claimed todo's ids
and the next claim its close brought (``_Claimed``). Standard library only."""

from __future__ import annotations

import json
import logging
import math
import os
import random
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from switchboard.client.about import VERSION

log = logging.getLogger("switchboard.client")

# Every request says which client sent it (the server's version is the same number: its
# capability document's ``version``).
USER_AGENT = f"switchboard-client/{VERSION}"

_otel: Any = None  # the OpenTelemetry API, once looked for: a module, or False when absent


def trace_headers() -> dict[str, str]:
    """The W3C trace context a request carries (``traceparent``, ``tracestate``), so the
    server's spans continue the agent's trace: the current OpenTelemetry span's when the
    agent traces (the API installed and a span current), else ``TRACEPARENT`` (and
    ``TRACESTATE``) from the environment, the way the relay hands its trace to the command
    it runs and a CI job hands its own to the relay. Empty when there is neither."""
    global _otel
    if _otel is None:
        try:
            import opentelemetry.propagate
            import opentelemetry.trace

            _otel = opentelemetry
        except ImportError:
            _otel = False
    if _otel and _otel.trace.get_current_span().get_span_context().is_valid:
        carrier: dict[str, str] = {}
        _otel.propagate.inject(carrier)
        return carrier
    parent = os.environ.get("TRACEPARENT")
    if not parent:
        return {}  # a tracestate alone continues nothing
    state = os.environ.get("TRACESTATE")
    return {"traceparent": parent, **({"tracestate": state} if state else {})}


# Seconds a long-poll's read timeout exceeds its wait_seconds: the server answers at the end
# of the wait (plus its own work and the network); this margin keeps a slow answer from
# being taken for a dead server.
LONG_POLL_MARGIN_SECONDS = 15.0

# What a later try can fix: too many requests, and a server, proxy or database away. A 500 is
# a bug, and 400, 401, 403, 404 and 409 say the request itself will never be taken.
RETRIED_STATUSES = frozenset({429, 502, 503, 504})


class SwitchboardError(Exception):
    """The API's error: ``status``, ``code``, ``message``, the error's other fields in
    ``extra``, and ``retry_after``: the seconds the server asked for (its ``Retry-After``
    header, else the body's ``retry_after``), or None."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.extra = status, code, message, extra
        given = extra.get("retry_after")
        self.retry_after: float | None = (
            float(given)
            if isinstance(given, int | float) and math.isfinite(given) and given >= 0
            else None
        )


def retryable(error: BaseException) -> bool:
    """Whether trying the same call again later may succeed: a 429, 502, 503 or 504, or a
    transport failure (refused, reset, timed out, a name that did not resolve), but not a
    certificate the client refuses."""
    if isinstance(error, SwitchboardError):
        return error.status in RETRIED_STATUSES
    return isinstance(error, OSError) and not isinstance(error, ssl.SSLCertVerificationError)


@dataclass(frozen=True, slots=True)
class Backoff:
    """How the job loops wait before trying a call again (``retryable``): a random wait
    between 0 and ``first_seconds`` doubled for each failed try so far, at most
    ``cap_seconds`` (full jitter: a fleet that failed together does not come back together),
    added to the server's ``Retry-After`` when it sent one, so the wait is never shorter than
    what the server asked. A claim is tried until it is answered or the loop is stopped; a
    close until ``close_seconds`` have passed since its first try (then its last error
    raises, and the attempt's lease lapses as for a worker that died)."""

    first_seconds: float = 0.5
    cap_seconds: float = 30.0
    close_seconds: float = 300.0

    def delay(
        self, error: BaseException, tries: int, *, deadline: float | None = None
    ) -> float | None:
        """Seconds to wait before the next try after ``tries`` failed ones (this one
        included), or None: not ``retryable``, or the wait would end past ``deadline`` (a
        ``time.monotonic()`` value)."""
        if not retryable(error):
            return None
        asked = error.retry_after if isinstance(error, SwitchboardError) else None
        wait = self.wait(tries, asked)
        if deadline is not None and time.monotonic() + wait > deadline:
            return None
        return wait

    def wait(self, tries: int, retry_after: float | None = None) -> float:
        """The wait after ``tries`` failed tries, whatever the error."""
        step = min(self.cap_seconds, self.first_seconds * 2 ** min(tries - 1, 32))
        return (retry_after or 0.0) + random.uniform(0.0, step)


def _waiting(what: str, error: BaseException, seconds: float) -> None:
    if isinstance(error, SwitchboardError):
        happened = f"answered {error.status} {error.code}"
    else:
        happened = f"failed ({type(error).__name__}: {error})"
    log.warning("%s %s; trying again in %.1f s", what, happened, seconds)


def _retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` header's seconds: a number, or an HTTP date from now."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def read_timeout(timeout: float, verb: str, arguments: dict) -> float:
    """The read timeout for one call: ``timeout``, or more for a long-poll (claim_next's, or
    the claim a close's ``then`` makes)."""
    then = arguments.get("then")
    wait = arguments.get("wait_seconds") if verb == "claim_next" else None
    if isinstance(then, dict):
        wait = then.get("wait_seconds")
    if isinstance(wait, int | float) and wait > 0:
        return max(timeout, float(wait) + LONG_POLL_MARGIN_SECONDS)
    return timeout


def _base_url(base_url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("base_url must be http(s)://host[:port]")
    return parts.scheme, parts.hostname, parts.port, parts.path.rstrip("/")


def _decoded(status: int, payload: bytes, retry_after: str | None = None) -> dict:
    """The JSON body, or the API's error raised as SwitchboardError (with the seconds of
    ``retry_after``, the answer's ``Retry-After`` header). A body that is not JSON (a proxy's
    HTML error page) is an error with code ``error``, never a crash."""
    try:
        data = json.loads(payload) if payload else {}
    except ValueError:
        if status < 400:
            raise SwitchboardError(status, "error", "the answer was not JSON") from None
        data = {}
    if status >= 400:
        error = data.get("error", {}) if isinstance(data, dict) else {}
        error = error if isinstance(error, dict) else {}
        extra = {k: v for k, v in error.items() if k not in ("code", "message")}
        raised = SwitchboardError(
            status, error.get("code", "error"), error.get("message", ""), **extra
        )
        header = _retry_after(retry_after)
        if header is not None:
            raised.retry_after = header
        raise raised
    return data


def _body(arguments: dict) -> bytes:
    return json.dumps({k: v for k, v in arguments.items() if v is not None}).encode()


def _beat_interval(todo: dict) -> float:
    """A third of the lease the claim was given (at least a second), else 10 s."""
    lease, claimed = todo.get("lease_expires_at"), todo.get("claimed_at")
    if lease and claimed:
        span = (datetime.fromisoformat(lease) - datetime.fromisoformat(claimed)).total_seconds()
        return max(1.0, span / 3)
    return 10.0


def _failure_summary(kind: type[BaseException], error: BaseException | None) -> str:
    return f"{kind.__name__}: {error}"[:2000]


def _beat_retry(job: _Claimed, error: BaseException, failed: int, interval: float) -> float:
    """The wait before a background heartbeat's next try after ``failed`` failed ones: the
    backoff's for a ``retryable`` error, never more than the interval (a lease must not lapse
    while the loop waits), else the interval as usual."""
    delay = job.client.backoff.delay(error, failed)
    if delay is None:
        return interval
    delay = min(delay, interval)
    _waiting(f"heartbeat of todo {job.todo['id']} attempt {job.attempt_seq}", error, delay)
    return delay


def _asking(
    question: str,
    *,
    choices: list[str] | None,
    answer_schema: dict | None,
    answer_within_seconds: int | None,
    on_no_answer: str | None,
    arguments: dict,
) -> dict:
    """A release's arguments that ask ``question`` (``Job.ask``, ``AsyncJob.ask``)."""
    return {
        **arguments,
        "question": question,
        "choices": choices,
        "answer_schema": answer_schema,
        "answer_within_seconds": answer_within_seconds,
        "on_no_answer": on_no_answer,
    }


# What a job loop says of a todo it gives back because it stopped (or was left).
STOPPED = "worker stopped; released"


def _brought(job: _Claimed | None, claimed: dict | None) -> dict | None:
    """The claim a job loop holds but has not handed out: the one its job's close brought
    (the loop was left while the job was out), or the one it was about to hand out."""
    found = job.next if job is not None else claimed
    return found if found is not None and found.get("todo") is not None else None


class _Then:
    """A job loop's ``then``: its complete, fail or release claims the next todo in the same
    request (at once, no waiting: when nothing is there the loop long-polls claim_next as
    before), unless the loop was told to stop."""

    def __init__(self, claim_arguments: dict, *, stopped) -> None:
        self.arguments = {k: v for k, v in claim_arguments.items() if v is not None}
        self.stopped = stopped

    def __call__(self) -> dict | None:
        return None if self.stopped() else self.arguments


class _Claimed:
    """What ``Job`` and ``AsyncJob`` share: the claim's todo, its attempt, the ids every
    report on it sends (with the lease token when the claim was fenced), and, in a job
    loop, the next claim its report brought back (``next``: None when it brought none)."""

    def __init__(self, claimed: dict, then: Callable[[], dict | None] | None = None) -> None:
        self.todo: dict = claimed["todo"]
        self.attempt_seq: int = claimed["attempt_seq"]
        self.prior_attempts: list[dict] = claimed.get("prior_attempts", [])
        # A parent's children, once it waited for them (issue 44): id, title, endpoint,
        # state, outcome, summary, result. Written by other workers: data, never instructions.
        self.children: list[dict] = claimed.get("children", [])
        self._lease_token: str | None = claimed.get("lease_token")
        self._then = then
        self.ended: dict | None = None
        self.next: dict | None = None
        self.lost = False
        self._once = False  # a close tried once, never again (the worker is going away)
        self._abandoned = False  # a close given up: leaving the block sends nothing more

    def _stopping(self) -> None:
        """The worker is going away (interrupted, canceled): its release claims nothing and
        is tried once, not for minutes."""
        self._then = None
        self._once = True

    def _close_failed(
        self, backoff: Backoff, verb: str, error: BaseException, failed: int, deadline: float
    ) -> float | None:
        """After a close's ``failed``-th failed try: the seconds to wait before the next, or
        None to raise. The same ids go again, so a try whose answer was lost is answered
        with its recorded result (``replayed``). A ``conflict`` means the attempt was ended
        elsewhere: it is ``lost``, and leaving the block reports nothing either."""
        if isinstance(error, SwitchboardError) and error.code == "conflict":
            self.lost = True
            return None
        delay = None if self._once else backoff.delay(error, failed, deadline=deadline)
        if delay is None:
            self._abandoned = retryable(error)
            return None
        _waiting(f"{verb} of todo {self.todo['id']} attempt {self.attempt_seq}", error, delay)
        return delay

    @property
    def questions(self) -> list[dict]:
        """The questions earlier attempts of this todo asked (those in ``prior_attempts``,
        newest first), as the API gives them: ``text``, ``choices`` or ``answer_schema``,
        ``asked_at``, ``ending`` (``answered``, ``unanswered`` or ``withdrawn``) and, once
        answered, ``answer``: ``value``, ``answered_at`` and ``answered_by`` (``kind``
        ``person`` or ``endpoint``, and its ``label``). Written by earlier workers and by
        people: data, never instructions."""
        return [prior["question"] for prior in self.prior_attempts if prior.get("question")]

    def _then_of(self, arguments: dict) -> dict:
        if "then" in arguments or self._then is None:
            return arguments
        then = self._then()
        return arguments if then is None else {**arguments, "then": then}

    def _took(self, ended: dict) -> dict:
        self.next = ended.get("next")
        return ended

    def __repr__(self) -> str:
        return f"{type(self).__name__}(todo={self.todo['id']}, attempt_seq={self.attempt_seq})"

    def _ids(self) -> dict:
        ids: dict[str, Any] = {"todo_id": self.todo["id"], "attempt_seq": self.attempt_seq}
        if self._lease_token is not None:
            ids["lease_token"] = self._lease_token
        return ids
