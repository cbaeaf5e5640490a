from django.apps import AppConfig


class ChatplatformConfig(AppConfig):
    name = "chatplatform"
    verbose_name = "Platform"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chatplatform.audit import security_events_connect

        security_events_connect()
