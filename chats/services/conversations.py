"""Conversations: creation, participants and the window of history the prompt keeps."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction

from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Participant
from chatplatform.tenancy.scoping import tenant_scope


class ConversationRejected(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


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
