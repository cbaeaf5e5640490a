"""Validation of a ContextPolicy against its model: errors that say what to change.

The budget arithmetic is the pure core's (``chatplatform.core.context.budget.policy_issues``),
so the admin rejects exactly the policies the assembly would refuse; the checks that need
the model profile or the periodic-summary settings live here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS

from chatplatform.core.context.budget import policy_issues
from chatplatform.core.context.strategies import (
    STRATEGIES,
    ContextStrategy,
    UnknownStrategy,
    strategy_for,
)
from chatplatform.core.llm.capabilities import COMPACTION
from chatplatform.core.llm.context_management import (
    EDITING_CHOICES,
    MIN_COMPACTION_TRIGGER,
    min_budget_for_compaction,
)
from chatplatform.models.packing import packing_policy_for

if TYPE_CHECKING:
    from chatplatform.models import ContextPolicy

#: Pure-core field names that differ from the model's.
FIELD_NAMES = {
    "safety_margin_ratio": "safety_margin_percent",
    "max_facts": "max_facts_per_user",
    "context_window": "model_profile",
    None: NON_FIELD_ERRORS,
}


def policy_errors(policy: ContextPolicy) -> dict[str, list[str]]:
    """Return field -> messages for every rule the policy breaks (empty dict: valid)."""
    errors: dict[str, list[str]] = {}

    def add(field: str | None, message: str) -> None:
        name = FIELD_NAMES.get(field, field) or NON_FIELD_ERRORS
        errors.setdefault(name, []).append(message[:1].upper() + message[1:])

    ceiling = settings.CHAT_MAX_MESSAGE_CHARS
    if policy.max_message_chars > ceiling:
        add(
            "max_message_chars",
            f"this server accepts at most {ceiling:,} characters per message "
            f"(CHAT_MAX_MESSAGE_CHARS): lower it to {ceiling:,} or less",
        )
    if not policy.model_profile_id:
        add("model_profile", "choose the model this policy assembles prompts for")
        return errors
    profile = policy.model_profile
    if policy.reserved_response_tokens > profile.max_output_tokens:
        add(
            "reserved_response_tokens",
            f"{policy.reserved_response_tokens:,} tokens exceed what {profile} can write "
            f"({profile.max_output_tokens:,}): lower it to {profile.max_output_tokens:,} or less",
        )
    if policy.recent_summary_days >= policy.long_summary_days:
        add(
            "recent_summary_days",
            f"the recent summary ({policy.recent_summary_days} days) must cover fewer days than "
            f"the long one ({policy.long_summary_days} days)",
        )
    try:
        strategy: ContextStrategy | None = strategy_for(policy.strategy)
    except UnknownStrategy:
        strategy = None  # the core's checks below say so
    if policy.retrieval_dense and strategy and not strategy.needs.retrieval_by_meaning:
        offering = [s.title for s in STRATEGIES if s.needs.retrieval_by_meaning]
        add(
            "retrieval_dense",
            f"retrieval by meaning only works with the {' or '.join(offering).lower()} "
            f"strategy: choose {' or '.join(offering)} or turn it off",
        )
    for field, message in _provider_context_errors(policy, strategy):
        add(field, message)
    packing = replace(
        packing_policy_for(policy),
        min_recent_messages=policy.min_recent_messages,
        safety_margin_ratio=1.0 + policy.safety_margin_percent / 100.0,
    )
    for issue in policy_issues(packing, exact=False):
        add(issue.field, issue.message)
    return errors


def _provider_context_errors(
    policy: ContextPolicy, strategy: ContextStrategy | None
) -> list[tuple[str, str]]:
    """The provider's own context management: only where the model reports it supports it."""
    profile = policy.model_profile
    capabilities = profile.capabilities or {}
    kind = profile.provider_kind
    out: list[tuple[str, str]] = []
    if strategy is not None and strategy.needs.provider_compaction:
        budget = min(policy.max_context_tokens, profile.context_window)
        budget -= policy.reserved_response_tokens
        if not kind.supports_context_strategy(capabilities, COMPACTION):
            out.append(
                (
                    "strategy",
                    f"{profile} does not report server-side compaction ({COMPACTION}) among its "
                    "capabilities: choose another strategy or a model that supports it",
                )
            )
        elif budget < min_budget_for_compaction():
            out.append(
                (
                    "max_context_tokens",
                    f"server compaction triggers at 80% of the prompt budget and the provider "
                    f"accepts no trigger below {MIN_COMPACTION_TRIGGER:,} tokens: the prompt "
                    f"budget ({budget:,}) must be at least {min_budget_for_compaction():,}",
                )
            )
    missing = [
        edit
        for edit in EDITING_CHOICES.get(policy.context_editing, ())
        if not kind.supports_context_strategy(capabilities, edit)
    ]
    if missing:
        out.append(
            (
                "context_editing",
                f"{profile} does not report {', '.join(missing)} among its capabilities: "
                "turn provider context editing off or choose a model that supports it",
            )
        )
    return out
