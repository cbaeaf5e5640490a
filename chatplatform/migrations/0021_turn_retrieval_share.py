"""The per-turn retrieval share defaults to 7 % (was 5 %), measured in ``docs/cost.md``; the
default preset still holding the old default takes the new one (an operator's edit is kept).

Django keeps field defaults in Python, not in the table, so only the migration state changes
(no table rebuild on SQLite)."""

import django.core.validators
from django.db import migrations, models

OLD, NEW = 5, 7


def forwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ContextPolicy._base_manager.filter(tenant=None, turn_retrieval_percent=OLD).update(
        turn_retrieval_percent=NEW
    )


def backwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ContextPolicy._base_manager.filter(tenant=None, turn_retrieval_percent=NEW).update(
        turn_retrieval_percent=OLD
    )


class Migration(migrations.Migration):
    dependencies = [("chatplatform", "0020_standing_instructions")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="contextpolicy",
                    name="turn_retrieval_percent",
                    field=models.PositiveIntegerField(
                        default=NEW,
                        help_text="Hybrid: older messages found when the conversation's "
                        "messages start again stay in the cheap cached part of the prompt; on "
                        "the turns in between, new finds take at most this share of their "
                        "room, less what the prompt already shows of the best ones. They are "
                        "billed in full on every turn.",
                        validators=[
                            django.core.validators.MinValueValidator(0),
                            django.core.validators.MaxValueValidator(100),
                        ],
                    ),
                )
            ],
            database_operations=[],
        ),
        migrations.RunPython(forwards, backwards),
    ]
