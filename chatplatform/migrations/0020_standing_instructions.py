"""Standing instructions and preferences: their policy settings and their own budget.

Existing policies get the new budget only where it fits beside the others (tokens); a policy
in percent, or one with no room, starts with 0 and its admin decides."""

import django.core.validators
import django.db.models.expressions
from django.db import migrations, models


NEW_BUDGET = 1500


def give_room(apps, schema_editor):
    ContextPolicy = apps.get_model("chatplatform", "ContextPolicy")
    for policy in ContextPolicy.objects.filter(budget_unit="tokens"):
        taken = (
            policy.reserved_response_tokens
            + policy.system_budget
            + policy.facts_budget
            + policy.summaries_budget
            + policy.retrieval_budget
        )
        if policy.max_context_tokens > taken + NEW_BUDGET:
            ContextPolicy.objects.filter(pk=policy.pk).update(instructions_budget=NEW_BUDGET)


class Migration(migrations.Migration):

    dependencies = [
        ('chatplatform', '0019_history_trim_help'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='contextpolicy',
            name='policy_token_budgets_fit',
        ),
        migrations.RemoveConstraint(
            model_name='contextpolicy',
            name='policy_percent_budgets_fit',
        ),
        migrations.AddField(
            model_name='contextpolicy',
            name='instructions_budget',
            field=models.PositiveIntegerField(default=0, help_text='Most room for the standing instructions and preferences the user gave, in their own words.', validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddField(
            model_name='contextpolicy',
            name='instructions_enabled',
            field=models.BooleanField(default=True, help_text='Notice when users say how they want to be answered or what they prefer ("always...", "from now on...", "I prefer...") and send it, in their own words, with every prompt of theirs until they replace it.', verbose_name='standing instructions'),
        ),
        migrations.AddField(
            model_name='contextpolicy',
            name='max_instructions_per_user',
            field=models.PositiveIntegerField(default=30, help_text='Most standing instructions and preferences kept per user; one more retires the oldest (it stays in its history).', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100)]),
        ),
        migrations.RunPython(give_room, migrations.RunPython.noop),
        migrations.AlterField(
            model_name='contextpolicy',
            name='instructions_budget',
            field=models.PositiveIntegerField(default=1500, help_text='Most room for the standing instructions and preferences the user gave, in their own words.', validators=[django.core.validators.MinValueValidator(0)]),
        ),
        migrations.AddConstraint(
            model_name='contextpolicy',
            constraint=models.CheckConstraint(condition=models.Q(('budget_unit', 'percent'), models.Q(('budget_unit', 'tokens'), ('max_context_tokens__gt', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('reserved_response_tokens'), '+', models.F('system_budget')), '+', models.F('instructions_budget')), '+', models.F('facts_budget')), '+', models.F('summaries_budget')), '+', models.F('retrieval_budget')))), _connector='OR'), name='policy_token_budgets_fit'),
        ),
        migrations.AddConstraint(
            model_name='contextpolicy',
            constraint=models.CheckConstraint(condition=models.Q(('budget_unit', 'tokens'), models.Q(('budget_unit', 'percent'), ('system_budget__lte', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.Value(100), '-', models.F('instructions_budget')), '-', models.F('facts_budget')), '-', models.F('summaries_budget')), '-', models.F('retrieval_budget')))), _connector='OR'), name='policy_percent_budgets_fit'),
        ),
    ]
