"""The team the demo plays in, its members and one endpoint per role: the only part of the
demo that uses the ORM (it runs beside the server's database, like ``vend``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils.text import slugify

from switchboard.board.demo_strip import DEMO_TEAM_NAME
from switchboard.demo.options import DemoError
from switchboard.demo.script import ROLES, Role
from switchboard.queues import endpoints, teams
from switchboard.queues.models import Endpoint, Membership, Team


@dataclass(slots=True)
class Setup:
    team: Team
    tokens: dict[str, str]  # agent_id -> token, one per role in play
    new_team: bool = False
    rotated: list[str] = field(default_factory=list)


def prepare(*, team_slug: str, roles: int, members: tuple[str, ...] = ()) -> Setup:
    """Create (or reuse) the team and one endpoint per role; a rerun rotates the demo
    endpoints' tokens instead of failing on the existing agent_ids (the old tokens, if an
    earlier demo still runs, stop working at once)."""
    User = get_user_model()
    slug = slugify(team_slug)
    if not slug:
        raise DemoError(f"{team_slug!r} cannot be a team slug: use letters, digits, hyphens.")
    wanted = []
    for name in members:
        user = User.objects.filter(**{User.USERNAME_FIELD: name}).first()
        if user is None:
            raise DemoError(f"No user named {name!r} (add one: `switchboard adduser {name}`).")
        wanted.append(user)
    with transaction.atomic():
        new_team = not Team.objects.filter(slug=slug).exists()
        # The name marks the team as the demo's on the Board (board/demo_strip.py).
        team = teams.get_or_create_team(slug, name=DEMO_TEAM_NAME)
        if new_team:
            # The operators (`switchboard up`'s first user, `admin`, is one) see the demo
            # on the Board. Only on creation: an existing team's membership is its owners'.
            for user in User.objects.filter(is_superuser=True, is_active=True).order_by("pk"):
                teams.add_member(team, user, role=Membership.Role.OWNER)
        for user in wanted:
            teams.add_member(team, user)
        setup = Setup(team=team, tokens={}, new_team=new_team)
        for role in ROLES[:roles]:
            agent_id, token, rotated = _endpoint_for(team, role)
            setup.tokens[agent_id] = token
            if rotated:
                setup.rotated.append(agent_id)
    return setup


def _endpoint_for(team: Team, role: Role) -> tuple[str, str, bool]:
    """The role's endpoint, vended or rotated; a revoked one is left alone for a fresh name."""
    for n in range(1, 100):
        agent_id = role.agent_id if n == 1 else f"{role.agent_id}-{n}"
        existing = Endpoint.objects.filter(team=team, agent_id=agent_id).first()
        if existing is None:
            _, token = endpoints.vend(team, agent_id, name=role.name)
            return agent_id, token, False
        if existing.revoked_at is None:
            return agent_id, endpoints.rotate(existing), True
    raise DemoError(f"Too many revoked {role.agent_id} endpoints in team {team.slug}.")
