"""Which teams a Board request sees: all the user's teams, or the one picked in the team
switcher (kept in the session). Computed once per request."""

from __future__ import annotations

from dataclasses import dataclass

from switchboard.queues.models import Team

SESSION_KEY = "board_team"


@dataclass(frozen=True, slots=True)
class Scope:
    teams: list[Team]
    current: Team | None  # None: all of the user's teams

    @property
    def team_ids(self) -> list[int]:
        return [self.current.pk] if self.current else [team.pk for team in self.teams]

    @property
    def home_team(self) -> Team | None:
        """The team the team and endpoints pages manage when "All teams" is picked: the
        user's personal team, else the first by name."""
        if self.current:
            return self.current
        personal = [team for team in self.teams if team.personal]
        return (personal or self.teams or [None])[0]


def board_scope(request) -> Scope:
    cached = getattr(request, "_board_scope", None)
    if cached is None:
        # Loaded with the user (board.auth), else one query.
        teams = getattr(request.user, "board_teams", None)
        if teams is None:
            teams = list(request.user.teams.order_by("name", "id"))
        slug = request.session.get(SESSION_KEY)
        current = next((team for team in teams if team.slug == slug), None)
        cached = request._board_scope = Scope(teams=teams, current=current)
    return cached


def context(request) -> dict:
    """Template context: the team switcher. Callables, so a fragment that never shows the
    switcher (an htmx partial) never runs its query."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {
        "board_teams": lambda: board_scope(request).teams,
        "board_team": lambda: board_scope(request).current,
    }
