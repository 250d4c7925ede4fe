"""``switchboard vend``: make an endpoint for an agent and print its token, and only that."""

from __future__ import annotations

from django.core.management.base import CommandError

from switchboard.management.base import RowCommand
from switchboard.queues import endpoints
from switchboard.queues.errors import Conflict, Invalid
from switchboard.queues.models import Team


class Command(RowCommand):
    help = (
        "Create an endpoint for AGENT_ID in a team. Prints only the token on stdout (shown "
        "once, so it can be captured: TOKEN=$(switchboard vend ...)); everything else on stderr."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("agent_id", metavar="AGENT_ID", help="a slug, e.g. docs-builder")
        parser.add_argument("--team", required=True, metavar="SLUG", help="the owning team")
        parser.add_argument(
            "--verbs",
            default="all",
            metavar="v1,v2|all",
            help="the verbs this endpoint may call, frozen at creation [all]",
        )
        parser.add_argument("--name", default="", help="a display name [AGENT_ID]")

    def handle(self, *args, agent_id: str, team: str, verbs: str, name: str, **options) -> None:
        found = Team.objects.filter(slug=team).first()
        if found is None:
            raise CommandError(
                f"No team with slug {team!r}. Every user has a personal team named after them; "
                "`switchboard adduser NAME --team SLUG` creates a shared one."
            )
        try:
            endpoint, token = endpoints.vend(found, agent_id, verbs=verbs, name=name)
        except (Invalid, Conflict) as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(
            f"Endpoint {endpoint.agent_id} in team {found.slug}, verbs: "
            f"{', '.join(endpoint.verbs)}. The token below is shown once."
        )
        self.stdout.write(token)
