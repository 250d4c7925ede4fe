"""``switchboard worker``: runs a Django project's tasks from Switchboard (issue 46).

Run it in the project, as ``manage.py`` would run (``DJANGO_SETTINGS_MODULE`` set, the
project's folder the current one)::

    DJANGO_SETTINGS_MODULE=mysite.settings switchboard worker [--backend default] [--burst]

It claims the backend's endpoint's todos with a fence, heartbeats while a task runs (the
client's ``Job``), and completes with the task's return value (JSON) or fails with the
exception (its class and the end of its traceback in the attempt's summary). A todo whose
body names no task of this project is failed as not retryable, saying so. ``--burst``
stops once nothing is claimable; otherwise it long-polls until SIGINT or SIGTERM, after
which it finishes the task at hand."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import traceback as tracebacks

log = logging.getLogger("switchboard.tasks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="switchboard worker",
        description="Run a Django project's tasks (django.tasks) from Switchboard.",
    )
    parser.add_argument("--backend", default="default", help="the TASKS alias [default]")
    parser.add_argument(
        "--burst", action="store_true", help="stop once nothing is claimable (tests, cron)"
    )
    parser.add_argument("--wait-seconds", type=float, default=30, help="each long-poll's wait [30]")
    options = parser.parse_args(argv)
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        parser.exit(
            2,
            "switchboard worker: runs in your Django project: set DJANGO_SETTINGS_MODULE "
            "(e.g. mysite.settings) and run it from the project's folder.\n",
        )
    sys.path.insert(0, os.getcwd())  # as manage.py's folder is
    import django

    django.setup()
    from django.tasks import task_backends
    from django.tasks.exceptions import InvalidTaskBackend

    from switchboard.tasks import SwitchboardBackend

    try:
        backend = task_backends[options.backend]
    except InvalidTaskBackend as error:
        parser.exit(2, f"switchboard worker: {error}\n")
    if not isinstance(backend, SwitchboardBackend):
        parser.exit(
            2,
            f"switchboard worker: the TASKS backend {options.backend!r} is not "
            "switchboard.tasks.SwitchboardBackend.\n",
        )
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    done = work(backend, stop=stop, burst=options.burst, wait_seconds=options.wait_seconds)
    log.info("worker stopped after %d tasks", done)
    return 0


def work(backend, *, stop: threading.Event, burst: bool = False, wait_seconds: float = 30) -> int:
    """Claim and run tasks until ``stop`` is set (or, with ``burst``, nothing is claimable);
    the number run."""
    from switchboard.client import Job

    claimant = f"{socket.gethostname()}:{os.getpid()}"
    client = backend.client
    done = 0
    if burst:
        while not stop.is_set():
            claimed = client.claim_next(wait_seconds=0, claimant=claimant, require_fence=True)
            if claimed.get("todo") is None:
                break
            with Job(client, claimed) as job:
                run(backend, job)
            done += 1
        return done
    for job in client.work(
        wait_seconds=wait_seconds, stop=stop, claimant=claimant, require_fence=True
    ):
        with job:
            run(backend, job)
        done += 1
    return done


def run(backend, job) -> None:
    """One claimed todo: its task run, and the attempt closed with what came of it."""
    from django.tasks import TaskContext, TaskResultStatus
    from django.tasks.base import Task
    from django.tasks.signals import task_finished, task_started
    from django.utils.json import normalize_json
    from django.utils.module_loading import import_string

    from switchboard.tasks import failure_summary, read_payload

    payload = read_payload(job.todo)
    task = None
    if payload is not None:
        try:
            task = import_string(payload["task"])
        except ImportError:
            task = None
    if not isinstance(task, Task):
        named = payload["task"] if payload else "no task (its body is not a task's)"
        job.fail(summary=f"No task of this project: {named}"[:2000], retryable=False)
        return
    result = backend.get_result(str(job.todo["id"]))  # with this attempt, RUNNING
    task_started.send(sender=type(backend), task_result=result)
    try:
        if task.takes_context:
            context = TaskContext(task_result=result)
            value = task.call(context, *payload["args"], **payload["kwargs"])
        else:
            value = task.call(*payload["args"], **payload["kwargs"])
        value = normalize_json(value)
    except Exception as error:  # the task's failure, reported; the worker goes on
        job.fail(summary=failure_summary(error, tracebacks.format_exc()))
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        # Inside the handler, as Django's own backends send it (its log reads exc_info).
        task_finished.send(sender=type(backend), task_result=result)
        return
    job.complete(result=value)
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    task_finished.send(sender=type(backend), task_result=result)


if __name__ == "__main__":
    sys.exit(main())
