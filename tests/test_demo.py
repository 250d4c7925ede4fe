"""`switchboard demo`: simulated agents over the HTTP API, against a live server."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from switchboard import demo
from switchboard.queues import endpoints
from switchboard.queues.models import Endpoint, Membership, Team, Todo, TodoAttempt

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
def test_demo_agents_complete_fail_die_and_get_fenced_over_http(live_server, settings):
    # A failed todo is claimable again at once, so the two-attempt todos reach their dead
    # letter within the run instead of after up to 10 s of backoff.
    settings.SWITCHBOARD_RETRY_BASE_SECONDS = 0
    admin = get_user_model().objects.create_superuser("admin", password="pw-for-tests")
    out = io.StringIO()

    call_command(
        "demo",
        *("--url", live_server.url, "--agents", "5", "--todos", "10", "--seed", "7"),
        *("--lease", "2", "--pace", "0.2", "--duration", "8"),
        stdout=out,
    )

    printed = out.getvalue()
    team = Team.objects.get(slug="demo")
    assert team.memberships.get(user=admin).role == Membership.Role.OWNER
    assert set(team.endpoints.values_list("agent_id", flat=True)) == {
        "ci-fixer",
        "docs-bot",
        "scribe",
        "triage",
    }
    todos = Todo.objects.filter(endpoint__team=team)
    assert todos.count() >= 10
    states = set(todos.values_list("state", flat=True))
    assert {"done", "dead"} <= states, printed
    assert todos.filter(requester__isnull=False).exists()  # sent with `to`
    assert todos.exclude(priority=0).exists()
    attempts = TodoAttempt.objects.filter(todo__endpoint__team=team)
    outcomes = set(attempts.values_list("outcome", flat=True))
    assert {"completed", "failed", "released"} <= outcomes, printed
    assert outcomes & {"lease_expired", "reaped"}, printed
    assert attempts.filter(outcome="failed", todo__dead_letter_reason="failed").exists()
    assert attempts.filter(claimant__startswith="harness/buildbox/").exists()
    assert attempts.filter(lease_token_hash__isnull=False).exists()  # fenced
    assert attempts.filter(outcome="completed", summary__isnull=False).exists()
    assert attempts.filter(artifact__regex=r"^(https|mcp)://").exists()
    # The hung worker's late call after its replacement took over was refused (fenced out
    # when it held a lease token, else by its stale attempt_seq).
    assert "409 conflict (its" in printed
    assert "demo stopped" in printed


def test_a_rerun_rotates_the_demo_endpoints_instead_of_failing(db):
    first = demo.prepare(team_slug="demo", roles=2)
    second = demo.prepare(team_slug="demo", roles=2)

    assert first.new_team and not second.new_team
    assert second.rotated == ["ci-fixer", "docs-bot"]
    assert Endpoint.objects.filter(team=second.team).count() == 2
    for agent_id, token in first.tokens.items():
        assert endpoints.authenticate(token) is None  # the old token stopped working
        assert endpoints.authenticate(second.tokens[agent_id]).agent_id == agent_id


def test_a_revoked_demo_endpoint_is_replaced_under_a_fresh_name(db):
    first = demo.prepare(team_slug="demo", roles=1)
    Endpoint.objects.filter(agent_id="ci-fixer").update(revoked_at="2026-01-01T00:00:00Z")

    second = demo.prepare(team_slug="demo", roles=1)

    assert list(second.tokens) == ["ci-fixer-2"] and second.rotated == []
    assert first.tokens["ci-fixer"] != second.tokens["ci-fixer-2"]


def test_superusers_own_a_new_demo_team_and_named_members_join(make_user):
    operator = get_user_model().objects.create_superuser("root", password="pw-for-tests")
    bob = make_user("bob")
    make_user("carol")

    setup = demo.prepare(team_slug="demo", roles=1, members=("bob",))

    roles = dict(setup.team.memberships.values_list("user__username", "role"))
    assert roles == {operator.username: "owner", bob.username: "member"}


def test_an_unknown_member_is_refused_before_anything_is_made(db):
    with pytest.raises(demo.DemoError, match="No user named 'nobody'"):
        demo.prepare(team_slug="demo", roles=1, members=("nobody",))

    assert not Team.objects.filter(slug="demo").exists()
