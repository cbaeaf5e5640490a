"""Which context policy governs a turn: the one selector for it.

A conversation's own policy if it has one, else its tenant's active policy, else the preset
every tenant starts with. Facts are the tenant's, not a conversation's, so they follow the
tenant's active policy (``active_policy``).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from django.db.models import Subquery
from django.db.models.signals import post_delete, post_save

from chatplatform.models import ContextPolicy, ModelProfile, Tenant
from chatplatform.tenancy.scoping import tenant_scope

#: The preset that governs a tenant with no active policy of its own.
DEFAULT_PRESET = "Hybrid"

#: Policies are read on every message; a short-lived per-process copy saves two queries per
#: read. Saving a policy, a model profile or a tenant clears this process's copies at once;
#: other processes see a change within POLICY_CACHE_SECONDS.
POLICY_CACHE_SECONDS = 5.0
_policy_cache: dict[tuple[int, int | None], tuple[float, ContextPolicy]] = {}


class Governed(Protocol):
    """What picks a policy: a tenant and, for a conversation, its own override (or None)."""

    tenant_id: int
    policy_id: int | None


def clear_policy_cache(*_args: Any, **_kwargs: Any) -> None:
    _policy_cache.clear()


def cached_policy(conversation: Governed) -> ContextPolicy | None:
    """This process's recent copy of the conversation's policy, or None (no query: async
    code uses it to skip a trip to a database thread)."""
    cached = _policy_cache.get((conversation.tenant_id, conversation.policy_id))
    if cached is not None and time.monotonic() - cached[0] < POLICY_CACHE_SECONDS:
        return cached[1]
    return None


def policy_for(conversation: Governed, *, fresh: bool = False) -> ContextPolicy:
    """The policy of a conversation: its own override, else the tenant's active policy, else
    the default preset, with its model profile. ``fresh`` reads the database even when this
    process has a recent copy (a job that must see a change made a moment ago in another
    process). Raises ContextPolicy.DoesNotExist only if the presets were deleted."""
    cached = None if fresh else cached_policy(conversation)
    if cached is not None:
        return cached
    key = (conversation.tenant_id, conversation.policy_id)
    now = time.monotonic()
    with tenant_scope(conversation.tenant_id):
        policies = ContextPolicy.objects.select_related("model_profile")
        if conversation.policy_id:
            policy = policies.get(pk=conversation.policy_id)
        else:
            active = Tenant.objects.filter(pk=conversation.tenant_id).values("active_policy_id")
            policy = policies.filter(pk__in=Subquery(active)).first() or policies.get(
                tenant__isnull=True, name=DEFAULT_PRESET
            )
    if len(_policy_cache) > 10_000:
        _policy_cache.clear()
    _policy_cache[key] = (now, policy)
    return policy


class _TenantOnly:
    __slots__ = ("policy_id", "tenant_id")

    def __init__(self, tenant_id: int) -> None:
        self.tenant_id = tenant_id
        self.policy_id: int | None = None


def active_policy(tenant: Tenant | int, *, fresh: bool = False) -> ContextPolicy:
    """The tenant's active policy, else the default preset (what new conversations and the
    tenant's facts use)."""
    tenant_id = tenant if isinstance(tenant, int) else tenant.pk
    return policy_for(_TenantOnly(tenant_id), fresh=fresh)


def default_preset() -> ContextPolicy | None:
    """The default preset, or None if it was deleted."""
    return (
        ContextPolicy.objects.select_related("model_profile")
        .filter(tenant__isnull=True, name=DEFAULT_PRESET)
        .first()
    )


for _model in (ContextPolicy, ModelProfile, Tenant):
    post_save.connect(clear_policy_cache, sender=_model, dispatch_uid=f"policy-cache-{_model}")
    post_delete.connect(clear_policy_cache, sender=_model, dispatch_uid=f"policy-del-{_model}")
