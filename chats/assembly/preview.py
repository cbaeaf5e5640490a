"""Previews: what the next turn of a conversation would send (nothing is stored).

A turn is someone's: their facts and their name go into the prompt. A preview therefore
assembles the turn of a person who could send it, a member of the conversation's tenant who
takes part in the conversation; by default the author of its last user message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import F
from django.utils import timezone

from chatplatform.core.context.types import MessageItem
from chatplatform.models import ContextPolicy
from chatplatform.models.conversations import Conversation, Message, MessageRole, Participant
from chatplatform.tenancy.scoping import tenant_scope
from chats.assembly.records import breakdown
from chats.assembly.service import assemble_context

PREVIEW_PLACEHOLDER = "(your next message)"


class NotATurnAuthor(LookupError):
    """Nobody by that name takes part in the conversation as a member of its tenant: said
    alike of a name nobody has and of a person of another tenant."""


def _taking_part(tenant_ids: list[int], conversation_ids: list[int]) -> Any:
    """Participants of the conversations who are members of the conversation's tenant (to be
    evaluated inside the tenants' scope)."""
    return Participant.objects.filter(
        tenant_id__in=tenant_ids,
        conversation_id__in=conversation_ids,
        user__memberships__tenant_id=F("tenant_id"),
    )


def turn_authors(conversations: Iterable[Conversation]) -> set[tuple[int, int]]:
    """``(conversation id, user id)`` of everyone whose turn may be previewed on one of
    ``conversations``."""
    conversations = list(conversations)
    tenant_ids = sorted({c.tenant_id for c in conversations})
    with tenant_scope(tenant_ids):
        return set(
            _taking_part(tenant_ids, [c.pk for c in conversations]).values_list(
                "conversation_id", "user_id"
            )
        )


def turn_author(conversation: Conversation, username: str = "") -> Any:
    """Whose turn the preview assembles: the person named ``username``, who must take part in
    the conversation as a member of its tenant (else NotATurnAuthor); without a name, the
    author of the last user message while they still do (else None: a turn without facts)."""
    with tenant_scope(conversation.tenant_id):
        people = _taking_part([conversation.tenant_id], [conversation.pk]).select_related("user")
        if username:
            participant = people.filter(user__username=username).first()
            if participant is None:
                raise NotATurnAuthor(
                    f"{username} does not take part in this conversation as a member of its tenant."
                )
            return participant.user
        last_author = (
            Message.objects.filter(
                conversation=conversation, role=MessageRole.USER, author_id__isnull=False
            )
            .order_by("-seq")
            .values_list("author_id", flat=True)
            .first()
        )
        if last_author is None:
            return None
        participant = people.filter(user_id=last_author).first()
        return participant.user if participant is not None else None


def preview_next_turn(
    conversation: Conversation,
    *,
    text: str = "",
    author: Any = None,
    policy: ContextPolicy | None = None,
) -> dict[str, Any]:
    """The breakdown ``author``'s next turn would produce under ``policy`` (default: the
    active one); without an author, a turn without facts.

    Read-only: the hypothetical message is not stored.
    """
    item = MessageItem(
        id="preview",
        seq=conversation.last_seq + 1,
        role="user",
        content=text or PREVIEW_PLACEHOLDER,
        created_at=timezone.now(),
    )
    turn = assemble_context(conversation, item, author=author, policy=policy)
    data = breakdown(turn)
    data["policy"] = {"id": turn.policy.pk, "name": turn.policy.name}
    data["author"] = getattr(author, "username", None)
    return data
