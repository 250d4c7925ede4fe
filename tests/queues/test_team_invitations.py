"""Team invitations in the ledger (queues/teams.py): one pending invitation per name and team,
whoever races, and only the invitee's own pending invitations can be answered."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from switchboard.queues import teams
from switchboard.queues.errors import NotFound
from switchboard.queues.models import Membership, TeamInvitation, TodoEvent
from tests.queues.helpers import run_together


@pytest.fixture
def platform(user):
    platform = teams.get_or_create_team("platform", name="Platform")
    teams.add_member(platform, user, role="owner")
    return platform


def test_a_name_is_stored_as_typed_normalised_and_matched_in_any_case(user, platform, make_user):
    invitation = teams.invite(platform, "  Ｄave ", role="member", by=user)  # fullwidth D
    assert invitation.username == "Dave"
    dave = make_user("dave")
    assert list(teams.invitations_for(dave)) == [invitation]
    assert teams.invite(platform, "DAVE", role="member", by=user) == invitation


@pytest.mark.django_db(transaction=True)
def test_concurrent_invitations_of_one_name_leave_one_pending(user, platform):
    def invite(n: int) -> None:
        teams.invite(platform, "Dave" if n % 2 else "dave", role="member", by=user)

    assert run_together(invite, 8) == []
    assert TeamInvitation.objects.pending().filter(team=platform).count() == 1
    assert TodoEvent.objects.filter(team=platform, kind="member_invite").count() == 1


def test_the_database_keeps_one_pending_invitation_per_name_and_one_answer(user, platform):
    teams.invite(platform, "dave", role="member", by=user)
    with pytest.raises(IntegrityError), transaction.atomic():
        TeamInvitation.objects.create(team=platform, username="DAVE", role="member")
    with pytest.raises(IntegrityError), transaction.atomic():
        TeamInvitation.objects.filter(username="dave").update(
            accepted_at=timezone.now(), declined_at=timezone.now()
        )


def test_a_team_already_joined_has_no_invitation_waiting(user, platform, make_user):
    dave = make_user("dave")
    invitation = teams.invite(platform, "dave", role="member", by=user)
    teams.add_member(platform, dave)  # say, `switchboard adduser --team platform`
    assert not teams.invitations_for(dave).exists()
    with pytest.raises(NotFound):
        teams.accept_invitation(dave, invitation.pk)


def test_only_the_invitee_answers_and_only_once(user, platform, make_user):
    dave, erin = make_user("dave"), make_user("erin")
    invitation = teams.invite(platform, "dave", role="owner", by=user)
    for answer in (teams.accept_invitation, teams.decline_invitation):
        with pytest.raises(NotFound):
            answer(erin, invitation.pk)
    membership = teams.accept_invitation(dave, invitation.pk)
    assert (membership.team, membership.role) == (platform, Membership.Role.OWNER)
    for answer in (teams.accept_invitation, teams.decline_invitation):
        with pytest.raises(NotFound):
            answer(dave, invitation.pk)
    with pytest.raises(NotFound):
        teams.revoke_invitation(platform, invitation.pk, by=user)  # answered: not pending
