"""An endpoint's limits (issue 44) on its page: an owner sets ``max_claimed`` and
``max_claimed_per_key`` (audited, read at once by the claims), a member reads them, bad numbers
are a 400 that keeps what was typed, another team's endpoint answers like an unknown one."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from switchboard.queues import endpoints, transitions
from switchboard.queues.errors import Conflict, Invalid
from switchboard.queues.models import Endpoint, TodoEvent
from switchboard.queues.transitions import Actor
from tests.board.test_endpoint_page import _messages, shared_team

__all__ = ["shared_team"]  # a fixture, shared


def _limits(endpoint) -> tuple:
    row = Endpoint.objects.get(pk=endpoint.pk)
    return row.max_claimed, row.max_claimed_per_key


def test_an_owner_sets_and_clears_the_limits_and_claims_follow_them(logged_in, endpoint, make_todo):
    detail = reverse("endpoint-detail", args=[endpoint.pk])
    page = logged_in.get(detail).content.decode()
    assert 'name="max_claimed_per_key"' in page and "Save limits" in page

    response = logged_in.post(
        detail, {"op": "limits", "max_claimed": "", "max_claimed_per_key": "1"}
    )
    assert response.status_code == 302 and _messages(response) == ["Limits saved."]
    assert _limits(endpoint) == (None, 1)
    make_todo("x1", key="repo-x")
    make_todo("x2", key="repo-x")
    agent = Actor.agent(Endpoint.objects.get(pk=endpoint.pk))
    assert transitions.claim_next(agent).todo.title == "x1"
    assert transitions.claim_next(agent) is None  # x2's key is at its limit

    again = logged_in.post(detail, {"op": "limits", "max_claimed": "", "max_claimed_per_key": "1"})
    assert _messages(again) == ["Nothing changed."]
    logged_in.post(detail, {"op": "limits", "max_claimed": "", "max_claimed_per_key": ""})
    assert _limits(endpoint) == (None, None)
    events = TodoEvent.objects.filter(kind="limits").order_by("id")
    assert [e.detail["max_claimed_per_key"] for e in events] == [1, None]
    assert "no cap a key" in logged_in.get(reverse("activity-list")).content.decode()


@pytest.mark.parametrize("value", ["0", "-1", "10001", "two", "1.5"])
def test_a_bad_limit_is_a_400_that_keeps_what_was_typed(logged_in, endpoint, value):
    detail = reverse("endpoint-detail", args=[endpoint.pk])
    response = logged_in.post(detail, {"op": "limits", "max_claimed": value})
    assert response.status_code == 400
    assert f'value="{value}"' in response.content.decode()
    assert _limits(endpoint) == (None, None)
    assert not TodoEvent.objects.filter(kind="limits").exists()


def test_a_member_reads_the_limits_and_may_not_set_them(client, shared_team, vend):
    platform, carol = shared_team
    endpoint, _ = vend("shared-agent", team=platform)
    endpoints.set_limits(endpoint, max_claimed=3, max_claimed_per_key=None)
    client.force_login(carol)
    detail = reverse("endpoint-detail", args=[endpoint.pk])
    page = client.get(detail).content.decode()
    assert "Save limits" not in page and "Only an owner of Platform may change them." in page
    response = client.post(detail, {"op": "limits", "max_claimed": "9"})
    assert _messages(response) == [
        "Only an owner of Platform may change the limits of its endpoints."
    ]
    assert _limits(endpoint) == (3, None)


def test_a_foreign_endpoints_limits_answer_like_an_unknown_one(logged_in, make_user, vend):
    bob = make_user("bob")
    foreign, _ = vend("bobs-agent", team=bob.teams.get())
    seen = logged_in.post(
        reverse("endpoint-detail", args=[foreign.pk]), {"op": "limits", "max_claimed": "1"}
    )
    unknown = logged_in.post(
        reverse("endpoint-detail", args=[foreign.pk + 1000]), {"op": "limits", "max_claimed": "1"}
    )
    assert seen.status_code == unknown.status_code == 404 and seen.content == unknown.content
    assert _limits(foreign) == (None, None)


def test_the_limits_form_needs_its_csrf_token(user, endpoint):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    detail = reverse("endpoint-detail", args=[endpoint.pk])
    assert strict.post(detail, {"op": "limits", "max_claimed": "1"}).status_code == 403
    assert _limits(endpoint) == (None, None)


def test_set_limits_checks_its_numbers_and_refuses_a_revoked_endpoint(endpoint):
    for bad in (0, -1, 10_001, True, "3", 2.0):
        with pytest.raises(Invalid):
            endpoints.set_limits(endpoint, max_claimed=bad, max_claimed_per_key=None)
    assert endpoints.set_limits(endpoint, max_claimed=5, max_claimed_per_key=2) is True
    assert endpoints.set_limits(endpoint, max_claimed=5, max_claimed_per_key=2) is False
    transitions.revoke_endpoint(None, endpoint)
    with pytest.raises(Conflict):
        endpoints.set_limits(endpoint, max_claimed=None, max_claimed_per_key=None)
