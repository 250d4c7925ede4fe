from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class QueuesConfig(AppConfig):
    default = True
    name = "switchboard.queues"
    label = "queues"
    verbose_name = "Queues"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_migrate, post_save

        from switchboard.queues import lookups, teams  # noqa: F401 (lookups registers title__ilike_contains)
        from switchboard.queues.operators import make_operators_group

        post_save.connect(
            teams.give_new_user_a_personal_team,
            sender=get_user_model(),
            dispatch_uid="queues.personal_team",
        )
        post_migrate.connect(
            make_operators_group, sender=self, dispatch_uid="queues.operators_group"
        )


class SwitchboardAdminConfig(admin_apps.AdminConfig):
    """Django admin, with the queue health page on its site (queues/admin_site.py)."""

    default = False  # named in INSTALLED_APPS in place of django.contrib.admin
    default_site = "switchboard.queues.admin_site.SwitchboardAdminSite"
