"""A todo with a mixed history, made through the real transitions (no hand-written rows)."""

from __future__ import annotations

from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
from tests.queues.helpers import lapse_lease, make_retry_due

XSS_SUMMARY = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def mixed_history(endpoint, *, title: str = "rebuild docs") -> int:
    """failed → died (reaped) → an open fenced attempt. Returns the todo id (claimed)."""
    agent = Actor.agent(endpoint)
    todo, _ = transitions.create_todo(Actor.agent(endpoint), title=title, max_attempts=5)
    transitions.claim(agent, todo.id, claimant="harness/buildbox/ci-fixer/run-41")
    transitions.fail(
        agent, todo.id, summary=XSS_SUMMARY, result={"exit": 1}, artifact="mcp://cairn/r-41"
    )
    make_retry_due(todo.id)
    transitions.claim(agent, todo.id, claimant="harness/buildbox/ci-fixer/run-42")
    transitions.heartbeat(agent, todo.id)
    lapse_lease(todo.id)
    transitions.reap_lapsed()
    transitions.claim(agent, todo.id, require_fence=True)  # left open: fenced
    return todo.id


def done_with_history(endpoint, user, *, title: str = "rebuild docs") -> int:
    """failed → died (reaped) → released by a person → completed with an https artifact."""
    agent = Actor.agent(endpoint)
    todo_id = mixed_history(endpoint, title=title)
    transitions.release(Actor.human(user), todo_id)
    transitions.claim(agent, todo_id, claimant="harness/buildbox/ci-fixer/run-43")
    transitions.complete(
        agent,
        todo_id,
        summary="Rebuilt the docs; 2 warnings fixed.",
        result={"pages": 41},
        artifact="https://ci.example.com/builds/43",
    )
    return todo_id
