from switchboard.queues import transitions
from switchboard.queues.transitions import Actor
from tests.queues.helpers import get_todo_for_endpoint


def test_claim_complete_round_trip(endpoint, agent, make_todo):
    todo = make_todo()
    claim = transitions.claim_next(Actor.agent(endpoint))
    assert claim.todo.id == todo.id and claim.todo.state == "claimed"
    assert claim.attempt_seq == 1 and claim.prior_attempts == []
    closed = transitions.complete(agent, todo.id, result={"ok": 1}, summary="did it")
    assert closed.todo.state == "done" and closed.attempt.outcome == "completed"
    detail = get_todo_for_endpoint(endpoint, todo.id)
    assert [a.outcome for a in detail.attempts] == ["completed"]
