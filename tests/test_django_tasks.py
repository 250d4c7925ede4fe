"""Switchboard as a Django project's task backend (issue 46): a separate Django project, made
in a temporary folder with its own settings and `@task` functions, enqueues over HTTP to the
live server, `switchboard worker --burst` runs them in that project, and `get_result` maps
the todos and their attempts onto `TaskResult`; the Board shows the same attempts.

Django's own expectations of a backend (its tests/tasks, read against this one) that apply
here are asserted below: enqueue returns a READY result with the arguments normalised as
JSON, priority and run_after and the queue name are kept, get_result of an unknown id raises
TaskResultDoesNotExist, return_value raises until SUCCESSFUL, a task that raises is FAILED
with its exception's class in `errors`, `attempts` counts `worker_ids`, the enqueued,
started and finished signals are sent. Subprocesses, because the project's settings are its
own, not this suite's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from switchboard.queues import transitions
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease
from tests.shell import SWITCHBOARD

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = """
from django.tasks import task
from django.tasks.signals import task_enqueued, task_finished, task_started

heard = []
for signal in (task_enqueued, task_started, task_finished):
    signal.connect(lambda sender, task_result, signal=signal, **_: heard.append(
        (signal is task_enqueued and "enqueued") or (signal is task_started and "started")
        or "finished"), weak=False)


@task
def add(a, b):
    return a + b


@task(priority=7)
def boom(why):
    raise ValueError(f"no: {why}")


@task(takes_context=True)
def counted(context, n):
    return {"attempt": context.attempt, "id": context.task_result.id, "n": n}


@task
async def twice(x):
    return x * 2


@task(queue_name="mail")
def mail(to):
    return to
"""

ENQUEUE = """
import json, sys
from datetime import UTC, datetime, timedelta
import django
django.setup()
from mysite import jobs
later = datetime.now(UTC) + timedelta(hours=1)
made = {
    "add": jobs.add.enqueue(2, 3),
    "boom": jobs.boom.enqueue("x"),
    "counted": jobs.counted.enqueue(n=5),
    "twice": jobs.twice.enqueue(21),
    "later": jobs.add.using(run_after=later).enqueue(1, 1),
    "mail": jobs.mail.enqueue("a@example.com"),
    "tuple": jobs.add.enqueue((1, 2), (3,)),
}
print(json.dumps({
    "ids": {k: r.id for k, r in made.items()},
    "statuses": sorted({r.status for r in made.values()}),
    "args": made["tuple"].args,
    "heard": jobs.heard,
}))
"""

RESULTS = """
import json, sys
import django
django.setup()
from django.tasks import default_task_backend
from django.tasks.exceptions import TaskResultDoesNotExist
from mysite import jobs
ids = json.loads(sys.argv[1])
seen = {}
for name, result_id in ids.items():
    result = default_task_backend.get_result(result_id)
    try:
        value = result.return_value
    except ValueError as error:
        value = f"raised: {error}"
    seen[name] = {
        "status": result.status, "value": value, "attempts": result.attempts,
        "workers": result.worker_ids, "task": result.task.module_path,
        "errors": [(e.exception_class_path, e.traceback) for e in result.errors],
        "error_classes": [e.exception_class.__name__ for e in result.errors],
        "times": [t is not None for t in (
            result.enqueued_at, result.started_at, result.last_attempted_at, result.finished_at)],
        "priority": result.task.priority, "queue": result.task.queue_name,
    }
missing = []
for unknown in sys.argv[2:]:
    try:
        default_task_backend.get_result(unknown)
    except TaskResultDoesNotExist:
        missing.append(unknown)
