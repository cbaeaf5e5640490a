"""Conversations: creation, participants, and the policy that governs them."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from chatplatform.models import ContextPolicy, Tenant
from chatplatform.tenancy.scoping import tenant_scope
from chats.models import Conversation, Participant


class ConversationRejected(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def policy_for(conversation: Conversation) -> ContextPolicy:
    """The policy of a conversation: its own override, else the tenant's active policy, else
    the Hybrid preset. Raises ContextPolicy.DoesNotExist only if the presets were deleted."""
    with tenant_scope(conversation.tenant_id):
        if conversation.policy_id:
            return ContextPolicy.objects.select_related("model_profile").get(
                pk=conversation.policy_id
            )
        tenant = Tenant.objects.get(pk=conversation.tenant_id)
        if tenant.active_policy_id:
            return ContextPolicy.objects.select_related("model_profile").get(
                pk=tenant.active_policy_id
            )
        return ContextPolicy.objects.select_related("model_profile").get(
            tenant__isnull=True, name="Hybrid"
        )


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
