from django.apps import AppConfig


class QueuesConfig(AppConfig):
    name = "queues"
    verbose_name = "Queues"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_migrate, post_save

        from queues import lookups, teams  # noqa: F401 (lookups registers title__ilike_contains)
        from queues.operators import make_operators_group

        post_save.connect(
            teams.give_new_user_a_personal_team,
            sender=get_user_model(),
            dispatch_uid="queues.personal_team",
        )
        post_migrate.connect(
            make_operators_group, sender=self, dispatch_uid="queues.operators_group"
        )
