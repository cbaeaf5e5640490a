from django.apps import AppConfig


class ToolingConfig(AppConfig):
    name = "tooling"
    default_auto_field = "django.db.models.BigAutoField"
