from django.apps import AppConfig


class ChatplatformConfig(AppConfig):
    name = "chatplatform"
    verbose_name = "Platform"
    default_auto_field = "django.db.models.BigAutoField"
