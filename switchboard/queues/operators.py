"""The Operators group: what a ``switchboard adduser --staff`` user may see and do in admin.

Operators run the service; they do not read the work (docs/operators.md). The group holds
view permissions on every admin page of ``queues/admin/`` (which show counts, states and
metadata only), the endpoint revoke action's own permission, and the queue health page's.
It is made by a ``post_migrate`` handler rather than a migration (like Django's own
``create_permissions``), so every ``migrate`` makes it, or puts it back, idempotently: the
group's permissions are set to exactly this list, so a permission added to the group by hand
is taken away again at the next migrate. Give someone more through another group.
"""

from __future__ import annotations

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.contrib.contenttypes.management import create_contenttypes
from django.db import DEFAULT_DB_ALIAS, router

GROUP = "Operators"

# Custom permissions: (codename, name, the model whose content type carries it). Not in a
# model's Meta.permissions, which would need a migration of its own.
VIEW_QUEUE_HEALTH = "view_queue_health"
REVOKE_ENDPOINT = "revoke_endpoint"
PAUSE_ENDPOINT = "pause_endpoint"
CUSTOM_PERMISSIONS = (
    (VIEW_QUEUE_HEALTH, "Can view queue health", "todo"),
    (REVOKE_ENDPOINT, "Can revoke an endpoint", "endpoint"),
    (PAUSE_ENDPOINT, "Can pause or resume an endpoint", "endpoint"),
)

# (app label, codename): what the group holds.
PERMISSIONS = (
    ("queues", "view_team"),
    ("queues", "view_membership"),  # the read-only members inline of a team's page
    ("queues", "view_endpoint"),
    ("queues", "view_todo"),
    ("queues", "view_deadlettersink"),
    ("auth", "view_user"),
    ("queues", VIEW_QUEUE_HEALTH),
    ("queues", REVOKE_ENDPOINT),
    ("queues", PAUSE_ENDPOINT),
)


def make_operators_group(
    app_config,
    *,
    verbosity: int = 2,
    interactive: bool = True,
    using: str = DEFAULT_DB_ALIAS,
    apps=global_apps,
    **kwargs,
) -> None:
    """post_migrate (sender: the queues app): the custom permissions and the Operators
    group holding ``PERMISSIONS``, made or put back as they should be."""
    try:
        Group = apps.get_model("auth", "Group")
        apps.get_model("auth", "Permission")
        apps.get_model("contenttypes", "ContentType")
        apps.get_model("queues", "Todo")
    except LookupError:  # migrating to a state before these tables exist
        return
    if not router.allow_migrate_model(using, Group):
        return
    _, created = ensure_operators_group(using=using, apps=apps)
    if created and verbosity >= 2:
        print(f"Created the {GROUP} group.")


def ensure_operators_group(*, using: str = DEFAULT_DB_ALIAS, apps=global_apps):
    """The Operators group with exactly ``PERMISSIONS``, and whether it was new."""
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    ContentType = apps.get_model("contenttypes", "ContentType")

    # The default view permissions are made by auth's own post_migrate handler, which may run
    # after this one for auth's models; make them first (each step is idempotent).
    for label in ("auth", "queues"):
        config = global_apps.get_app_config(label)
        create_contenttypes(config, verbosity=0, interactive=False, using=using, apps=apps)
        create_permissions(config, verbosity=0, interactive=False, using=using, apps=apps)

    for codename, name, model in CUSTOM_PERMISSIONS:
        content_type, _ = ContentType.objects.using(using).get_or_create(
            app_label="queues", model=model
        )
        Permission.objects.using(using).update_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )

    permissions = [
        Permission.objects.using(using).get(content_type__app_label=app_label, codename=codename)
        for app_label, codename in PERMISSIONS
    ]
    group, created = Group.objects.using(using).get_or_create(name=GROUP)
    group.permissions.set(permissions)
    return group, created


def add_operator(user) -> None:
    """Make ``user`` staff and a member of the Operators group (made first if a database
    somehow lacks it, e.g. one migrated before this group existed and not since)."""
    from django.contrib.auth.models import Group

    group = Group.objects.filter(name=GROUP).first()
    if group is None:
        group, _ = ensure_operators_group()
    if not user.is_staff:
        user.is_staff = True
        user.save(update_fields=["is_staff"])
    user.groups.add(group)
