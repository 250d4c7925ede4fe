"""A relay command splits its todo (issue 44): it writes children.json and exits 80; the relay
makes each a child of the todo (sent with an idempotency key of the attempt's) and releases it
until they have all ended; the children are worked like any todo, and the todo's next attempt
reads how each ended in its context file. A children file the relay cannot read fails the
attempt saying why. The real relay in a subprocess, the stub agent (tests/relay/agent.sh), the
live server."""

from __future__ import annotations

import json

import pytest

from switchboard.queues import transitions
from switchboard.queues.models import Todo
from switchboard.queues.transitions import Actor
from switchboard.relay.config import EXIT_CODES, EXIT_SPLIT
from tests.queues.helpers import outcomes
from tests.test_relay import fast, run_relay

pytestmark = pytest.mark.slow
relay_db = pytest.mark.django_db(transaction=True)


def test_the_exit_status_that_splits_is_its_own():
    assert EXIT_SPLIT == 80 and list(EXIT_CODES).count(EXIT_SPLIT) == 1


@relay_db
def test_a_command_splits_its_todo_and_its_next_attempt_reads_the_children(
    live_server, vend, relay_env, out, tmp_path
):
    worker, token = vend("relay-agent")
    todo, _ = transitions.create_todo(Actor.agent(worker), title="ship the release")
    children = tmp_path / "children.json"
    children.write_text(
        json.dumps(
            [{"title": "child: notes", "key": "repo"}, {"title": "child: tag", "priority": 5}]
        )
    )
    env = relay_env(token, STUB_MODE="split", STUB_CHILDREN=str(children))
    status, _, stderr = run_relay(live_server.url, env, "--max-todos", "4", *fast())
    assert status == 0, (
        stderr,
        [(a.outcome, a.summary) for a in Todo.objects.get(pk=todo.id).attempts.all()],
    )
    assert "split into 2 children, waiting for them" in stderr

    parent = Todo.objects.get(pk=todo.id)
    made = Todo.objects.filter(parent_id=todo.id).order_by("id")
    assert [c.title for c in made] == ["child: notes", "child: tag"]
    assert [c.state for c in made] == ["done", "done"] and made[0].key == "repo"
    assert parent.state == "done"
    assert outcomes(todo.id) == [("released", "waiting"), ("completed", "done")]
    context = json.loads((out / f"context-{todo.id}-2.json").read_text())
    assert {c["title"]: c["state"] for c in context["children"]} == {
        "child: notes": "done",
        "child: tag": "done",
    }
    assert "## Its children (how each ended)" in (out / f"context-{todo.id}-2.md").read_text()


@pytest.mark.parametrize(
    "written, said",
    [
        (None, "children.json was not written"),
        ("[]", "is not a list of 1 to 100 todos"),
        ('{"title": "x"}', "is not a list of 1 to 100 todos"),
        ("not json", "is not JSON"),
        ('[{"title": "x", "owner": "me"}]', "has fields the relay does not know: ['owner']"),
        ('[{"body": "no title"}]', 'has no "title"'),
        ('[{"title": "x", "priority": 1000}]', "the server refused child 0"),
    ],
)
@relay_db
def test_a_children_file_the_relay_cannot_use_fails_the_attempt_saying_why(
    live_server, vend, relay_env, tmp_path, written, said
):
    worker, token = vend("relay-agent")
    todo, _ = transitions.create_todo(Actor.agent(worker), title="ship the release")
    env = relay_env(token, STUB_MODE="split")
    if written is not None:
        children = tmp_path / "children.json"
        children.write_text(written)
        env["STUB_CHILDREN"] = str(children)
    status, _, stderr = run_relay(live_server.url, env, "--max-todos", "1", *fast())
    assert status == 0, stderr
    failed = Todo.objects.get(pk=todo.id)
    assert failed.state == "retry_wait" and outcomes(todo.id) == [("failed", "retry_scheduled")]
    assert said in failed.attempts.get().summary
    assert not Todo.objects.filter(parent_id=todo.id).exists()
