import pytest

from switchboard.queues import teams
from switchboard.queues.errors import Conflict
from switchboard.queues.models import Membership, Team, TodoEvent


def test_every_new_user_gets_a_personal_team_they_own(make_user):
    user = make_user("bob")
    team = user.teams.get()
    assert team.personal and Membership.objects.get(team=team, user=user).role == "owner"


def test_membership_changes_are_audited(user, make_user):
    team = teams.get_or_create_team("platform")
    teams.add_member(team, user, role="owner")
    carol = make_user("carol")
    teams.add_member(team, carol, by=user)
    assert teams.remove_member(team, carol, by=user)
    kinds = list(
        TodoEvent.objects.filter(team=team).order_by("id").values_list("kind", "actor_user")
    )
    assert kinds == [("member_add", None), ("member_add", user.pk), ("member_remove", user.pk)]
    with pytest.raises(Conflict):
        teams.remove_member(team, user, by=user)  # the last owner stays
    assert Team.objects.filter(slug="platform").exists()