seen["missing"] = missing
print(json.dumps(seen))
"""


@pytest.fixture
def project(tmp_path, live_server, vend):
    """A Django project of its own (mysite), whose default task backend is this server."""
    endpoint, token = vend("site-tasks")
    mail_endpoint, _ = vend("mail")
    site = tmp_path / "mysite"
    site.mkdir()
    (site / "__init__.py").write_text("")
    (site / "jobs.py").write_text(JOBS)
    (site / "settings.py").write_text(
        textwrap.dedent(
            f"""
            SECRET_KEY = "a project of its own"
            USE_TZ = True
            INSTALLED_APPS = []
            TASKS = {{
                "default": {{
                    "BACKEND": "switchboard.tasks.SwitchboardBackend",
                    "QUEUES": ["default", "mail"],
                    "OPTIONS": {{"url": {live_server.url!r}, "token": {token!r},
                                 "max_attempts": 1}},
                }},
            }}
            """
        )
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "mysite.settings",
        "PYTHONPATH": str(tmp_path),
    }
    return tmp_path, env, endpoint, mail_endpoint


def _run(project, *command: str) -> subprocess.CompletedProcess:
    folder, env, *_ = project
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_projects_tasks_run_by_the_worker_with_every_attempt_in_the_result(
    project, vend, logged_in
):
    folder, env, endpoint, mail_endpoint = project
    enqueued = json.loads(_run(project, sys.executable, "-c", ENQUEUE).stdout)
    ids = enqueued["ids"]
    assert enqueued["statuses"] == ["READY"]
    assert enqueued["args"] == [[1, 2], [3]]  # normalised as JSON: tuples are lists
    assert enqueued["heard"] == ["enqueued"] * 7

    todos = {name: Todo.objects.get(pk=int(pk)) for name, pk in ids.items()}
    assert todos["add"].title == "mysite.jobs.add" and todos["add"].endpoint_id == endpoint.pk
    assert todos["boom"].priority == 7
    assert todos["later"].not_before is not None
    assert todos["mail"].endpoint_id == mail_endpoint.pk  # the queue named another endpoint

    # A worker that died holding one: its lease lapses, and the next claim tells its death.
    died = json.loads(_run(project, sys.executable, "-c", ENQUEUE).stdout)["ids"]["add"]
    transitions.claim(Actor.agent(endpoint), int(died), claimant="gone:1")
    lapse_lease(int(died))

    worked = _run(project, SWITCHBOARD, "worker", "--burst")
    assert "Traceback" not in worked.stderr

    # Every other second run's todo (its own add, boom, …) was worked too; read ours.
    foreign = vend("elsewhere", team=_other_team())[0]
    theirs, _ = transitions.create_todo(Actor.agent(foreign), title="not yours")
    results = json.loads(
        _run(
            project,
            sys.executable,
            "-c",
            RESULTS,
            json.dumps({**ids, "died": died}),
            "999999999",
            "not-a-number",
            str(theirs.id),
        ).stdout
    )
    me = f"{os.uname().nodename}:"
    add, boom, counted = results["add"], results["boom"], results["counted"]
    assert (add["status"], add["value"], add["attempts"], add["errors"]) == ("SUCCESSFUL", 5, 1, [])
    assert add["workers"][0].startswith(me) and all(add["times"])
    assert add["task"] == "mysite.jobs.add"
    assert boom["status"] == "FAILED" and boom["value"] == "raised: Task failed"
    [(path, traceback)] = boom["errors"]
    assert path == "builtins.ValueError" and boom["error_classes"] == ["ValueError"]
    assert 'raise ValueError(f"no: {why}")' in traceback
    assert boom["priority"] == 7
    assert counted["status"] == "SUCCESSFUL"
    assert counted["value"] == {"attempt": 1, "id": ids["counted"], "n": 5}
    assert results["twice"]["value"] == 42  # a coroutine function, run to its end
    # Not yet due, and another endpoint's queue: not this worker's to run.
    assert results["later"]["status"] == "READY" and results["later"]["value"].startswith("raised")
    assert results["later"]["times"] == [True, False, False, False]
    assert (results["mail"]["status"], results["mail"]["queue"]) == ("READY", "mail")
    # The death, told apart from boom's failure: with one try allowed (max_attempts 1),
    # the lapsed lease was the last, and the next claim made it a dead letter that says so.
    died_at_cap = results["died"]
    assert (died_at_cap["status"], died_at_cap["attempts"]) == ("FAILED", 1)
    assert died_at_cap["workers"] == ["gone:1"] and died_at_cap["error_classes"] == ["WorkerDied"]
    # Unknown, malformed and another team's ids: the same TaskResultDoesNotExist.
    assert results["missing"] == ["999999999", "not-a-number", str(theirs.id)]

    # The Board shows the same attempts: the failure's words, the fenced worker.
    page = logged_in.get(f"/todos/{ids['boom']}/").content.decode()
    assert "builtins.ValueError: no: x" in page


def _other_team():
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("olga", password="pw-for-tests").teams.get()


def test_the_worker_refuses_to_run_outside_a_project_or_on_another_backend(project, tmp_path):
    folder, env, *_ = project
    outside = subprocess.run(
        [SWITCHBOARD, "worker", "--burst"],
        cwd=folder,
        env={k: v for k, v in env.items() if k != "DJANGO_SETTINGS_MODULE"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert outside.returncode == 2 and "set DJANGO_SETTINGS_MODULE" in outside.stderr
    unknown = subprocess.run(
        [SWITCHBOARD, "worker", "--burst", "--backend", "nope"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    assert "Traceback" not in outside.stderr + unknown.stderr


def test_a_todo_that_is_no_task_of_the_project_is_failed_saying_so(project):
    folder, env, endpoint, _ = project
    stray, _ = transitions.create_todo(Actor.agent(endpoint), title="by hand", body="not json")
    named = json.dumps(
        {"format": "django.tasks/1", "task": "mysite.jobs.gone", "args": [], "kwargs": {}}
    )
    gone, _ = transitions.create_todo(Actor.agent(endpoint), title="gone", body=named)
    _run(project, SWITCHBOARD, "worker", "--burst")
    for todo, said in ((stray, "its body is not a task's"), (gone, "mysite.jobs.gone")):
        todo = Todo.objects.get(pk=todo.id)
        attempt = todo.attempts.get()
        assert todo.state == "dead" and attempt.outcome == "failed", todo.state
        assert said in attempt.summary and attempt.summary.startswith("No task of this project")


def test_a_backend_without_its_options_fails_the_system_check():
    from switchboard.tasks import SwitchboardBackend

    [error] = SwitchboardBackend("default", {"OPTIONS": {"url": "http://x"}}).check()
    assert error.id == "switchboard.tasks.E001" and "'token'" in error.msg
    assert SwitchboardBackend("default", {"OPTIONS": {"url": "u", "token": "t"}}).check() == []


# --- Django's own expectations of a backend ------------------------------------------------
# Django's tests of its dummy backend (tests/tasks/test_dummy_backend.py), run against this
# one in this process: enqueue, aenqueue, get_result, aget_result, refresh, arefresh, a
# missing result, the enqueue log. Not applicable: the in-memory `results` and `clear()`,
# and ENQUEUE_ON_COMMIT (the stored copy's, gone from Django 6.1's API).


@pytest.fixture
def backend(live_server, vend, settings):
    from django.tasks import task_backends

    _, token = vend("django-tasks")
    settings.TASKS = {
        "default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
        "switchboard": {
            "BACKEND": "switchboard.tasks.SwitchboardBackend",
            "QUEUES": [],
            "OPTIONS": {"url": live_server.url, "token": token},
        },
    }
    return task_backends["switchboard"]


def _ours(task):
    return task.using(backend="switchboard")


def test_enqueue_task(backend):
    from django.tasks import TaskResultStatus

    from tests import django_task_fixtures as fixtures

    for task in (_ours(fixtures.noop_task), _ours(fixtures.noop_task_async)):
        result = task.enqueue(1, two=3)
        assert result.status == TaskResultStatus.READY
        assert result.started_at is None and result.finished_at is None
        with pytest.raises(ValueError, match="Task has not finished yet"):
            result.return_value  # noqa: B018
        assert result.task == task
        assert (result.args, result.kwargs) == ([1], {"two": 3})


def test_enqueue_task_async_and_aget_result(backend):
    import asyncio

    from django.tasks import TaskResultStatus

    from tests import django_task_fixtures as fixtures

    async def enqueue_and_read():
        task = _ours(fixtures.noop_task_async)
        result = await task.aenqueue()
        return result, await backend.aget_result(result.id)

    result, again = asyncio.run(enqueue_and_read())
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs) == ([], {})
    assert again == result


def test_get_result(backend):
    from tests import django_task_fixtures as fixtures

    result = backend.enqueue(_ours(fixtures.noop_task), (), {})
    assert backend.get_result(result.id) == result


def test_refresh_result_after_a_worker_ran_it(backend):
    import asyncio
    import threading

    from django.tasks import TaskResultStatus

    from switchboard.tasks.worker import work
    from tests import django_task_fixtures as fixtures

    result = _ours(fixtures.calculate_meaning_of_life).enqueue()
    assert result.status == TaskResultStatus.READY
    assert work(backend, stop=threading.Event(), burst=True) == 1
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 42
    assert result.attempts == 1 and result.started_at and result.finished_at
    again = _ours(fixtures.calculate_meaning_of_life).enqueue()
    work(backend, stop=threading.Event(), burst=True)
    asyncio.run(again.arefresh())
    assert again.status == TaskResultStatus.SUCCESSFUL


def test_get_missing_result(backend):
    import asyncio

    from django.tasks.exceptions import TaskResultDoesNotExist

    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result("123456789")
    with pytest.raises(TaskResultDoesNotExist):
        asyncio.run(backend.aget_result("123456789"))


def test_enqueue_logs(backend, caplog):
    import logging

    from tests import django_task_fixtures as fixtures

    with caplog.at_level(logging.DEBUG, logger="django.tasks"):
        result = _ours(fixtures.noop_task).enqueue()
    [line] = [r.getMessage() for r in caplog.records if r.name == "django.tasks"]
    assert "enqueued" in line and result.id in line
