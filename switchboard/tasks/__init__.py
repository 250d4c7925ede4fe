"""Switchboard as a Django project's task backend (``django.tasks``, Django 6): any project's
``@task`` functions become todos, with every attempt kept, a death told from a failure, and
a person able to rerun, take over or cancel them on the Board. It talks to a Switchboard
server over HTTP with the standard-library client, so the project needs no access to
Switchboard's database, and this module imports nothing of the server::

    TASKS = {
        "default": {
            "BACKEND": "switchboard.tasks.SwitchboardBackend",
            "QUEUES": ["default", "mail"],
            "OPTIONS": {"url": "http://127.0.0.1:8000", "token": os.environ["SB_TOKEN"]},
        },
    }

``token`` is an endpoint's token. The ``default`` queue is that endpoint's own; any other queue
name is the agent id of another endpoint of the team (the ``to`` of ``create_todo``), whose
worker runs with a backend holding that endpoint's token. ``switchboard worker`` (this
package's ``worker`` module) claims and runs them.

What a ``TaskResult`` is made of (docs/django-tasks.md): the todo's id (``id``); its state
(pending, retry_wait and waiting are READY, claimed RUNNING, done SUCCESSFUL, dead and
canceled FAILED); one ``worker_ids`` entry per attempt, oldest first (the worker's claimant,
``host:pid``, or the person who held it); an ``errors`` entry per attempt that failed (the
exception's class and traceback, as the worker wrote them in the attempt's summary) or died
(``WorkerDied``: its lease lapsed, or it was reaped); ``return_value``, the todo's result."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import DEFAULT_TASK_QUEUE_NAME, Task, TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from switchboard.client import Client, SwitchboardError

STATUS = {
    "pending": TaskResultStatus.READY,
    "retry_wait": TaskResultStatus.READY,
    "waiting": TaskResultStatus.READY,
    "claimed": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "dead": TaskResultStatus.FAILED,
    "canceled": TaskResultStatus.FAILED,
}
# What a todo made by this backend carries in its body (JSON): the task's path, its
# arguments, and this format's version.
PAYLOAD_FORMAT = "django.tasks/1"
# The attempts a read asks for: the most get_todo gives (the server's ATTEMPTS_MAX).
ATTEMPTS_READ = 50


class WorkerDied(Exception):  # noqa: N818 (the name is what a reader of errors needs)
    """The ``errors`` entry of an attempt whose worker stopped without a verdict: its lease
    lapsed (no heartbeat came) or it was reaped. Never raised; named so ``TaskError``'s
    ``exception_class`` resolves."""


class SwitchboardBackend(BaseTaskBackend):
    supports_defer = True  # run_after is the todo's not_before
    supports_async_task = True  # the worker runs a coroutine function to its end
    supports_get_result = True
    supports_priority = True  # -100..100, Switchboard's own range

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        self.url = self.options.get("url") or ""
        self.token = self.options.get("token") or ""
        self.max_attempts: int | None = self.options.get("max_attempts")
        self.timeout = float(self.options.get("timeout", 45))

    @cached_property
    def client(self) -> Client:
        """One client a backend (Django keeps a backend a thread), so its kept-alive
        connection serves every enqueue and read, not a new one each."""
        return Client(self.url, self.token, timeout=self.timeout)

    def check(self, **kwargs: Any) -> list:
        from django.core.checks import Error

        missing = [name for name in ("url", "token") if not self.options.get(name)]
        if not missing:
            return []
        return [
            Error(
                f"The Switchboard task backend {self.alias!r} needs OPTIONS "
                + " and ".join(repr(name) for name in missing)
                + ".",
                hint="url: the server's address; token: an endpoint's token (switchboard vend).",
                id="switchboard.tasks.E001",
            )
        ]

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        body = {"format": PAYLOAD_FORMAT, "task": task.module_path, "args": args}
        body.update(kwargs=kwargs, queue=task.queue_name)
        arguments: dict[str, Any] = {
            "title": task.module_path,
            "body": json.dumps(body, separators=(",", ":")),
            "priority": task.priority,
        }
        if task.run_after is not None:
            arguments["not_before"] = task.run_after.isoformat()
        if task.queue_name != DEFAULT_TASK_QUEUE_NAME:
            arguments["to"] = task.queue_name
        if self.max_attempts is not None:
            arguments["max_attempts"] = self.max_attempts
        made = self.client.create_todo(**arguments)["todo"]
        result = self._result(task, made, args=args, kwargs=kwargs)
        task_enqueued.send(sender=type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult:
        try:
            todo_id = int(result_id)
        except (TypeError, ValueError):
            raise TaskResultDoesNotExist(result_id) from None
        try:
            todo = self.client.get_todo(todo_id=todo_id, attempts_limit=ATTEMPTS_READ)["todo"]
        except SwitchboardError as error:
            if error.code in ("not_found", "invalid"):
                raise TaskResultDoesNotExist(result_id) from error
            raise
        payload = read_payload(todo)
        if payload is None:  # a todo, but not a task's
            raise TaskResultDoesNotExist(result_id)
        task = import_string(payload["task"])
        if not isinstance(task, Task):
            raise TaskResultDoesNotExist(result_id)
        # The task as it was enqueued: this backend, its queue, priority and run_after.
        queue = payload.get("queue") if isinstance(payload.get("queue"), str) else None
        task = replace(
            task,
            backend=self.alias,
            priority=todo["priority"],
            queue_name=queue or task.queue_name,
            run_after=_when(todo.get("not_before")),
        )
        return self._result(task, todo, args=payload["args"], kwargs=payload["kwargs"])

    def _result(self, task: Task, todo: dict, *, args: list, kwargs: dict) -> TaskResult:
        attempts = sorted(todo.get("attempts") or [], key=lambda a: a["seq"])
        claimed = [_when(a["claimed_at"]) for a in attempts]
        result = TaskResult(
            task=task,
            id=str(todo["id"]),
            status=STATUS[todo["state"]],
            enqueued_at=_when(todo["created_at"]),
            started_at=claimed[0] if claimed else None,
            finished_at=_when(todo.get("ended_at")),
            last_attempted_at=claimed[-1] if claimed else None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[e for a in attempts if (e := attempt_error(a)) is not None],
            worker_ids=[worker_id(a) for a in attempts],
        )
        if todo["state"] == "done":
            object.__setattr__(result, "_return_value", todo.get("result"))
        return result


def read_payload(todo: dict) -> dict | None:
    """The task a todo's body names, with its arguments; None for a body that is not one."""
    try:
        payload = json.loads(todo.get("body") or "")
    except ValueError:
        return None
    if not isinstance(payload, dict) or payload.get("format") != PAYLOAD_FORMAT:
        return None
    if not isinstance(payload.get("task"), str):
        return None
    if not isinstance(payload.get("args"), list) or not isinstance(payload.get("kwargs"), dict):
        return None
    return payload


