from django.apps import AppConfig


class ChatsConfig(AppConfig):
    name = "chats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Ending the sockets whose credentials ended: receivers of key, membership, user and
        # log-out signals.
        # Keeping the standing instructions a new summary quotes: a receiver of its save.
        from chats import (
            socket_access,  # noqa: F401
            summary_instructions,  # noqa: F401
        )
