"""Teams, memberships, invitations and dead-letter sinks: every user gets a personal team
when created."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.contrib.postgres.expressions import ArraySubquery
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.db.models.functions import JSONObject
from django.utils import timezone
from django.utils.text import slugify

from switchboard.queues import audit, webhooks
from switchboard.queues.errors import Invalid, NotFound
from switchboard.queues.models import DeadLetterSink, EventKind, Membership, Team, TeamInvitation

SINK_URL_MAX_CHARS = 500


def _free_slug(base: str) -> str:
    base = slugify(base)[:56] or "team"
    slug, n = base, 1
    while Team.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def give_new_user_a_personal_team(sender, instance, created: bool, **kwargs) -> None:
    if not created or kwargs.get("raw"):
        return
    with transaction.atomic():
        team = Team.objects.create(
            slug=_free_slug(instance.get_username()),
            name=f"{instance.get_username()}'s team",
            personal=True,
        )
        Membership.objects.create(team=team, user=instance, role=Membership.Role.OWNER)


def get_or_create_team(slug: str, *, name: str | None = None) -> Team:
    team, _ = Team.objects.get_or_create(slug=slugify(slug), defaults={"name": name or slug})
    return team


def add_member(team: Team, user, *, role: str = Membership.Role.MEMBER, by=None) -> Membership:
    """Add ``user`` to ``team`` (or raise them to owner); audited as a team-level event."""
    with transaction.atomic():
        membership, created = Membership.objects.get_or_create(
            team=team, user=user, defaults={"role": role}
        )
        if not created and membership.role != role and role == Membership.Role.OWNER:
            membership.role = role
            membership.save(update_fields=["role"])
        elif not created:
            return membership
        audit.record_now(
            EventKind.MEMBER_ADD,
            team_id=team.pk,
            user=by,
            detail={"user_id": user.pk, "role": membership.role},
        )
    return membership


def remove_member(team: Team, user, *, by=None) -> bool:
    """Remove ``user`` from ``team``; audited. The last owner cannot leave."""
    from switchboard.queues.errors import Conflict

    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(team=team, user=user).first()
        if membership is None:
            return False
        owners = Membership.objects.filter(team=team, role=Membership.Role.OWNER)
        if membership.role == Membership.Role.OWNER and owners.count() == 1:
            raise Conflict("A team keeps at least one owner.")
        membership.delete()
        audit.record_now(
            EventKind.MEMBER_REMOVE, team_id=team.pk, user=by, detail={"user_id": user.pk}
        )
    return True


# ---------------------------------------------------------------------------------------
# Invitations: on the Board an owner invites a user name, and the user with that name joins by
# accepting (``switchboard adduser --team`` still adds directly: operators are trusted). An
# invitation is made, and answered the same way, whether or not the name exists, so inviting
# tells the owner nothing about which names do. Names match in any letter case. Audited as
# team-level events: member_invite, invite_accept (with the member_add it causes, credited to
# the owner who invited), invite_decline, invite_revoke.

NO_SUCH_INVITATION = "No such invitation."


def normalize_username(username: str) -> str:
    """As Django stores a user name: trimmed, NFKC-normalised."""
    return unicodedata.normalize("NFKC", username.strip())


def invite(team: Team, username: str, *, role: str = Membership.Role.MEMBER, by) -> TeamInvitation:
    """Invite ``username`` (as typed) to ``team`` with ``role``. A pending invitation of the
    same name takes the new role. Audited (member_invite) when anything changed."""
    username = normalize_username(username)
    with transaction.atomic():
        pending = TeamInvitation.objects.pending().select_for_update()
        invitation = pending.filter(team=team, username__iexact=username).first()
        if invitation is None:
            try:
                with transaction.atomic():  # a concurrent invite of the same name may win
                    invitation = TeamInvitation.objects.create(
                        team=team, username=username, role=role, invited_by=by
                    )
            except IntegrityError:
                invitation = pending.get(team=team, username__iexact=username)
            else:
                _invitation_event(invitation, EventKind.MEMBER_INVITE, by)
                return invitation
        if invitation.role != role:
            invitation.role, invitation.invited_by = role, by
            invitation.save(update_fields=["role", "invited_by"])
            _invitation_event(invitation, EventKind.MEMBER_INVITE, by)
    return invitation


def pending_invitations(team: Team) -> list[TeamInvitation]:
    """The team's invitations not yet answered, oldest first (for its owners)."""
    rows = TeamInvitation.objects.pending().filter(team=team).select_related("invited_by")
    return list(rows.order_by("created_at", "id"))