def worker_id(attempt: dict) -> str:
    """Who worked an attempt: the worker's claimant (``host:pid``), else its endpoint, or the
    person who held it."""
    if attempt.get("claimer_kind") == "owner":  # a person's claim (the records' word)
        return f"person:{attempt.get('owner') or attempt.get('user')}"
    return attempt.get("claimant") or attempt.get("endpoint") or "unknown"


def attempt_error(attempt: dict) -> TaskError | None:
    """An attempt's ``TaskError``: a failure's class and traceback as the worker wrote them
    (``failure_summary``), or ``WorkerDied`` for a death; None for any other ending."""
    if attempt.get("died"):
        return TaskError(
            exception_class_path=f"{__name__}.WorkerDied",
            traceback=f"The worker stopped without a verdict ({attempt.get('outcome')}).",
        )
    if attempt.get("outcome") != "failed":
        return None
    summary = attempt.get("summary") or ""
    head, _, traceback = summary.partition("\n")
    path = head.partition(":")[0].strip()
    if not path or " " in path:
        path = "Exception"
    return TaskError(exception_class_path=path, traceback=traceback or summary)


def failure_summary(error: BaseException, traceback: str, *, limit: int = 2048) -> str:
    """``module.Class: message`` on the first line, then the traceback's end (its last
    frames say most), within the summary's bound (bytes)."""
    kind = type(error)
    head = f"{kind.__module__}.{kind.__qualname__}: {error}".replace("\n", " ")
    head = head.encode()[: limit // 4].decode(errors="ignore")
    room = limit - len(head.encode()) - 1
    tail = traceback.encode()[-room:].decode(errors="ignore") if room > 0 else ""
    return f"{head}\n{tail}"


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
