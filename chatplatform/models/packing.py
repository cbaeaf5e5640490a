"""A stored context policy as the pure core sees it: the ``PackingPolicy`` that budgets and
packs a prompt. Used by the assembly of every turn and by the policy's own validation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatplatform.core.context.types import PackingPolicy

if TYPE_CHECKING:
    from chatplatform.models.policies import ContextPolicy


def packing_policy_for(
    policy: ContextPolicy,
    *,
    margin_ratio: float = 1.0,
    calibration_ratio: float = 1.0,
    budget_override: int | None = None,
    clamp_to_model: bool = False,
) -> PackingPolicy:
    """Map the stored policy onto the pure core's view of it (``margin_ratio``: the safety
    margin of inexact counts; ``calibration_ratio``: the model's online calibration).

    ``clamp_to_model`` (every turn): the context cap is bounded by the model's window and the
    reserved response by its output limit, so a policy that no longer fits its model (the
    provider reported a smaller window) still packs prompts that fit; validation maps the
    policy as stored, so the admin is told."""
    profile = policy.model_profile
    max_context = policy.max_context_tokens
    reserved = policy.reserved_response_tokens
    if clamp_to_model:
        max_context = min(max_context, profile.context_window)
        reserved = min(reserved, profile.max_output_tokens)
    scale = 1.0
    if budget_override is not None:
        prompt_budget = max(1, min(max_context, profile.context_window) - reserved)
        max_context = min(max_context, budget_override + reserved)
        # Section budgets in tokens shrink with the prompt budget, keeping their proportions.
        if policy.budget_unit == "tokens":
            scale = min(1.0, budget_override / prompt_budget)

    def section(tokens: int) -> int:
        return int(tokens * scale)

    return PackingPolicy(
        strategy=policy.strategy,  # type: ignore[arg-type]
        context_window=profile.context_window,
        max_context_tokens=max_context,
        reserved_response_tokens=reserved,
        safety_margin_ratio=margin_ratio,
        calibration_ratio=calibration_ratio,
        budget_unit=policy.budget_unit,  # type: ignore[arg-type]
        system_budget=section(policy.system_budget),
        instructions_budget=(
            section(policy.instructions_budget) if policy.instructions_enabled else 0
        ),
        facts_budget=section(policy.facts_budget) if policy.facts_enabled else 0,
        summaries_budget=section(policy.summaries_budget),
        retrieval_budget=section(policy.retrieval_budget),
        min_recent_messages=min(policy.min_recent_messages, policy.recent_message_cap),
        recent_message_cap=policy.recent_message_cap,
        max_summaries_in_context=policy.max_summaries_in_context,
        raw_history_limit=policy.raw_history_limit,
        max_facts=policy.max_facts_per_user if policy.facts_enabled else 0,
        max_instructions=(policy.max_instructions_per_user if policy.instructions_enabled else 0),
        retrieval_max_items=policy.retrieval_max_items,
        retrieval_neighbors=policy.retrieval_neighbors,
        reply_excerpt_tokens=policy.reply_excerpt_tokens,
        model_name=profile.name,
        history_trim_percent=policy.history_trim_percent,
        turn_retrieval_percent=policy.turn_retrieval_percent,
        cache_min_tokens=profile.cache_min_tokens if profile.provider_kind.provider_cache else 0,
        oversized_message=policy.oversized_message,  # type: ignore[arg-type]
    )
