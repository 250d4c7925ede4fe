"""Module-level task functions for tests/test_django_tasks.py, as Django's own tests/tasks
keep theirs (a task must be importable by its path: the worker finds it so)."""

from django.tasks import task


@task
def noop_task(*args, **kwargs):
    return None


@task
async def noop_task_async(*args, **kwargs):
    return None


@task
def calculate_meaning_of_life():
    return 42
