from django.apps import AppConfig


class SummariesConfig(AppConfig):
    name = "summaries"
    default_auto_field = "django.db.models.BigAutoField"
