"""Context policies: how a tenant's prompts are assembled.

A tenant keeps several policies and picks its active one (``Tenant.active_policy``); policies
with no tenant are presets every tenant can use. Every setting of the context policy lives here.
Budgets are in tokens unless ``budget_unit`` is percent (share of what is left after the new
message and the response reserve).

The field defaults are the default preset's values (Hybrid, created by the data migrations):
a policy made without values, and the admin's form for a new one, start where a tenant with
no policy of its own already is.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q

from chatplatform.models.policy_validation import policy_errors
from chatplatform.tenancy.scoping import TenantScopedManager

DEFAULT_SYSTEM_PROMPT = (
    'You are {botname}, a helpful assistant in the chat "{chatname}" with {membercount} '
    "member(s). You are talking with {userfullname} ({username}). Today is {date}.\n"
    "Pronouns of the user: {user_pronouns}.\n"
    "Tools you can use: {tools}."
)


class Strategy(models.TextChoices):
    SLIDING_WINDOW = "sliding_window", "Sliding window (recent messages only)"
    ROLLING_SUMMARY = "rolling_summary", "Rolling summary (summaries + recent messages)"
    HYBRID = "hybrid", "Hybrid (summaries + retrieval + facts + recent messages)"
    SERVER_COMPACTION = (
        "server_compaction",
        "Server compaction (the provider summarises the conversation itself + recent messages)",
    )


class ContextEditing(models.TextChoices):
    OFF = "off", "Off"
    TOOL_USES = "tool_uses", "Clear old tool uses"
    THINKING = "thinking", "Clear old thinking"
    TOOL_USES_AND_THINKING = "tool_uses_and_thinking", "Clear old tool uses and thinking"


class BudgetUnit(models.TextChoices):
    TOKENS = "tokens", "Tokens"
    PERCENT = "percent", "Percent of the prompt budget"


def _positive(
    default: int, *, minimum: int = 0, maximum: int | None = None, help_text: str = ""
) -> Any:
    validators: list[Any] = [MinValueValidator(minimum)]
    if maximum is not None:
        validators.append(MaxValueValidator(maximum))
    return models.PositiveIntegerField(default=default, validators=validators, help_text=help_text)


class ContextPolicy(models.Model):
    tenant = models.ForeignKey(
        "chatplatform.Tenant",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: a preset every tenant can pick.",
    )
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    model_profile = models.ForeignKey(
        "chatplatform.ModelProfile", on_delete=models.PROTECT, related_name="+"
    )
    strategy = models.CharField(max_length=32, choices=Strategy.choices, default=Strategy.HYBRID)

    # The window and its reserves.
    max_context_tokens = models.PositiveIntegerField(
        default=32000,
        validators=[MinValueValidator(256)],
        help_text="Tokens the whole request may use (prompt + reply); at most the model's window.",
    )
    reserved_response_tokens = _positive(
        2048, minimum=16, help_text="Tokens kept free for the reply."
    )
    safety_margin_percent = models.FloatField(
        default=2.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(50.0)],
        help_text="Extra headroom on estimated counts, on top of the calibrated margin.",
    )

    # Per-section budgets. History takes whatever is left.
    budget_unit = models.CharField(
        max_length=8, choices=BudgetUnit.choices, default=BudgetUnit.TOKENS
    )
    system_budget = _positive(2000, help_text="System prompt budget.")
    facts_budget = _positive(1000, help_text="User facts budget.")
    summaries_budget = _positive(4000, help_text="Summaries budget (rolling, 7-day, 30-day).")
    retrieval_budget = _positive(6000, help_text="Budget for older messages found by search.")

    # History.
    min_recent_messages = _positive(
        20, maximum=500, help_text="Always keep the last N messages when they fit."
    )
    recent_message_cap = _positive(
        100, minimum=1, maximum=500, help_text="At most this many recent messages verbatim."
    )
    raw_history_limit = _positive(
        20, minimum=1, maximum=500, help_text="Messages kept raw after the last summary."
    )

    history_trim_percent = _positive(
        60,
        minimum=10,
        maximum=100,
        help_text=(
            "When the history no longer fits, or after a pause longer than the prompt "
            "cache's lifetime, it restarts at this share of its room; later turns only "
            "append to it, so the provider reads the history from its prompt cache. "
            "100 fills the room every turn (nothing cached: each trim rewrites the prompt)."
        ),
    )

    # Prompt caching.
    cache_ttl = models.CharField(
        "prompt cache lifetime",
        max_length=2,
        choices=[("5m", "5 minutes (writes cost 1.25x input)"), ("1h", "1 hour (writes cost 2x)")],
        default="5m",
        help_text=(
            "How long the provider keeps the prompt's cached prefix. Reads cost 0.1x input "
            "either way; one hour pays off when people pause for more than five minutes."
        ),
    )

    # Rolling summaries.
    summary_interval = _positive(
        20, minimum=2, maximum=1000, help_text="Summarise when this many messages are unsummarised."
    )
    summary_trigger_percent = _positive(
        80, minimum=10, maximum=100, help_text="Also summarise when history fills this share."
    )
    max_summaries_in_context = _positive(3, minimum=1, maximum=20)
    summary_max_tokens = _positive(512, minimum=64, maximum=8192)

    # Periodic summaries.
    periodic_summaries_enabled = models.BooleanField(default=True)
    recent_summary_days = _positive(7, minimum=1, maximum=365)
    recent_summary_interval_days = _positive(3, minimum=1, maximum=365)
    recent_summary_tokens = _positive(1024, minimum=64, maximum=16384)
    long_summary_days = _positive(30, minimum=1, maximum=3650)
    long_summary_interval_days = _positive(14, minimum=1, maximum=365)
    long_summary_tokens = _positive(4096, minimum=64, maximum=32768)

    # User facts.
    facts_enabled = models.BooleanField(default=True)
    max_facts_per_user = _positive(50, minimum=10, maximum=100)
    max_fact_chars = _positive(500, minimum=20, maximum=2000)

    # Retrieval (hybrid).
    retrieval_max_items = _positive(200, minimum=0, maximum=500)
    retrieval_neighbors = _positive(0, minimum=0, maximum=5)
    turn_retrieval_percent = _positive(
        5,
        minimum=0,
        maximum=100,
        help_text=(
            "Hybrid: the older messages found when the history restarts stay in the cached "
            "prompt until it restarts again; on the turns in between, what a turn finds "
            "besides them takes at most this share of the retrieval budget. It is sent after "
            "the new message and paid in full each turn."
        ),
    )
    retrieval_dense = models.BooleanField(
        "retrieval by meaning",
        default=False,
        help_text="Hybrid: also find older messages by meaning (sentence embeddings, "
        "all-MiniLM-L6-v2 on the CPU), fused with full-text search. Needs the embeddings "
        "requirements (requirements/embeddings.txt) on the web and worker processes; without "
        "them retrieval stays full-text only. Messages are embedded in the background; "
        "each turn embeds the new message (~10 ms).",
    )

    # Prompt.
    system_prompt_template = models.TextField(default=DEFAULT_SYSTEM_PROMPT)
    bot_name = models.CharField(max_length=100, default="Assistant")
    tools_enabled = models.BooleanField(default=True)
    context_editing = models.CharField(
        "provider context editing",
        max_length=32,
        choices=ContextEditing.choices,
        default=ContextEditing.OFF,
        help_text=(
            "For tool-heavy conversations: let the provider clear old tool calls and results "
            "(and old thinking) from the prompt once it passes 80% of the prompt budget, "
            "keeping the newest three. Only for models whose capabilities report the edit; "
            "what was cleared is recorded with each turn."
        ),
    )

    # Input limits.
    max_message_chars = _positive(64 * 1024, minimum=1, maximum=1024 * 1024)
    user_messages_per_minute = _positive(30, minimum=1, maximum=10000)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantScopedManager(include_shared=True)

    class Meta:
        verbose_name_plural = "context policies"
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="policy_unique_name"),
            models.UniqueConstraint(
                fields=["name"], condition=Q(tenant__isnull=True), name="policy_unique_preset"
            ),
            models.CheckConstraint(
                condition=Q(reserved_response_tokens__lt=F("max_context_tokens")),
                name="policy_reserve_below_context",
            ),
            models.CheckConstraint(
                condition=Q(budget_unit="percent", system_budget__lte=100)
                | Q(budget_unit="tokens"),
                name="policy_percent_budgets_sane",
            ),
            models.CheckConstraint(
                condition=Q(budget_unit="percent")
                | Q(
                    budget_unit="tokens",
                    max_context_tokens__gt=F("reserved_response_tokens")
                    + F("system_budget")
                    + F("facts_budget")
                    + F("summaries_budget")
                    + F("retrieval_budget"),
                ),
                name="policy_token_budgets_fit",
            ),
            models.CheckConstraint(
                condition=Q(budget_unit="tokens")
                | Q(
                    budget_unit="percent",
                    system_budget__lte=100
                    - F("facts_budget")
                    - F("summaries_budget")
                    - F("retrieval_budget"),
                ),
                name="policy_percent_budgets_fit",
            ),
        ]

    def __str__(self) -> str:
        owner = "preset" if self.tenant_id is None else f"tenant {self.tenant_id}"
        return f"{self.name} ({owner})"

    @property
    def is_preset(self) -> bool:
        return self.tenant_id is None

    def clean(self) -> None:
        errors = policy_errors(self)
        if errors:
            raise ValidationError(errors)
