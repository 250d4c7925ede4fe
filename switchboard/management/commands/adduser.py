"""``switchboard adduser``: a user who can sign in to the Board, optionally in a shared team,
optionally an operator (staff in the Operators group: admin's aggregates and queue health).

One transaction: an error anywhere leaves no user, team or membership behind, so the same
command can simply be run again. ``--team`` may name another user's personal team: the new
user joins it as a member, as they would by accepting its owner's invitation on the Board
(operators on the command line are trusted to add directly).
"""

from __future__ import annotations

import getpass
import os
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db import transaction
from django.utils.text import slugify

from switchboard.management.base import RowCommand
from switchboard.queues import operators, teams
from switchboard.queues.models import Membership, Team


class Command(RowCommand):
    help = (
        "Create a user (with a personal team). The password comes from SWITCHBOARD_PASSWORD, "
        "else a prompt. --team adds them to a team: a new one is created with them as owner; "
        "an existing one (another user's personal team too) takes them as a member."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("username", metavar="NAME")
        parser.add_argument("--team", metavar="SLUG", help="also a member of this team")
        parser.add_argument(
            "--staff",
            action="store_true",
            help=f"an operator: staff, in the {operators.GROUP} group (admin, queue health)",
        )

    def handle(self, *args, username: str, team: str | None, staff: bool, **options) -> None:
        User = get_user_model()
        try:
            User._meta.get_field(User.USERNAME_FIELD).run_validators(username)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
            raise CommandError(f"A user named {username!r} already exists.")
        if team is not None and not slugify(team):
            raise CommandError(f"{team!r} cannot be a team slug: use letters, digits, hyphens.")

        password = self._password(User(**{User.USERNAME_FIELD: username}))
        with transaction.atomic():
            # The post_save signal gives the new user a personal team, the only team they are
            # in until --team: it cannot be told apart by ``personal`` once they join another
            # user's personal team.
            user = User.objects.create_user(username, password=password, is_staff=staff)
            personal = user.teams.get()
            kind = "staff user" if staff else "user"
            line = f"Created {kind} {username} with personal team {personal.slug}"
            if staff:
                operators.add_operator(user)
            if team is not None:
                line += self._join(user, team, personal=personal)
            if staff:
                line += f"; in the {operators.GROUP} group"
        self.stdout.write(line + ".")

    def _join(self, user, slug: str, *, personal: Team) -> str:
        """Add ``user`` to the team ``slug`` (made, with them as owner, if new); how to say
        so. Refused when ``slug`` is their own new personal team (named after them)."""
        is_new = not Team.objects.filter(slug=slugify(slug)).exists()
        joined = teams.get_or_create_team(slug)
        if joined == personal:
            raise CommandError(
                f"--team {slug} is {user.get_username()}'s own personal team; "
                "name another team. Nothing was saved."
            )
        role = Membership.Role.OWNER if is_new else Membership.Role.MEMBER
        membership = teams.add_member(joined, user, role=role)
        whose = " (new)" if is_new else " (a personal team)" if joined.personal else ""
        return f"; {membership.role} of team {joined.slug}{whose}"

    def _password(self, user) -> str:
        password = os.environ.get("SWITCHBOARD_PASSWORD", "")
        if not password:
            if not sys.stdin.isatty():
                raise CommandError("Set SWITCHBOARD_PASSWORD, or run this in a terminal.")
            password = getpass.getpass("Password: ")
            if password != getpass.getpass("Password (again): "):
                raise CommandError("The passwords did not match.")
        try:
            validate_password(password, user)
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from exc
        return password
