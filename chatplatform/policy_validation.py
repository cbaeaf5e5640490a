"""Validation of a ContextPolicy against its model: errors that say what to change."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatplatform.models import ContextPolicy


def policy_errors(policy: ContextPolicy) -> dict[str, list[str]]:
    """Return field -> messages for every rule the policy breaks (empty dict: valid)."""
    errors: dict[str, list[str]] = {}

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    profile = policy.model_profile if policy.model_profile_id else None
    window = profile.context_window if profile else None
    context = policy.max_context_tokens or 0
    reserve = policy.reserved_response_tokens or 0

    if window is not None and context > window:
        add(
            "max_context_tokens",
            f"{context:,} tokens exceed the window of {profile} ({window:,} tokens): "
            f"set it to {window:,} or less.",
        )
    if profile is not None and reserve > profile.max_output_tokens:
        add(
            "reserved_response_tokens",
            f"{reserve:,} tokens exceed what {profile} can write ({profile.max_output_tokens:,}): "
            f"lower it to {profile.max_output_tokens:,} or less.",
        )
    if reserve >= context:
        add(
            "reserved_response_tokens",
            f"the reply reserve ({reserve:,}) leaves no room for the prompt within "
            f"{context:,} context tokens: lower the reserve or raise max context tokens.",
        )
    prompt_budget = context - reserve
    sections = {
        "system_budget": policy.system_budget or 0,
        "facts_budget": policy.facts_budget or 0,
        "summaries_budget": policy.summaries_budget or 0,
        "retrieval_budget": policy.retrieval_budget or 0,
    }
    total = sum(sections.values())
    if policy.budget_unit == "percent":
        for field, value in sections.items():
            if value > 100:
                add(field, f"{value}% is more than the whole prompt budget: use 0-100.")
        if total >= 100:
            add(
                "retrieval_budget",
                f"the section shares add up to {total}%, leaving nothing for the recent history: "
                f"lower them by at least {total - 99} points.",
            )
    elif prompt_budget > 0 and total >= prompt_budget:
        add(
            "system_budget",
            f"system + facts + summaries + retrieval budgets ({total:,} tokens) do not fit the "
            f"prompt budget ({prompt_budget:,} = {context:,} context - {reserve:,} reserved for "
            f"the reply) and leave nothing for the recent history: lower them by at least "
            f"{total - prompt_budget + 1:,} tokens, or raise max context tokens.",
        )
    if policy.min_recent_messages and policy.recent_message_cap:
        if policy.min_recent_messages > policy.recent_message_cap:
            add(
                "min_recent_messages",
                f"the minimum ({policy.min_recent_messages}) is above the cap of recent messages "
                f"({policy.recent_message_cap}): lower it or raise the cap.",
            )
    if policy.recent_summary_days and policy.long_summary_days:
        if policy.recent_summary_days >= policy.long_summary_days:
            add(
                "recent_summary_days", "the recent summary must cover fewer days than the long one."
            )
    return errors
