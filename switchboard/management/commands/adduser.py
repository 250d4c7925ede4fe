"""``switchboard adduser``: a user who can sign in to the Board, optionally in a shared team,
optionally an operator (staff in the Operators group: admin's aggregates and queue health)."""

from __future__ import annotations

import getpass
import os
import sys

from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.text import slugify

from queues import operators, teams
from queues.models import Membership, Team


class Command(BaseCommand):
    help = (
        "Create a user (with a personal team). The password comes from SWITCHBOARD_PASSWORD, "
        "else a prompt. --team adds them to a shared team, created (with them as owner) if new."
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
            # The post_save signal gives the new user a personal team.
            user = User.objects.create_user(username, password=password, is_staff=staff)
            if staff:
                operators.add_operator(user)
            joined = None
            if team is not None:
                is_new = not Team.objects.filter(slug=slugify(team)).exists()
                joined = teams.get_or_create_team(team)
                role = Membership.Role.OWNER if is_new else Membership.Role.MEMBER
                teams.add_member(joined, user, role=role)

        kind = "staff user" if staff else "user"
        personal = user.teams.get(personal=True)
        line = f"Created {kind} {username} with personal team {personal.slug}"
        if joined is not None:
            role = joined.memberships.get(user=user).role
            line += f"; {role} of team {joined.slug}{' (new)' if is_new else ''}"
        if staff:
            line += f"; in the {operators.GROUP} group"
        self.stdout.write(line + ".")

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
