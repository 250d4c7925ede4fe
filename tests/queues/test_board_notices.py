"""What the triggers say on ``switchboard_board`` (queues/schema/functions.sql), heard on a real
LISTEN connection after each commit and read as the channel's record (a BoardNotice,
queues/notify/channels.py): a todo of a watched team is said once, with what happened to it;
a todo nobody watches, or an UPDATE that changed nothing, says nothing; the close and the next
claim in one statement say both todos; an endpoint's change and an audit row say theirs."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection

from switchboard.queues import transitions
from switchboard.queues.db.availability import connection_params
from switchboard.queues.notify import BOARD

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heard():
    """``heard()``: the payloads said on switchboard_board since the last call. It says a
    marker last and reads up to it: notifications arrive in commit order, so whatever was
    committed before the marker has arrived when it does."""
    listener = psycopg.connect(**connection_params(listen=True), autocommit=True)
    listener.execute("LISTEN switchboard_board")

    def payloads() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify('switchboard_board', 'marker')")
        got = []
        for note in listener.notifies(timeout=5):
            if note.payload == "marker":
                return got
            notice = BOARD.read(note.payload)
            assert notice is not None, note.payload
            got.append(f"{notice.team}:{notice.endpoint}:{notice.todo}:{notice.what}")
        raise AssertionError(f"the marker did not arrive within 5 s; heard {got}")

    yield payloads
    listener.close()


def _watch(team_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO board_watches (team_id, holder, expires_at)"
            " VALUES (%s, 'test', now() + interval '1 minute')",
            [team_id],
        )


def test_each_todo_of_a_watched_team_is_said_once_with_its_flag(heard, endpoint, agent, make_todo):
    team = endpoint.team_id
    first = make_todo("before anyone watched")
    assert heard() == []  # nobody watches: nothing said

    _watch(team)
    second, third = make_todo("second"), make_todo("third")
    assert heard() == [
        f"{team}:{endpoint.pk}:{second.id}:new",
        f"{team}:{endpoint.pk}:{third.id}:new",
    ]

    claim = transitions.claim_next(agent)
    assert claim.todo.id == first.id
    assert heard() == [f"{team}:{endpoint.pk}:{first.id}:changed"]  # a claim ends nothing

    # The close and the next claim in one statement: both todos, the close's ended a try.
    both = transitions.close_then_claim_next(
        agent,
        transitions.Close.complete(result={"ok": True}),
        first.id,
        attempt_seq=claim.attempt_seq,
        claim=transitions.ClaimArgs(),
    )
    assert both.claim is not None and both.claim.todo.id == second.id
    assert sorted(heard()) == sorted(
        [f"{team}:{endpoint.pk}:{first.id}:ended", f"{team}:{endpoint.pk}:{second.id}:changed"]
    )

    with connection.cursor() as cursor:  # one statement, many rows; one that changed nothing
        cursor.execute("UPDATE todos SET priority = 5 WHERE endpoint_id = %s", [endpoint.pk])
        assert cursor.rowcount == 3
        assert sorted(heard()) == sorted(
            f"{team}:{endpoint.pk}:{t.id}:changed" for t in (first, second, third)
        )
        cursor.execute("UPDATE todos SET priority = 5 WHERE endpoint_id = %s", [endpoint.pk])
        cursor.execute("UPDATE todos SET priority = 9 WHERE id = -1")
    assert heard() == []


def test_a_statement_of_many_rows_says_each_once_and_leaves_nested_loops_as_they_were(
    heard, endpoint, agent, make_todo
):
    """Past eight rows the trigger plans the statement for its count without nested loops
    (a release of many dependents): the same notices as a few rows get, and the setting the
    session had is the one it has after."""
    todos = [make_todo(f"many {i}") for i in range(12)]
    claim = transitions.claim_next(agent)
    _watch(endpoint.team_id)
    assert heard() == []
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE todos SET priority = 7, state = CASE WHEN id = %s THEN 'pending'"
            " ELSE state END WHERE endpoint_id = %s",
            [claim.todo.id, endpoint.pk],
        )
        assert cursor.rowcount == 12
        cursor.execute("SHOW enable_nestloop")
        assert cursor.fetchone()[0] == "on"
    said = heard()
    assert sorted(said) == sorted(
        f"{endpoint.team_id}:{endpoint.pk}:{t.id}:{'ended' if t.id == claim.todo.id else 'changed'}"
        for t in todos
    )
    with connection.cursor() as cursor:  # many rows, none changed: nothing said
        cursor.execute("UPDATE todos SET priority = 7 WHERE endpoint_id = %s", [endpoint.pk])
    assert heard() == []


def test_a_team_nobody_watches_hears_nothing_of_a_watched_ones(
    heard, endpoint, make_endpoint, make_todo
):
    from switchboard.queues import teams

    elsewhere = make_endpoint("agent-elsewhere", team=teams.get_or_create_team("elsewhere"))
    _watch(endpoint.team_id)
    mine, theirs = make_todo("mine"), make_todo("theirs", on=elsewhere)
    assert heard() == [f"{endpoint.team_id}:{endpoint.pk}:{mine.id}:new"]
    with connection.cursor() as cursor:
        cursor.execute("UPDATE todos SET priority = 3 WHERE id IN (%s, %s)", [mine.id, theirs.id])
    assert heard() == [f"{endpoint.team_id}:{endpoint.pk}:{mine.id}:changed"]


def test_an_endpoint_change_and_an_audit_row_say_theirs(heard, endpoint, user, make_todo):
    from switchboard.queues import endpoints as endpoint_accounts

    todo = make_todo("acted on")
    _watch(endpoint.team_id)
    endpoint_accounts.pause(endpoint)
    said = heard()  # the endpoint, and the pause's audit row (a team-level one: no todo)
    assert said == [
        f"{endpoint.team_id}:{endpoint.pk}:None:endpoint",
        f"{endpoint.team_id}:None:None:event",
    ]
    transitions.cancel(transitions.Actor.human(user), todo.id)
    said = heard()
    assert f"{endpoint.team_id}:None:{todo.id}:event" in said  # the cancel's audit row
    assert f"{endpoint.team_id}:{endpoint.pk}:{todo.id}:changed" in said  # the todo itself
