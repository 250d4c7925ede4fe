"""The state map of the agents' protocols (agents/task_view.py), table-driven from every ledger
state: each todo's task state as Python decides it, as the list's SQL filter decides it
(``switchboard_task_state()``, queues/schema/functions.sql), and as A2A and MCP's tasks extension spell it."""

from __future__ import annotations

import pytest

from switchboard.agents import a2a_words, mcp_tasks, task_view
from switchboard.queues import db, selectors, transitions
from switchboard.queues.errors import NotFound

pytestmark = pytest.mark.django_db

# ledger state (and what it waits for), task state, A2A state, MCP status
TABLE = {
    "fresh": ("pending", "", "submitted", "TASK_STATE_SUBMITTED", "working"),
    "released": ("pending", "", "working", "TASK_STATE_WORKING", "working"),
    "claimed": ("claimed", "", "working", "TASK_STATE_WORKING", "working"),
    "retrying": ("retry_wait", "", "working", "TASK_STATE_WORKING", "working"),
    "asking": (
        "waiting",
        "people",
        "input_required",
        "TASK_STATE_INPUT_REQUIRED",
        "input_required",
    ),
    "after": ("waiting", "todos", "working", "TASK_STATE_WORKING", "working"),
    "splitting": ("waiting", "children", "working", "TASK_STATE_WORKING", "working"),
    "done": ("done", "", "completed", "TASK_STATE_COMPLETED", "completed"),
    "dead": ("dead", "", "failed", "TASK_STATE_FAILED", "completed"),  # isError
    "canceled": ("canceled", "", "canceled", "TASK_STATE_CANCELED", "cancelled"),
}


def _todos_in_every_state(endpoint, agent, make_todo) -> dict[str, int]:
    made = {
        name: make_todo(name, **({"max_attempts": 1} if name == "dead" else {})).id
        for name in TABLE
        if name != "after"
    }
    made["after"] = make_todo("after", after=[made["fresh"]]).id

    def claimed(name: str) -> int:
        transitions.claim(agent, made[name])
        return made[name]

    transitions.release(agent, claimed("released"))
    claimed("claimed")
    transitions.fail(agent, claimed("retrying"), summary="flaky")
    transitions.release(agent, claimed("asking"), question="Which?", choices=["a", "b"])
    parent = claimed("splitting")
    make_todo("child", parent=parent)
    transitions.release(agent, parent, wait_for_children=True)
    transitions.complete(agent, claimed("done"), result={"ok": True})
    transitions.fail(agent, claimed("dead"), summary="broke")
    transitions.cancel(agent, made["canceled"])
    return made


def test_every_ledger_state_has_one_task_state_in_python_in_sql_and_in_each_protocol(
    endpoint, agent, make_todo
):
    made = _todos_in_every_state(endpoint, agent, make_todo)
    filtered = {}
    for state in task_view.STATES:
        todos, _ = db.run(selectors.list_tasks_plan(endpoint, task_state=state, limit=100))
        filtered.update({todo.id: state for todo in todos})
    for name, (ledger, waiting_for, state, a2a_state, mcp_status) in TABLE.items():
        detail = db.run(selectors.get_todo_for_endpoint_plan(endpoint, made[name]))
        todo = detail.todo
        assert (todo.state, todo.waiting_for) == (ledger, waiting_for), name
        v = task_view.view(endpoint.team_id, detail)
        assert v.state == state, name
        assert filtered[made[name]] == state, name  # the SQL filter agrees
        assert a2a_words.task_json(v, attempts=False)["status"]["state"] == a2a_state, name
        assert mcp_tasks.task_json(v, attempts=False)["status"] == mcp_status, name
    # The child made under "splitting" is listed too, and nothing twice.
    assert len(filtered) == len(TABLE) + 1


def test_a_task_id_is_bound_to_its_team_and_checked_before_any_read():
    good = task_view.task_id(7, 1234)
    assert task_view.todo_id_of(7, good) == 1234
    for bad in (
        task_view.task_id(8, 1234),
        "1234",
        "1234-",
        good + "x",
        good.upper(),
        1234,
        None,
        "-" + good,
        "x" * 65,
        "١٢٣٤-" + good.split("-")[1],
    ):
        with pytest.raises(NotFound):
            task_view.todo_id_of(7, bad)
