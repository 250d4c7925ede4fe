"""Python clients for Switchboard's agent API.

``Client`` uses the standard library only and threads:

    from switchboard.client import Client, SwitchboardError

    sb = Client("http://127.0.0.1:8000", token)
    sb.create_todo(title="rebuild docs")
    for job in sb.work(claimant="buildbox/docs-1", require_fence=True):
        with job:                          # heartbeats in the background while inside
            pages = rebuild(job.todo["body"], job.prior_attempts)
            job.complete(result={"pages": pages}, summary=f"rebuilt {pages} pages")
        # leaving the block without complete/fail/release fails the attempt (with the
        # exception as its summary) or, on KeyboardInterrupt, releases it

``AsyncClient`` is the same for asyncio, on httpx2 (``pip install 'switchboard[async]'``):

    async with AsyncClient("http://127.0.0.1:8000", token) as sb:
        async for job in sb.work(claimant="buildbox/docs-1", require_fence=True):
            async with job:                # heartbeats in a background task while inside
                job_result = await rebuild(job.todo["body"], job.prior_attempts)
                await job.complete(result=job_result)

A job that needs a person's decision asks instead of guessing: the todo waits (state
``waiting``) until a person answers on the Board or its requester calls ``answer``, and the
next claimer reads the question and the answer (``job.questions``, from ``prior_attempts``):

        with job:
            if not job.questions:                 # nobody asked yet
                job.ask("Drop the column with data in it?", choices=["drop", "keep"])
            elif job.questions[0]["answer"]:      # the newest question, answered
                decided = job.questions[0]["answer"]["value"]   # "drop" or "keep"
    sb.answer(todo_id=todo_id, value="keep")      # as the todo's requester

Every verb is a method taking the verb's arguments as keywords and returning the decoded
JSON. Errors raise ``SwitchboardError`` with the API's ``code`` and ``status``; a transport
failure raises ``OSError`` (``TimeoutError`` for a timeout) from both clients. The token is
sent only in the Authorization header and never appears in a repr or an error.

The job loops ride through an outage (a database failover or restart, a node drained): the
claims of ``work()``, the background heartbeats and every close of a ``Job`` or ``AsyncJob``
(complete, fail, release, with or without ``then``) are tried again after a 429, 502, 503 or
504 or a transport failure, after ``Backoff``'s wait (full jitter, never shorter than the
server's ``Retry-After``). A close goes again with the same ``attempt_seq`` and lease token,
which the ledger answers with its recorded result when an earlier try had landed
(``replayed``; with ``then``, ``next`` is null and the loop long-polls), for up to
``Backoff.close_seconds`` (five minutes), then raises. Anything else (400, 401, 403, 404,
409, 500) raises at once, as does a plain verb call (``sb.create_todo(...)``): outside the
loop nothing is sent twice behind the caller's back. Each wait is logged (the logger
``switchboard.client``; never the token).

A ``claim_next`` long-poll holds its request open for up to ``wait_seconds``, so both clients
read it with a timeout of at least ``wait_seconds + LONG_POLL_MARGIN_SECONDS``, whatever
``timeout`` says: a read timeout under the wait would cut every idle long-poll short, and a
claim the server commits just as the client gives up is lost until its lease lapses.
"""

from switchboard.client.about import VERBS, VERSION
from switchboard.client.aio import AsyncClient, AsyncJob
from switchboard.client.common import (
    LONG_POLL_MARGIN_SECONDS,
    RETRIED_STATUSES,
    STOPPED,
    Backoff,
    SwitchboardError,
    read_timeout,
    retryable,
)
from switchboard.client.sync import Client, Job

__all__ = [
    "LONG_POLL_MARGIN_SECONDS",
    "RETRIED_STATUSES",
    "STOPPED",
    "VERBS",
    "VERSION",
    "AsyncClient",
    "AsyncJob",
    "Backoff",
    "Client",
    "Job",
    "SwitchboardError",
    "read_timeout",
    "retryable",
]
