"""One set of defaults: the policy's field defaults become the default preset's values, and the
presets' system prompt becomes the current default one.

The presets were created with budgets of their own (32,000-token window; 2,000 / 1,000 / 4,000
/ 6,000 for the system prompt, facts, summaries and retrieval) while the fields defaulted to
others, so a new policy started elsewhere than the preset a tenant already used. The presets
also kept the first default prompt, whose per-turn time ("Now: {timestamp}") the current one
replaced by the date. Only a preset still holding that first text is changed: an operator's
edit is kept.
"""

import django.core.validators
from django.db import migrations, models

OLD_PROMPT = (
    'You are {botname}, a helpful assistant in the chat "{chatname}" with {membercount} '
    "member(s). You are talking with {userfullname} ({username}). Now: {timestamp}.\n"
    "Pronouns of the user: {user_pronouns}.\n"
    "Tools you can use: {tools}."
)
NEW_PROMPT = (
    'You are {botname}, a helpful assistant in the chat "{chatname}" with {membercount} '
    "member(s). You are talking with {userfullname} ({username}). Today is {date}.\n"
    "Pronouns of the user: {user_pronouns}.\n"
    "Tools you can use: {tools}."
)


def forwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ContextPolicy._base_manager.filter(tenant=None, system_prompt_template=OLD_PROMPT).update(
        system_prompt_template=NEW_PROMPT
    )


def backwards(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    ContextPolicy._base_manager.filter(tenant=None, system_prompt_template=NEW_PROMPT).update(
        system_prompt_template=OLD_PROMPT
    )


def _budget(default, help_text):
    return models.PositiveIntegerField(
        default=default,
        help_text=help_text,
        validators=[django.core.validators.MinValueValidator(0)],
    )


class Migration(migrations.Migration):
    dependencies = [("chatplatform", "0008_preset_descriptions")]
    operations = [
        migrations.AlterField(
            model_name="contextpolicy",
            name="max_context_tokens",
            field=models.PositiveIntegerField(
                default=32000,
                help_text="Tokens the whole request may use (prompt + reply); at most the "
                "model's window.",
                validators=[django.core.validators.MinValueValidator(256)],
            ),
        ),
        migrations.AlterField(
            model_name="contextpolicy",
            name="system_budget",
            field=_budget(2000, "System prompt budget."),
        ),
        migrations.AlterField(
            model_name="contextpolicy",
            name="summaries_budget",
            field=_budget(4000, "Summaries budget (rolling, 7-day, 30-day)."),
        ),
        migrations.AlterField(
            model_name="contextpolicy",
            name="retrieval_budget",
            field=_budget(6000, "Budget for older messages found by search."),
        ),
        migrations.RunPython(forwards, backwards),
    ]
