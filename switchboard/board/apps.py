from django.apps import AppConfig


class BoardConfig(AppConfig):
    name = "switchboard.board"
    label = "board"
    verbose_name = "Board"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_in

        from switchboard.board.auth import tell_of_failures_elsewhere

        user_logged_in.connect(tell_of_failures_elsewhere, dispatch_uid="board-failures-notice")