def invitations_for(user) -> QuerySet[TeamInvitation]:
    """Invitations waiting for ``user``: pending, to their name in any case, to a team they
    are not in yet."""
    return (
        TeamInvitation.objects.pending()
        .filter(username__iexact=user.get_username())
        .exclude(Exists(Membership.objects.filter(team=OuterRef("team"), user=user)))
    )


@dataclass(frozen=True, slots=True)
class PendingInvitation:
    """An invitation waiting for the signed-in user, as loaded with them (board/auth.py)."""

    id: int
    team: str  # the team's name
    role: str
    invited_by: str | None
    created_at: datetime

    @classmethod
    def from_json(cls, row: dict) -> PendingInvitation:
        return cls(
            id=row["id"],
            team=row["team"],
            role=row["role"],
            invited_by=row["invited_by"],
            created_at=datetime.fromisoformat(row["created_at"]),
        )


def pending_invitations_of_users() -> ArraySubquery:
    """``invitations_for`` as a column of a user query (the outer row is the user): each
    request loads its user with the invitations waiting for them in the same query."""
    rows = (
        TeamInvitation.objects.pending()
        .filter(username__iexact=OuterRef("username"))
        .exclude(
            Exists(Membership.objects.filter(team=OuterRef("team"), user=OuterRef(OuterRef("pk"))))
        )
        .order_by("created_at", "id")
        .values(
            json=JSONObject(
                id="id",
                team="team__name",
                role="role",
                invited_by="invited_by__username",
                created_at="created_at",
            )
        )
    )
    return ArraySubquery(rows)


# A team as the user query carries it (board/auth.py): its columns, in this order.
_TEAM_COLUMNS = ("id", "slug", "name", "personal", "created_at")


def teams_of_users() -> ArraySubquery:
    """The user's teams by name, as a column of a user query (the outer row is the user):
    the Board's scope (board.scope) takes them from the request's user instead of a query of
    its own on every page."""
    rows = (
        Team.objects.filter(memberships__user=OuterRef("pk"))
        .order_by("name", "id")
        .values(json=JSONObject(**{column: column for column in _TEAM_COLUMNS}))
    )
    return ArraySubquery(rows)


def team_from_json(row: dict) -> Team:
    """A team of ``teams_of_users``, as the ORM would have loaded it."""
    values = [row[column] for column in _TEAM_COLUMNS]
    values[-1] = datetime.fromisoformat(values[-1])
    return Team.from_db(None, list(_TEAM_COLUMNS), values)


def _addressed_to(user, invitation_id) -> TeamInvitation:
    """A pending invitation to ``user``, locked. An unknown id, someone else's invitation and
    one already answered are the same NotFound."""
    raw = str(invitation_id)
    if not raw.isdigit() or len(raw) > 18:  # beyond a bigint: it cannot exist
        raise NotFound(NO_SUCH_INVITATION)
    invitation = (
        invitations_for(user)
        .select_for_update(of=("self",))
        .select_related("team", "invited_by")
        .filter(pk=int(raw))
        .first()
    )
    if invitation is None:
        raise NotFound(NO_SUCH_INVITATION)
    return invitation


def accept_invitation(user, invitation_id) -> Membership:
    """``user`` accepts an invitation to their name: they join its team with its role
    (``add_member``). NotFound when it is not a pending invitation to them."""
    with transaction.atomic():
        invitation = _addressed_to(user, invitation_id)
        invitation.accepted_at, invitation.answered_by = timezone.now(), user
        invitation.save(update_fields=["accepted_at", "answered_by"])
        _invitation_event(invitation, EventKind.INVITE_ACCEPT, user)
        membership = add_member(
            invitation.team, user, role=invitation.role, by=invitation.invited_by
        )
    return membership


