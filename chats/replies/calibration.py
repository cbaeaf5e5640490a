"""How the turn's token estimate meets the provider's counts: an exact count when the
estimate comes near the budget, and the model's running ratio of reported to estimated
prompt tokens, which the assembly applies to its budget (``chats.assembly.service``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chatplatform.core.tokens import calibration
from chatplatform.core.tokens.anthropic_counter import AnthropicCounter
from chatplatform.model_endpoints import provider_access
from chatplatform.models import ModelProfile
from chatplatform.tenancy.scoping import all_tenants
from chats.assembly.service import TurnContext

#: The estimate is checked with the provider's count when it is within this share of the budget.
NEAR_BUDGET_SHARE = 0.10
_exact_counters: dict[str, Any] = {}


def exact_prompt_tokens_near_budget(turn: TurnContext) -> int | None:
    """Estimate first; only when the estimated prompt is within
    ``NEAR_BUDGET_SHARE`` of the budget, ask Anthropic's ``count_tokens`` (cached, with a
    timeout, falling back to the estimate when unreachable). Returns the exact prompt tokens,
    or None when no exact count was needed or possible. Feeds the model's calibration."""
    profile = turn.profile
    # The exact count needs a provider whose API counts tokens, and a profile counted by it.
    if not profile.provider_kind.counts_tokens or profile.tokenizer != "anthropic":
        return None
    access = provider_access(profile)
    # Only the operator's endpoint counts tokens: a tenant's own endpoint gets nothing more
    # than its replies (and the count would need the call-time endpoint check too).
    if access is None or access.own_endpoint or not access.api_key or turn.counter.exact:
        return None
    prompt = turn.prompt
    if prompt.prompt_tokens * prompt.margin_ratio < prompt.budget * (1 - NEAR_BUDGET_SHARE):
        return None
    cache_key = f"{profile.model}\x00{access.base_url or ''}"
    counter = _exact_counters.get(cache_key)
    if counter is None:
        counter = AnthropicCounter(
            profile.model,
            fallback=turn.counter,
            api_key=access.api_key,
            base_url=access.base_url,
            timeout=settings.TOKEN_COUNT_TIMEOUT_SECONDS,
        )
        _exact_counters[cache_key] = counter
    shown = {i.id for i in prompt.included if i.kind == "summary"}
    # The provider's compaction block is sent beside the rendered text (server compaction).
    blocks = [s.text for s in turn.summaries if s.kind == "compaction" and s.id in shown]
    text = "\n\n".join([prompt.system, *blocks, *(m["content"] for m in prompt.messages)])
    tokens = counter.count(text) + counter.message_overhead * len(prompt.messages)
    if counter.last_source == "fallback":
        return None
    calibration_record(profile.pk, prompt.prompt_tokens, tokens)
    return int(tokens)


def calibration_record(profile_id: int, estimated: int, actual: int) -> None:
    """Add one (estimated, provider-reported) prompt-token pair to the model's running
    ratio (Welford mean and M2), under a row lock."""
    if estimated <= 0 or actual <= 0:
        return
    # Profiles are shared reference data; the caller resolved this one within its tenant.
    with all_tenants(), transaction.atomic():
        profile = ModelProfile.objects.select_for_update().get(pk=profile_id)
        state = calibration.update(
            calibration.CalibrationState(
                count=profile.calibration_samples,
                mean=profile.calibration_ratio_mean,
                m2=profile.calibration_ratio_m2,
            ),
            estimated,
            actual,
        )
        ModelProfile.objects.filter(pk=profile_id).update(
            calibration_samples=state.count,
            calibration_ratio_mean=state.mean,
            calibration_ratio_m2=state.m2,
            calibration_updated_at=timezone.now(),
        )
