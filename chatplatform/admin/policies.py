"""The ContextPolicy editor: grouped fields with help, and errors that say what to change."""

from __future__ import annotations

from typing import Any

from django.contrib import admin

from chatplatform.admin.base import TenantScopedAdmin
from chatplatform.models import ContextPolicy

POLICY_FIELDSETS: Any = (
    (None, {"fields": ("tenant", "name", "description", "model_profile", "strategy")}),
    (
        "Window",
        {
            "description": "The whole request (prompt + reply) must fit the model's window. "
            "The prompt budget is max context tokens minus the reply reserve.",
            "fields": ("max_context_tokens", "reserved_response_tokens", "safety_margin_percent"),
        },
    ),
    (
        "Section budgets",
        {
            "description": "Sections fill in priority order: system prompt, user facts, "
            "summaries, retrieved older messages; whatever they leave flows to the recent history.",
            "fields": (
                "budget_unit",
                "system_budget",
                "facts_budget",
                "summaries_budget",
                "retrieval_budget",
            ),
        },
    ),
    (
        "Recent history",
        {"fields": ("min_recent_messages", "recent_message_cap", "raw_history_limit")},
    ),
    (
        "Rolling summaries",
        {
            "fields": (
                "summary_interval",
                "summary_trigger_percent",
                "max_summaries_in_context",
                "summary_max_tokens",
            )
        },
    ),
    (
        "Periodic summaries",
        {
            "fields": (
                "periodic_summaries_enabled",
                "recent_summary_days",
                "recent_summary_interval_days",
                "recent_summary_tokens",
                "long_summary_days",
                "long_summary_interval_days",
                "long_summary_tokens",
            )
        },
    ),
    ("User facts", {"fields": ("facts_enabled", "max_facts_per_user", "max_fact_chars")}),
    ("Retrieval", {"fields": ("retrieval_max_items", "retrieval_neighbors")}),
    (
        "Prompt",
        {
            "description": "Variables: {chatname} {chatid} {chattype} {username} {userfullname} "
            "{userid} {timestamp} {date} {time} {botname} {botusername} {membercount} {tools} "
            "{user_memories} {user_pronouns}. Unknown braces are left as they are.",
            "fields": ("system_prompt_template", "bot_name", "tools_enabled"),
        },
    ),
    ("Input limits", {"fields": ("max_message_chars", "user_messages_per_minute")}),
)


@admin.register(ContextPolicy)
class ContextPolicyAdmin(TenantScopedAdmin):
    list_display = (
        "name",
        "tenant",
        "model_profile",
        "strategy",
        "max_context_tokens",
        "reserved_response_tokens",
    )
    list_filter = ("strategy",)
    search_fields = ("name",)
    fieldsets = POLICY_FIELDSETS
    save_as = True
