"""Usage report: tokens, cost and savings per day and model."""

from __future__ import annotations

from rest_framework import serializers


class UsageQuerySerializer(serializers.Serializer):
    since = serializers.DateField(
        required=False, help_text="First day (UTC); default 29 days before until."
    )
    until = serializers.DateField(required=False, help_text="Last day (UTC); default today.")


class UsageNumbersSerializer(serializers.Serializer):
    turns = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField(help_text="Provider-reported, else estimated.")
    completion_tokens = serializers.IntegerField()
    cache_read_tokens = serializers.IntegerField()
    cache_write_tokens = serializers.IntegerField()
    hypothetical_tokens = serializers.IntegerField(
        help_text="Prompt tokens had every turn sent the whole history."
    )
    savings_tokens = serializers.IntegerField(
        help_text="hypothetical_tokens - prompt_tokens, or 0 when the prompts were not smaller."
    )
    cost_usd = serializers.DecimalField(
        max_digits=16, decimal_places=6, help_text="Billed: input, cache reads and writes, output."
    )
    full_history_cost_usd = serializers.DecimalField(
        max_digits=16,
        decimal_places=6,
        help_text="What the same turns would have cost sending the whole history every turn, "
        "with prompt caching (a breakpoint on the newest message).",
    )
    savings_usd = serializers.DecimalField(
        max_digits=16,
        decimal_places=6,
        help_text="What the turns cost less than the whole history with caching: "
        "full_history_cost_usd - cost_usd, or 0 when they cost more (never negative).",
    )
    extra_cost_usd = serializers.DecimalField(
        max_digits=16,
        decimal_places=6,
        help_text="What the turns cost more than the whole history with caching: "
        "cost_usd - full_history_cost_usd, or 0 when they cost less (never negative).",
    )
    cache_read_share = serializers.FloatField(
        help_text="Share of the prompt tokens read from the provider's cache (0-1)."
    )
    cache_simulated = serializers.BooleanField(
        help_text="Some turns were answered by the offline provider: their cache figures are "
        "its simulation of the priced model's prompt cache."
    )
    summary = serializers.CharField(
        help_text="The bill against the whole history with caching, in the words the chat's "
        "meter and the admin's usage page use."
    )


class UsageRowSerializer(UsageNumbersSerializer):
    day = serializers.DateField()
    model_profile = serializers.IntegerField(allow_null=True)
    model_name = serializers.CharField()
    model = serializers.CharField()


class SpendLimitSerializer(serializers.Serializer):
    spender = serializers.ChoiceField(
        choices=["tenant", "member", "api_key"],
        help_text="Whose limit: the tenant's, the caller's own, or the key's used.",
    )
    soft_usd = serializers.DecimalField(max_digits=12, decimal_places=2, allow_null=True)
    hard_usd = serializers.DecimalField(max_digits=12, decimal_places=2, allow_null=True)
    soft_tokens = serializers.IntegerField(allow_null=True)
    hard_tokens = serializers.IntegerField(allow_null=True)
    spent_usd = serializers.DecimalField(max_digits=14, decimal_places=6)
    spent_tokens = serializers.IntegerField()
    warned = serializers.BooleanField(help_text="A warning (or the limit) is reached.")
    exceeded = serializers.BooleanField(help_text="The limit is reached: messages are refused.")


class ThisMonthSerializer(serializers.Serializer):
    month = serializers.DateField(help_text="The first day of the month, in the tenant's zone.")
    spent_usd = serializers.DecimalField(
        max_digits=14, decimal_places=6, help_text="What the caller's turns were billed."
    )
    spent_tokens = serializers.IntegerField()
    limits = SpendLimitSerializer(many=True, help_text="The spending limits that apply.")


class UsageReportSerializer(serializers.Serializer):
    since = serializers.DateField()
    until = serializers.DateField()
    scope = serializers.ChoiceField(
        choices=["tenant", "user"],
        help_text="tenant: every turn of the tenant (admin callers); user: the caller's turns.",
    )
    rows = UsageRowSerializer(many=True)
    totals = UsageNumbersSerializer()
    this_month = ThisMonthSerializer(
        help_text="Used this month by the caller (their turns, from any key), against the "
        "spending limits of the tenant, the caller and the key used."
    )
