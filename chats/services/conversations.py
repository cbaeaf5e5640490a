"""Conversations: creation, participants and the window of history the prompt keeps."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from chatplatform.models import Tenant
from chatplatform.models.conversations import Conversation, Participant
from chatplatform.tenancy.scoping import tenant_scope
from chats.services.retention import conversations_remove


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
    excerpt_ids: Sequence[Any] = (),
) -> None:
    """Remember the window a prompt just sent to the provider (its oldest history message's
    seq, the retrieved messages it holds and which of them as excerpts, and when), so the
    next turn, in any process, continues it while the provider caches it."""
    recalled = list(recalled_ids)
    shown = set(recalled)
    excerpts = [i for i in excerpt_ids if i in shown]
    with tenant_scope(conversation.tenant_id):
        Conversation.objects.filter(pk=conversation.pk, tenant_id=conversation.tenant_id).update(
            window_start_seq=start_seq,
            window_recalled_ids=recalled,
            window_excerpt_ids=excerpts,
            window_sent_at=sent_at,
            window_full_tokens=full_tokens,
            window_summary_ids=list(summary_ids),
        )
    conversation.window_summary_ids = list(summary_ids)
    conversation.window_full_tokens = full_tokens
    conversation.window_start_seq, conversation.window_sent_at = start_seq, sent_at
    conversation.window_recalled_ids = recalled
    conversation.window_excerpt_ids = excerpts


def _clean_title(title: str) -> str:
    """A title as stored: one line, spaces collapsed, at most 200 characters."""
    return " ".join(title.split())[:200]


def conversation_rename(conversation: Conversation, *, title: str) -> Conversation:
    """Give the conversation ``title`` (blank: untitled again, so the first exchange may
    name it). The title is the user's from now on: naming by the first exchange never
    overwrites it."""
    conversation.title = _clean_title(title)
    with tenant_scope(conversation.tenant_id):
        conversation.save(update_fields=["title", "updated_at"])
    return conversation


def conversation_archive(conversation: Conversation) -> Conversation:
    """Archive the conversation (hidden from the list until restored). Idempotent: an
    archived conversation keeps the time of its first archive."""
    if conversation.archived_at is None:
        conversation.archived_at = timezone.now()
        with tenant_scope(conversation.tenant_id):
            conversation.save(update_fields=["archived_at", "updated_at"])
    return conversation


def conversation_unarchive(conversation: Conversation) -> Conversation:
    """Restore an archived conversation to the list (idempotent)."""
    if conversation.archived_at is not None:
        conversation.archived_at = None
        with tenant_scope(conversation.tenant_id):
            conversation.save(update_fields=["archived_at", "updated_at"])
    return conversation


def conversation_update(
    conversation: Conversation, *, title: str | None = None, archived: bool | None = None
) -> Conversation:
    """Rename (``title``) and/or archive or restore (``archived``); None leaves it as is."""
    if title is not None:
        conversation_rename(conversation, title=title)
    if archived is True:
        conversation_archive(conversation)
    elif archived is False:
        conversation_unarchive(conversation)
    return conversation


def conversation_may_delete(conversation: Conversation, user: Any, *, admin: bool) -> bool:
    """Deleting removes the conversation for everyone in it: only its creator or an admin of
    its tenant may. Everyone else leaves it instead (:func:`conversation_leave`)."""
    return admin or (user is not None and conversation.created_by_id == user.pk)


def conversation_delete(conversation: Conversation, *, by: Any, admin: bool = False) -> None:
    """Delete the conversation with its messages, summaries and images (its turn records
    stay for the usage reports: :mod:`chats.services.retention`), if
    ``by`` may (:func:`conversation_may_delete`); conversations that continued it keep
    existing without the link."""
    if not conversation_may_delete(conversation, by, admin=admin):
        raise ConversationRejected(
            "forbidden", "Only the conversation's creator or a tenant admin may delete it."
        )
    conversations_remove(conversation.tenant_id, [conversation.pk])


def conversation_leave(conversation: Conversation, *, user: Any) -> bool:
    """Take ``user`` out of the conversation: it leaves their list and they lose access; the
    others keep it with its history. The last participant to leave deletes it (nobody could
    reach it any more). Returns True when the conversation was deleted."""
    with tenant_scope(conversation.tenant_id), transaction.atomic():
        Participant.objects.filter(conversation_id=conversation.pk, user=user).delete()
        if Participant.objects.filter(conversation_id=conversation.pk).exists():
            return False
        conversations_remove(conversation.tenant_id, [conversation.pk])
    return True


def conversation_start(*, tenant: Tenant, user: Any) -> Conversation:
    """The "new chat" of the web UI: the user's newest conversation that is still empty
    (untitled, no messages, theirs alone, not archived) if there is one, else a new one; so
    pressing "New chat" twice does not leave empty conversations behind."""
    with tenant_scope(tenant):
        empty = (
            Conversation.objects.filter(
                created_by=user,
                title="",
                message_count=0,
                is_group=False,
                continues__isnull=True,
                archived_at__isnull=True,
                pk__in=Participant.objects.filter(user=user).values("conversation_id"),
            )
            .order_by("-pk")
            .first()
        )
    return empty or conversation_create(tenant=tenant, created_by=user)
