"""Vending, rotating, pausing and listing endpoints (revocation is a transition: it kills
todos)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.db import DEFAULT_DB_ALIAS, IntegrityError, transaction
from django.db.models.functions import Now
from django.utils import timezone
from django.utils.text import slugify

from switchboard.queues import audit, db, sql, tokens, webhooks
from switchboard.queues.db import Fetch, Plan
from switchboard.queues.errors import Conflict, Invalid, Unauthorized
from switchboard.queues.models import VERBS, Endpoint, EventKind, Team

NOTIFY_URL_MAX_CHARS = 500


def parse_verbs(value: str | list[str] | None) -> list[str]:
    """'all', a comma list, or a list; unknown verbs are Invalid."""
    if value is None or value == "all" or value == ["all"]:
        return list(VERBS)
    items = value.split(",") if isinstance(value, str) else list(value)
    verbs = [v.strip() for v in items if v and v.strip()]
    unknown = sorted(set(verbs) - set(VERBS))
    if unknown:
        raise Invalid(f"Unknown verbs: {', '.join(unknown)}. Known: {', '.join(VERBS)}.")
    if not verbs:
        raise Invalid("Choose at least one verb.")
    return [v for v in VERBS if v in verbs]


def vend(
    team: Team, agent_id: str, *, verbs=None, name: str = "", user=None
) -> tuple[Endpoint, str]:
    """Create an endpoint with a frozen verb set. Returns it and its token (shown once)."""
    slug = slugify(agent_id)
    if not slug or slug != agent_id:
        raise Invalid("agent_id must be a slug: lowercase letters, digits and hyphens.")
    token = tokens.new_endpoint_token()
    try:
        with transaction.atomic():
            endpoint = Endpoint.objects.create(
                team=team,
                agent_id=agent_id,
                name=name or agent_id,
                token_hash=tokens.digest(token),
                verbs=parse_verbs(verbs),
            )
            _record(EventKind.ENDPOINT_VEND, endpoint, user, verbs=endpoint.verbs)
    except IntegrityError as exc:
        raise Conflict(f"An endpoint named {agent_id!r} already exists in this team.") from exc
    return endpoint, token


def rotate(endpoint: Endpoint, *, user=None) -> str:
    """Issue a new token; the old one stops working at once. The queue is kept."""
    if endpoint.revoked_at is not None:
        raise Conflict("A revoked endpoint cannot be rotated.")
    token = tokens.new_endpoint_token()
    with transaction.atomic():
        endpoint.token_hash = tokens.digest(token)
        endpoint.rotated_at = timezone.now()
        endpoint.save(update_fields=["token_hash", "rotated_at"])
        _record(EventKind.ENDPOINT_ROTATE, endpoint, user)
    return token


def set_notify_url(endpoint: Endpoint, url: str, *, user=None) -> str | None:
    """Set (or, with "", clear) the URL rung when a todo on this queue becomes claimable;
    audited. A new URL gets a new signing secret, returned to be shown once (the receiver
    before may have known the old one); clearing the URL clears the secret and returns None.
    A URL the webhook guard refuses (queues/webhooks.py) is Invalid."""
    if url:
        if len(url) > NOTIFY_URL_MAX_CHARS:
            raise Invalid(f"A notify URL has at most {NOTIFY_URL_MAX_CHARS} characters.")
        if problem := webhooks.url_problem(url):
            raise Invalid(problem)
    secret = webhooks.new_secret() if url else ""
    with transaction.atomic():
        endpoint.notify_url = url
        endpoint.notify_secret = secret
        endpoint.save(update_fields=["notify_url", "notify_secret"])
        # The host only: a webhook URL often carries a secret in its path or query.
        _record(EventKind.NOTIFY_URL, endpoint, user, host=urlsplit(url).hostname or "")
    return secret or None


def rotate_notify_secret(endpoint: Endpoint, *, user=None) -> str:
    """A new secret for the endpoint's doorbell (shown once); the old one stops signing at
    once, including for doorbells not yet sent. Audited."""
    if not endpoint.notify_url:
        raise Conflict("This endpoint has no notify URL, so no secret to rotate.")
    secret = webhooks.new_secret()
    with transaction.atomic():
        endpoint.notify_secret = secret
        endpoint.save(update_fields=["notify_secret"])
        _record(EventKind.NOTIFY_SECRET_ROTATE, endpoint, user)
    return secret


LIMIT_MAX = 10_000  # the largest max_claimed or max_claimed_per_key an endpoint may set


def set_limits(
    endpoint: Endpoint, *, max_claimed: object, max_claimed_per_key: object, user=None
) -> bool:
    """Set (or, with None, clear) what the endpoint's agents may hold at once: ``max_claimed``
    todos in all, ``max_claimed_per_key`` of any one key (issue 44; a claim passes over a key
    at its limit without blocking the others). Audited; False when nothing changed. From the
    commit on every process claims by them (the token cache hears the endpoint's change); a
    lowered limit takes nothing back from agents that hold more."""
    limits = {
        "max_claimed": _limit(max_claimed, "max_claimed"),
        "max_claimed_per_key": _limit(max_claimed_per_key, "max_claimed_per_key"),
    }
    if endpoint.revoked_at is not None:
        raise Conflict("A revoked endpoint has no limits to set.")
    with transaction.atomic():
        changed = Endpoint.objects.filter(pk=endpoint.pk).exclude(**limits).update(**limits)
        if changed:
            _record(EventKind.ENDPOINT_LIMITS, endpoint, user, **limits)
            # A raised limit may free claims for agents waiting now.
            db.fetch(sql.RING_DOORBELL, {"endpoint_id": endpoint.pk})
    endpoint.refresh_from_db(fields=["max_claimed", "max_claimed_per_key"])
    return bool(changed)


def _limit(value: object, name: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LIMIT_MAX:
        raise Invalid(f"{name} is a whole number from 1 to {LIMIT_MAX:,}, or empty for none.")
    return value


def _record(kind: EventKind, endpoint: Endpoint, user, **detail) -> None:
    """Audit ``kind`` done to ``endpoint`` (in its team, by ``user``): the detail names its
    agent_id, and whatever else ``detail`` says."""
    audit.record_now(
        kind, team_id=endpoint.team_id, user=user, detail={"agent_id": endpoint.agent_id, **detail}
    )


def pause(endpoint: Endpoint, *, user=None) -> bool:
    """Pause the endpoint: from the commit on, its claim and claim_next hand out nothing
    (they answer ``paused: true``); every other verb keeps working and holders keep their
    leases. Audited. False when it was already paused (nothing changed); a revoked endpoint
    is Conflict."""
    if endpoint.revoked_at is not None:
        raise Conflict("A revoked endpoint cannot be paused.")
    with transaction.atomic():
        changed = Endpoint.objects.filter(
            pk=endpoint.pk, paused_at__isnull=True, revoked_at__isnull=True
        ).update(paused_at=Now(), paused_by=user)
        if changed:
            _record(EventKind.ENDPOINT_PAUSE, endpoint, user)
    _reload_pause(endpoint)
    if not changed and endpoint.revoked_at is not None:  # revoked since it was read
        raise Conflict("A revoked endpoint cannot be paused.")
    return bool(changed)


def resume(endpoint: Endpoint, *, user=None) -> bool:
    """Resume a paused endpoint: its claims hand out work again, and its doorbell rings (at
    commit) so that long-polls waiting through the pause look at once. Audited. False when
    it was not paused (nothing changed)."""
    with transaction.atomic():
        changed = Endpoint.objects.filter(pk=endpoint.pk, paused_at__isnull=False).update(
            paused_at=None, paused_by=None
        )
        if changed:
            _record(EventKind.ENDPOINT_RESUME, endpoint, user)
            db.fetch(sql.RING_DOORBELL, {"endpoint_id": endpoint.pk})
    _reload_pause(endpoint)
    return bool(changed)


def _reload_pause(endpoint: Endpoint) -> None:
    endpoint.refresh_from_db(fields=["paused_at", "paused_by", "revoked_at"])


def authenticate_plan(token: str | None) -> Plan[Endpoint | None]:
    """The endpoint whose token this is, revoked or not (the caller decides), or None.
    The lookup is by SHA-256 digest: the raw token never reaches the database or a log."""
    digest = tokens.lookup_digest(token)
    if digest is None:
        return None
    row = yield from token_row_plan(digest)
    return endpoint_from_row(row) if row is not None else None


def token_row_plan(digest: str) -> Plan[tuple | None]:
    """The row (sql.ENDPOINT_FIELDS) of the endpoint whose token has this digest, or None."""
    rows = yield Fetch(sql.ENDPOINT_BY_TOKEN, {"token_hash": digest})
    return tuple(rows[0]) if rows else None


def authenticate(token: str | None) -> Endpoint | None:
    return db.run(authenticate_plan(token))


def still_valid_plan(endpoint: Endpoint) -> Plan[None]:
    """Unauthorized unless ``endpoint``'s token (as authenticated) is still its token and it
    is not revoked; else ``endpoint.paused_at`` is brought up to date. A long-poll checks this
    each time it wakes, before it claims: a waiter opened with a token since rotated or
    revoked must not claim with it, and one of an endpoint paused or resumed meanwhile claims
    by what is true now."""
    rows = yield Fetch(
        sql.ENDPOINT_STILL_VALID, {"id": endpoint.pk, "token_hash": endpoint.token_hash}
    )
    if not rows:
        raise Unauthorized("This endpoint's token was rotated or revoked while the call waited.")
    # Paused or resumed while it waited: the next claim goes by what is true now.
    endpoint.paused_at = rows[0][0]


def mark_waiting_plan(endpoint_id: int) -> Plan[None]:
    """A long-poll of this endpoint is about to wait: mark it (``waited_at``), so that a key
    freed from now on rings the doorbell (sql.MARK_WAITING says why this is enough). The
    long-poll looks once more after this commits, before it waits."""
    yield Fetch(sql.MARK_WAITING, {"endpoint_id": endpoint_id})


def live_in_team_plan(team_id: int, agent_id: str) -> Plan[Endpoint | None]:
    """A live endpoint of this team by its agent_id, or None (unknown and foreign alike)."""
    rows = yield Fetch(sql.LIVE_ENDPOINT_IN_TEAM, {"team_id": team_id, "agent_id": agent_id})
    return endpoint_from_row(rows[0]) if rows else None


def endpoint_from_row(row) -> Endpoint:
    return Endpoint.from_db(DEFAULT_DB_ALIAS, sql.ENDPOINT_FIELDS, row)
