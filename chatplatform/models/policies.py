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

from chatplatform.core.context.budget import MAX_REPLY_EXCERPT_TOKENS
from chatplatform.core.context.strategies import strategy_choices
from chatplatform.core.context.types import DEFAULT_REPLY_EXCERPT_TOKENS, DEFAULT_STRATEGY
from chatplatform.models.policy_validation import policy_errors
from chatplatform.tenancy.scoping import TenantScopedManager

DEFAULT_SYSTEM_PROMPT = (
    'You are {botname}, a helpful assistant in the chat "{chatname}" with {membercount} '
    "member(s). You are talking with {userfullname} ({username}). Today is {date}.\n"
    "Pronouns of the user: {user_pronouns}.\n"
    "Tools you can use: {tools}."
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
        help_text="Leave empty to make this a preset that every tenant can choose.",
    )
    name = models.CharField(max_length=100, help_text="The name admins pick the policy by.")
    description = models.TextField(
        blank=True, help_text="What this policy is for, shown next to its name."
    )
    model_profile = models.ForeignKey(
        "chatplatform.ModelProfile",
        on_delete=models.PROTECT,
        related_name="+",
        help_text="The model that writes the replies. Its context window limits the sizes "
        "below, and its prices decide what each turn costs.",
    )
    strategy = models.CharField(
        max_length=32,
        choices=strategy_choices(),
        default=DEFAULT_STRATEGY,
        help_text="How a long conversation reaches the model: only the latest messages "
        "(cheapest), plus summaries of older ones, or also older messages that match the new "
        "one and the facts saved about the user.",
    )

    # The window and its reserves.
    max_context_tokens = models.PositiveIntegerField(
        default=32000,
        validators=[MinValueValidator(256)],
        help_text="The most tokens one turn may use, prompt and reply together (at most the "
        "model's window). More lets the model remember more, and costs more per turn.",
    )
    reserved_response_tokens = _positive(
        2048,
        minimum=16,
        help_text="Room kept free for the reply: the longest answer the model may write. Only "
        "what it writes is billed.",
    )
    safety_margin_percent = models.FloatField(
        default=2.0,
        validators=[MinValueValidator(0.0), MaxValueValidator(50.0)],
        help_text="Extra room left when token counts are estimates, so a prompt never overflows "
        "the model's window. Higher is safer and leaves less room for the conversation.",
    )

    # Per-section budgets. History takes whatever is left.
    budget_unit = models.CharField(
        max_length=8,
        choices=BudgetUnit.choices,
        default=BudgetUnit.TOKENS,
        help_text="Whether the four sizes below are tokens or percentages of the room left "
        "after the new message and the reply.",
    )
    system_budget = _positive(
        2000, help_text="Most room for the instructions at the top of every prompt."
    )
    instructions_budget = _positive(
        1500,
        help_text="Most room for the standing instructions and preferences the user gave, in "
        "their own words. When they do not all fit, a message may also bring the few it "
        "concerns most, in up to a third more room.",
    )
    facts_budget = _positive(
        1000, help_text="Most room for the facts saved about the user (their memories)."
    )
    summaries_budget = _positive(
        4000,
        help_text="Most room for summaries of older messages and of the last 7 and 30 days.",
    )
    retrieval_budget = _positive(
        6000, help_text="Most room for older messages that match the new one (hybrid)."
    )

    # History.
    min_recent_messages = _positive(
        20,
        maximum=500,
        help_text="This many latest messages are always sent word for word when they fit.",
    )
    oversized_message = models.CharField(
        "a message longer than the prompt allows",
        max_length=8,
        choices=[
            ("cut", "Cut it, keeping its beginning and end (the turn stays within the limit)"),
            ("whole", "Send it whole when the model's window holds it (that turn costs more)"),
        ],
        default="cut",
        help_text="What happens to a new message that does not fit what the other parts of "
        "the prompt leave: cut in the middle with a visible marker, or sent whole by letting "
        "that one turn grow past max context tokens, up to the model's window. The chat page "
        "tells the writer which before they send.",
    )
    recent_message_cap = _positive(
        100,
        minimum=1,
        maximum=500,
        help_text="At most this many latest messages are sent word for word; older ones "
        "reach the model through summaries and search only. Fewer keeps turns cheaper.",
    )
    raw_history_limit = _positive(
        20,
        minimum=1,
        maximum=500,
        help_text="Rolling summary: this many newest messages stay word for word; older ones "
        "are summarised.",
    )

    history_trim_percent = _positive(
        60,
        minimum=10,
        maximum=100,
        help_text=(
            "When the conversation no longer fits, or after a long pause, the messages sent "
            "start again filled to this share of their room; the next turns only add to "
            "them, so the provider re-reads them at the cheap cached price. After a pause "
            "(nothing cached), hybrid gives the rest of the room to older messages that match "
            "the new one. 100 fills the room every turn: more context, but no cache savings."
        ),
    )

    # Prompt caching.
    cache_ttl = models.CharField(
        "prompt cache lifetime",
        max_length=2,
        choices=[("5m", "5 minutes (writes cost 1.25x input)"), ("1h", "1 hour (writes cost 2x)")],
        default="5m",
        help_text=(
            "How long the provider keeps the unchanged start of the prompt for cheap "
            "re-reading (a tenth of the input price either way). One hour costs more to "
            "write and pays off when people pause for more than five minutes."
        ),
    )

    # Rolling summaries.
    summary_interval = _positive(
        20,
        minimum=2,
        maximum=1000,
        help_text="Summarise older messages once this many wait for a summary. Lower keeps "
        "summaries fresher and runs the summarizer (and its cost) more often.",
    )
    summary_trigger_percent = _positive(
        80,
        minimum=10,
        maximum=100,
        help_text="Also summarise once the messages fill this share of their room.",
    )
    max_summaries_in_context = _positive(
        3,
        minimum=1,
        maximum=20,
        help_text="At most this many summaries of older messages go into a prompt; beyond "
        "that the oldest are merged into one.",
    )
    summary_session_gap_minutes = _positive(
        180,
        minimum=1,
        maximum=43200,
        help_text="A pause longer than this many minutes ends a session of the "
        "conversation: a summary never spans one, so each covers part of a single session, "
        "and merged summaries take whole sessions where they can. Shorter splits summaries "
        "at shorter breaks.",
    )
    summary_max_tokens = _positive(
        512,
        minimum=64,
        maximum=8192,
        help_text="Longest summary of older messages, in tokens: more keeps more detail and "
        "takes more room in every prompt.",
    )

    # Periodic summaries.
    periodic_summaries_enabled = models.BooleanField(
        default=True,
        help_text="Keep a summary of the last days and one of the last weeks of each active "
        "conversation, so the model recalls what happened earlier. Each rebuild is a "
        "summarizer call.",
    )
    recent_summary_days = _positive(
        7, minimum=1, maximum=365, help_text="Days the recent summary covers."
    )
    recent_summary_interval_days = _positive(
        3, minimum=1, maximum=365, help_text="Rebuild the recent summary every this many days."
    )
    recent_summary_tokens = _positive(
        1024, minimum=64, maximum=16384, help_text="Longest recent summary, in tokens."
    )
    long_summary_days = _positive(
        30, minimum=1, maximum=3650, help_text="Days the long summary covers."
    )
    long_summary_interval_days = _positive(
        14, minimum=1, maximum=365, help_text="Rebuild the long summary every this many days."
    )
    long_summary_tokens = _positive(
        4096, minimum=64, maximum=32768, help_text="Longest long summary, in tokens."
    )

    # User facts.
    facts_enabled = models.BooleanField(
        default=True,
        help_text="Send the facts saved about the user (their memories) with every prompt.",
    )
    max_facts_per_user = _positive(
        50,
        minimum=10,
        maximum=100,
        help_text="Most facts kept per user; saving one more retires the oldest (it stays in "
        "the fact's history).",
    )
    max_fact_chars = _positive(
        500, minimum=20, maximum=2000, help_text="Longest fact, in characters."
    )

    # Standing instructions and preferences.
    instructions_enabled = models.BooleanField(
        "standing instructions",
        default=True,
        help_text="Notice when users say how they want to be answered or what they prefer "
        '("always...", "from now on...", "I prefer...") and send it, in their own '
        "words, with every prompt of theirs until they replace it.",
    )
    max_instructions_per_user = _positive(
        100,
        minimum=1,
        maximum=300,
        help_text="Most standing instructions and preferences kept per user; one more "
        "retires the oldest (it stays in its history).",
    )

    # Retrieval (hybrid).
    retrieval_max_items = _positive(
        200,
        minimum=0,
        maximum=500,
        help_text="Hybrid: the most older messages one search may bring into a prompt.",
    )
    retrieval_neighbors = _positive(
        0,
        minimum=0,
        maximum=5,
        help_text="Hybrid: also send this many messages before and after each one found, "
        "for context.",
    )
    reply_excerpt_tokens = _positive(
        DEFAULT_REPLY_EXCERPT_TOKENS,
        minimum=0,
        maximum=MAX_REPLY_EXCERPT_TOKENS,
        help_text="Hybrid: an assistant reply recalled only because the message it answers "
        "was found goes as its first this many tokens, so the room holds more of the "
        "conversation; a reply found by its own words goes whole. 0: replies always go whole.",
    )
    turn_retrieval_percent = _positive(
        7,
        minimum=0,
        maximum=100,
        help_text=(
            "Hybrid: older messages found when the conversation's messages start again stay "
            "in the cheap cached part of the prompt; on the turns in between, new finds take "
            "at most this share of their room, less what the prompt already shows of the "
            "best ones. They are billed in full on every turn."
        ),
    )
    retrieval_dense = models.BooleanField(
        "retrieval by meaning",
        default=False,
        help_text="Hybrid: also find older messages by what they mean, not only by their "
        "words. Needs the optional embeddings package on the servers "
        "(requirements/embeddings.txt); without it, search matches words only. Adds about "
        "10 ms to each turn.",
    )

    # Prompt.
    system_prompt_template = models.TextField(
        default=DEFAULT_SYSTEM_PROMPT,
        help_text="The instructions at the top of every prompt. Names in braces, such as "
        "{username} or {date}, are filled in on each turn.",
    )
    bot_name = models.CharField(
        max_length=100,
        default="Assistant",
        help_text="The assistant's name: {botname} in the instructions.",
    )
    tools_enabled = models.BooleanField(
        default=True,
        help_text="Let the model save and update facts about the user by itself (models "
        "that can use tools).",
    )
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
    max_message_chars = _positive(
        64 * 1024,
        minimum=1,
        maximum=1024 * 1024,
        help_text="Longest message a user may send, in characters; longer ones are refused "
        "with an explanation.",
    )
    user_messages_per_minute = _positive(
        30,
        minimum=1,
        maximum=10000,
        help_text="Messages one user may send per minute; more are refused until the minute "
        "passes.",
    )

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
                    + F("instructions_budget")
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
                    - F("instructions_budget")
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
