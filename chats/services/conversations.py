"""Conversations: creation, participants, and the policy that governs them."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Subquery
from django.db.models.signals import post_delete, post_save

from chatplatform.models import ContextPolicy, Tenant
from chatplatform.tenancy.scoping import tenant_scope
from chats.models import Conversation, Participant


class ConversationRejected(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: Policies are read on every message; a short-lived per-process copy saves two queries per
#: read. Saving a policy or a tenant clears this process's copies at once; other processes
#: see a change within POLICY_CACHE_SECONDS.
POLICY_CACHE_SECONDS = 5.0
_policy_cache: dict[tuple[int, int | None], tuple[float, ContextPolicy]] = {}


def clear_policy_cache(*_args: Any, **_kwargs: Any) -> None:
    _policy_cache.clear()


def cached_policy(conversation: Conversation) -> ContextPolicy | None:
    """This process's recent copy of the conversation's policy, or None (no query: async
    code uses it to skip a trip to a database thread)."""
    cached = _policy_cache.get((conversation.tenant_id, conversation.policy_id))
    if cached is not None and time.monotonic() - cached[0] < POLICY_CACHE_SECONDS:
        return cached[1]
    return None


def policy_for(conversation: Conversation) -> ContextPolicy:
    """The policy of a conversation: its own override, else the tenant's active policy, else
    the Hybrid preset. Raises ContextPolicy.DoesNotExist only if the presets were deleted."""
    cached = cached_policy(conversation)
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
                tenant__isnull=True, name="Hybrid"
            )
    if len(_policy_cache) > 10_000:
        _policy_cache.clear()
    _policy_cache[key] = (now, policy)
    return policy


@transaction.atomic
def conversation_create(
    *,
    tenant: Tenant,
    created_by: Any,
    title: str = "",
    participants: list[Any] | None = None,
    continues: Conversation | None = None,
    carry_over_summary: bool = True,
) -> Conversation:
    """Create a conversation with its creator (and any others) as participants.

    ``continues`` must be an earlier conversation of the same tenant in which ``created_by``
    took part; its latest summary is carried into the new context unless turned off.
    """
    others = [u for u in (participants or []) if u.pk != created_by.pk]
    with tenant_scope(tenant):
        if continues is not None:
            allowed = Participant.objects.filter(
                conversation_id=continues.pk, user=created_by
            ).exists()
            if continues.tenant_id != tenant.pk or not allowed:
                raise ConversationRejected(
                    "not_found", "The conversation to continue does not exist."
                )
        conversation = Conversation.objects.create(
            tenant=tenant,
            title=title[:200],
            created_by=created_by,
            is_group=bool(others),
            continues=continues,
            carry_over_summary=carry_over_summary,
        )
        for user in [created_by, *others]:
            Participant.objects.create(tenant=tenant, conversation=conversation, user=user)
    return conversation


def participant_add(*, conversation: Conversation, user: Any) -> None:
    with tenant_scope(conversation.tenant_id):
        Participant.objects.get_or_create(
            tenant_id=conversation.tenant_id, conversation=conversation, user=user
        )
        Conversation.objects.filter(pk=conversation.pk).update(is_group=True)


for _model in (ContextPolicy, Tenant):
    post_save.connect(clear_policy_cache, sender=_model, dispatch_uid=f"policy-cache-{_model}")
    post_delete.connect(clear_policy_cache, sender=_model, dispatch_uid=f"policy-del-{_model}")


def conversation_window_advance(
    conversation: Conversation,
    start_seq: int | None,
    recalled_ids: Sequence[Any],
    sent_at: datetime,
    full_tokens: int = 0,
    summary_ids: Sequence[Any] = (),
) -> None:
    """Remember the window a prompt just sent to the provider (its oldest history message's
    seq, the retrieved messages it holds, and when), so the next turn, in any process,
    continues it while the provider caches it."""
    recalled = list(recalled_ids)
    with tenant_scope(conversation.tenant_id):
        Conversation.objects.filter(pk=conversation.pk, tenant_id=conversation.tenant_id).update(
            window_start_seq=start_seq,
            window_recalled_ids=recalled,
            window_sent_at=sent_at,
            window_full_tokens=full_tokens,
            window_summary_ids=list(summary_ids),
        )
    conversation.window_summary_ids = list(summary_ids)
    conversation.window_full_tokens = full_tokens
    conversation.window_start_seq, conversation.window_sent_at = start_seq, sent_at
    conversation.window_recalled_ids = recalled
