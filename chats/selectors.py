"""Reads of the chats app. Every selector takes the user (and tenant) it answers for, and
answers None / empty for objects that are missing and for objects that are not theirs alike."""

from __future__ import annotations

from typing import Any

from chatplatform.models import Membership
from chatplatform.tenancy.scoping import all_tenants, tenant_scope
from chats.models import Conversation, Participant


def conversation_for_member(
    user: Any, conversation_id: Any, *, tenant_id: int | None = None
) -> Conversation | None:
    """The conversation if ``user`` is a member of its tenant and a participant (and, when
    ``tenant_id`` is given, it belongs to that tenant); else None."""
    try:
        conversation_id = int(conversation_id)
    except (TypeError, ValueError):
        return None
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    with all_tenants():
        conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None or (tenant_id is not None and conversation.tenant_id != tenant_id):
        return None
    with tenant_scope(conversation.tenant_id):
        if not Membership.objects.filter(user=user, tenant__is_active=True).exists():
            return None
        if not Participant.objects.filter(conversation=conversation, user=user).exists():
            return None
    return conversation