def decline_invitation(user, invitation_id) -> TeamInvitation:
    """``user`` declines an invitation to their name. NotFound as for accepting."""
    with transaction.atomic():
        invitation = _addressed_to(user, invitation_id)
        invitation.declined_at, invitation.answered_by = timezone.now(), user
        invitation.save(update_fields=["declined_at", "answered_by"])
        _invitation_event(invitation, EventKind.INVITE_DECLINE, user)
    return invitation


def revoke_invitation(team: Team, invitation_id, *, by) -> TeamInvitation:
    """An owner withdraws a pending invitation of ``team``: deleted, audited. NotFound for an
    unknown id, another team's invitation or one already answered."""
    raw = str(invitation_id)
    if not raw.isdigit() or len(raw) > 18:
        raise NotFound(NO_SUCH_INVITATION)
    with transaction.atomic():
        invitation = (
            TeamInvitation.objects.pending()
            .select_for_update()
            .filter(team=team, pk=int(raw))
            .first()
        )
        if invitation is None:
            raise NotFound(NO_SUCH_INVITATION)
        _invitation_event(invitation, EventKind.INVITE_REVOKE, by)
        invitation.delete()
    return invitation


def _invitation_event(invitation: TeamInvitation, kind: EventKind, by) -> None:
    detail = {
        "invitation_id": invitation.pk,
        "username": invitation.username,
        "role": invitation.role,
    }
    if kind in ("invite_accept", "invite_decline"):
        detail["user_id"] = by.pk
    audit.record_now(kind, team_id=invitation.team_id, user=by, detail=detail)


# ---------------------------------------------------------------------------------------
# Dead-letter sinks: every todo of the team that dead-letters is POSTed to each active sink
# (queues/outbox.py). Audit rows carry the URL's host only: a webhook URL often carries a
# secret in its path or query.


def add_sink(team: Team, url: str, *, by=None) -> tuple[DeadLetterSink, str]:
    """A new sink for ``team``. Returns it and its signing secret, to be shown once. A URL
    the webhook guard refuses (queues/webhooks.py) is Invalid."""
    if len(url) > SINK_URL_MAX_CHARS:
        raise Invalid(f"A sink URL has at most {SINK_URL_MAX_CHARS} characters.")
    if problem := webhooks.url_problem(url):
        raise Invalid(problem)
    secret = webhooks.new_secret()
    with transaction.atomic():
        sink = DeadLetterSink.objects.create(team=team, url=url, secret=secret, created_by=by)
        _sink_event(sink, EventKind.SINK_ADD, by)
    return sink, secret


def set_sink_active(sink: DeadLetterSink, active: bool, *, by=None) -> bool:
    """Turn a sink off (its deliveries not yet sent are given up, new dead letters skip it)
    or on again. Returns whether anything changed; audited when it did."""
    with transaction.atomic():
        changed = DeadLetterSink.objects.filter(pk=sink.pk, active=not active).update(active=active)
        if changed:
            sink.active = active
            _sink_event(sink, EventKind.SINK_ACTIVATE if active else EventKind.SINK_DEACTIVATE, by)
    return bool(changed)


def remove_sink(sink: DeadLetterSink, *, by=None) -> None:
    """Delete a sink. Its deliveries stay in the outbox as a record; those not yet sent are
    given up by the sender. Audited."""
    with transaction.atomic():
        _sink_event(sink, EventKind.SINK_REMOVE, by)
        sink.delete()


def _sink_event(sink: DeadLetterSink, kind: EventKind, by) -> None:
    audit.record_now(
        kind,
        team_id=sink.team_id,
        user=by,
        detail={"sink_id": sink.pk, "host": urlsplit(sink.url).hostname or ""},
    )
