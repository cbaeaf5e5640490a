"""The counters a tenant's messages must be counted with.

A message's stored count must come from the counter of its policy's model
(:func:`chatplatform.counting.storage_counter_for`): the conversation's own policy, else the
tenant's active policy. :class:`Targets` holds the tenant's default counter and the few
conversations whose own policy counts with another one.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from chatplatform.core.tokens import TokenCounter
from chatplatform.counting import storage_counter_for
from chatplatform.models import ContextPolicy, Tenant
from chatplatform.models.conversations import Conversation
from chatplatform.policies import active_policy
from chatplatform.tenancy.scoping import tenant_scope


@dataclass(frozen=True)
class Targets:
    """The counters a tenant's messages must be counted with."""

    default: TokenCounter
    overrides: dict[int, TokenCounter]  # conversation id -> counter, where != default

    @property
    def signature(self) -> str:
        """Names the counters in force; stored per tenant so that a change of model or
        tokenizer starts a new verifying pass (``TokenBackfillState``)."""
        if not self.overrides:
            return self.default.name
        pairs = ",".join(f"{c}:{k.name}" for c, k in sorted(self.overrides.items()))
        digest = hashlib.sha256(pairs.encode()).hexdigest()[:16]
        return f"{self.default.name}|{digest}"[:200]

    def for_conversation(self, conversation_id: int) -> TokenCounter:
        return self.overrides.get(conversation_id, self.default)


def _tenant_policy(tenant: Tenant) -> ContextPolicy | None:
    # Fresh: a pass must see a tokenizer changed a moment ago in another process.
    try:
        return active_policy(tenant, fresh=True)
    except ContextPolicy.DoesNotExist:  # the presets were deleted: count with the default
        return None


def targets_for(tenant: Tenant) -> Targets:
    """The tenant's default counter and its conversations' overrides (bounded by how many
    conversations override the policy, normally few)."""
    policy = _tenant_policy(tenant)
    default = storage_counter_for(policy.model_profile if policy else None)
    overrides: dict[int, TokenCounter] = {}
    with tenant_scope(tenant.pk):
        pairs = list(
            Conversation.objects.filter(policy__isnull=False).values_list("pk", "policy_id")
        )
        if pairs:
            policies = {
                p.pk: p
                for p in ContextPolicy.objects.filter(
                    pk__in={pid for _, pid in pairs}
                ).select_related("model_profile")
            }
            for conversation_id, policy_id in pairs:
                own = policies.get(policy_id)
                if own is None:
                    continue
                counter = storage_counter_for(own.model_profile)
                if counter.name != default.name:
                    overrides[conversation_id] = counter
    return Targets(default=default, overrides=overrides)
